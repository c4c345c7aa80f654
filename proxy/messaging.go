package proxy

import (
	"sync"

	"github.com/ternmq/tern/localstore"
	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/protocols/pulsar"
)

// messaging is a node's Pulsar-model state: loaded subscriptions, the
// producer registry, producer deduplication state and the schema lock. It is
// created on first use and torn down when the node stops.
type messaging struct {
	n         *Node
	subs      subRegistry
	producers producerRegistry
	dedup     dedupStates
	// schemaMu serialises schema additions, which read the latest version
	// and write the next.
	schemaMu sync.Mutex
}

var _ protocols.Messaging = (*Node)(nil)

// nodeMessaging maps each running *Node to its messaging state.
var nodeMessaging sync.Map

func (n *Node) messaging() *messaging {
	if v, ok := nodeMessaging.Load(n); ok {
		return v.(*messaging)
	}
	m := &messaging{n: n}
	m.subs.subs = map[subKey]*subscription{}
	m.producers.parts = map[localstore.PartitionID]*partProducers{}
	m.dedup.parts = map[localstore.PartitionID]*dedupState{}
	v, _ := nodeMessaging.LoadOrStore(n, m)
	return v.(*messaging)
}

// startMessaging wires the Pulsar side into a starting node: admin REST
// routes, the Pulsar listener when one is configured, and the shutdown of
// subscriptions (saving their cursors) once the front ends have stopped.
func (n *Node) startMessaging() {
	m := n.messaging()
	n.adminRoutes()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		<-n.stop
		m.subs.close()
		m.producers.close()
		nodeMessaging.Delete(n)
	}()
	if n.cfg.Listeners.Pulsar == "" {
		return
	}
	cfg := pulsar.DefaultConfig()
	cfg.MaxMessageSize = int(n.cfg.Limits.MaxMessageBytes)
	cfg.MaxConnections = n.cfg.Limits.MaxConnections
	cfg.MaxInflightBytes = int(n.cfg.Limits.MaxInflightBytes)
	cfg.ServerVersion = "tern/" + n.opts.Version
	cfg.Logger = n.log.With("component", "pulsar")
	register := n.registerPulsarMetrics(&cfg)
	srv, err := pulsar.NewServer(cfg, n)
	if err != nil {
		n.log.Error("the Pulsar listener is off: its configuration is invalid", "err", err)
		return
	}
	register(srv)
	n.addFrontend("pulsar", n.cfg.Listeners.Pulsar, srv)
}
