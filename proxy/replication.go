package proxy

// Cross-region replication in the node: the replicator's engine runs with the node as its Host,
// its QUIC transport listens on mesh.mesh_addr, and its peers come from the mesh directory.
// Layer-3 dedup (replication) runs in the produce path's guard for every entry that carries an
// origin region; such entries skip the producer layers, whose state belongs to the origin.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ternmq/tern/dedup"
	"github.com/ternmq/tern/localstore"
	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/replicator"
)

// replication is the node's replication state.
type replication struct {
	engine    *replicator.Engine
	transport *replicator.Transport

	// dedup caches the layer-3 state per (partition, origin region). An entry is loaded from
	// storage on first use and updated by the guard under the partition's append lock, so the
	// next append of the same partition sees it even before the write's fsync completes.
	dedup struct {
		sync.Mutex
		m map[replKey]dedup.ReplState
	}
}

type replKey struct {
	pid    localstore.PartitionID
	origin string
}

func newReplication() *replication {
	r := &replication{}
	r.dedup.m = map[replKey]dedup.ReplState{}
	return r
}

// maxEnvelopeGrowth is what a sender may add to an entry (origin, visited regions, attributes)
// beyond the largest batch, when sizing link frames.
const maxEnvelopeGrowth = 64 << 10

// startReplicationTransport creates the engine and binds the mesh QUIC socket, before the mesh
// starts, so the address the node gossips is the bound one. Without mesh TLS the engine runs
// without a transport: policies work, and streams report that the transport is off.
func (n *Node) startReplicationTransport() error {
	rc := n.cfg.Replication
	ecfg := replicator.DefaultEngineConfig()
	ecfg.NodeName, ecfg.Region = n.cfg.Node.Name, n.cfg.Node.Region
	ecfg.StallAfter = time.Duration(rc.StallAfter)
	ecfg.ReadBytes = int(rc.ReadBytes)
	ecfg.RescanInterval = time.Duration(rc.RescanInterval)
	ecfg.RetryMax = time.Duration(rc.RetryMax)
	ecfg.RetryInitial = min(ecfg.RetryInitial, ecfg.RetryMax)
	ecfg.Logger = n.log
	ecfg.Now = n.opts.Now

	tcfg := replicator.DefaultConfig()
	tcfg.ListenAddr = n.cfg.Mesh.MeshAddr
	tcfg.NodeName, tcfg.Region = n.cfg.Node.Name, n.cfg.Node.Region
	tcfg.Logger = n.log
	tcfg.ReconnectMax = time.Duration(rc.RetryMax)
	tcfg.ReconnectInitial = min(tcfg.ReconnectInitial, tcfg.ReconnectMax)
	// A frame must hold the largest entry the node accepts, and a stream's credit one frame.
	tcfg.MaxFrameBytes = min(max(int(n.cfg.Limits.MaxMessageBytes)+maxEnvelopeGrowth, tcfg.MaxFrameBytes), 64<<20)
	tcfg.StreamCreditBytes = max(int64(rc.StreamCredit), int64(tcfg.MaxFrameBytes))
	switch {
	case n.cfg.Mesh.TLS.Cert != "":
		tcfg.TLS.CertFile, tcfg.TLS.KeyFile, tcfg.TLS.CAFile = n.cfg.Mesh.TLS.Cert, n.cfg.Mesh.TLS.Key, n.cfg.Mesh.TLS.CA
	case n.cfg.Mesh.Secret != "":
		tcfg.TLS.MeshSecret = n.cfg.Mesh.Secret
	}
	if n.opts.ReplicationTweak != nil {
		n.opts.ReplicationTweak(&tcfg, &ecfg)
	}
	eng, err := replicator.NewEngine(ecfg, n)
	if err != nil {
		return err
	}
	n.repl.engine = eng
	if tcfg.TLS.CertFile == "" && tcfg.TLS.MeshSecret == "" {
		n.log.Warn("replication links are off: set mesh.secret (dev mode) or mesh.tls to replicate between regions")
		return nil
	}
	var t *replicator.Transport
	if n.opts.MeshConn != nil {
		pc, err := n.opts.MeshConn(tcfg.ListenAddr)
		if err != nil {
			return fmt.Errorf("mesh.mesh_addr %s: %w", tcfg.ListenAddr, err)
		}
		t, err = replicator.NewWithConn(tcfg, eng, pc)
		if err != nil {
			return err
		}
	} else if t, err = replicator.New(tcfg, eng); err != nil {
		return err
	}
	n.repl.transport = t
	return nil
}

// meshQUICAddr is the replication address to gossip: the bound one when the transport runs.
func (n *Node) meshQUICAddr() string {
	if t := n.repl.transport; t != nil {
		return t.Addr().String()
	}
	return n.cfg.Mesh.MeshAddr
}

// startReplication starts the engine once the mesh runs.
func (n *Node) startReplication() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var members replicator.Membership
	if n.mesh != nil {
		members = n.mesh
	}
	return n.repl.engine.Start(ctx, n.repl.transport, members)
}

// stopReplication stops the senders, then the transport (which ends the streams being
// received and waits for them).
func (n *Node) stopReplication() error {
	var errs []error
	if n.repl.engine != nil {
		errs = append(errs, n.repl.engine.Close())
	}
	if n.repl.transport != nil {
		errs = append(errs, n.repl.transport.Close())
	}
	return errors.Join(errs...)
}

// Replication is the node's replication engine (nil before Start).
func (n *Node) Replication() *replicator.Engine { return n.repl.engine }

// ReplicationTransport is the node's mesh transport (nil before Start or without mesh TLS).
func (n *Node) ReplicationTransport() *replicator.Transport { return n.repl.transport }

// EnsureTopic implements replicator.Host: a topic replicated here from another region is
// created with the sender's partition count, in a tenant and namespace created if needed.
func (n *Node) EnsureTopic(ctx context.Context, name protocols.TopicName, partitions int, config map[string]string) (protocols.TopicInfo, error) {
	if info, err := n.Topic(ctx, name); err == nil || !errors.Is(err, protocols.ErrTopicNotFound) {
		return info, err
	}
	if err := n.ensureNamespace(name.NamespaceName()); err != nil {
		return protocols.TopicInfo{}, err
	}
	info, err := n.CreateTopic(ctx, name, partitions, config)
	if errors.Is(err, protocols.ErrTopicExists) {
		return n.Topic(ctx, name)
	}
	return info, err
}

// replicationGuard is layer 3 (DESIGN §5) for an entry with an origin region: the entry is
// appended only if it is past the highest origin offset applied from its origin on this
// partition, and the new high-water mark is written in the same pebble batch.
//
// The cached state moves in check, under the partition's append lock and before the write's
// fsync, so a copy of the same entry arriving on another stream meanwhile is recognised as a
// duplicate; the store answers that duplicate only once the original is durable (it waits until
// the high watermark covers the offsets the check answered with, the last entry applied from
// the origin). finish drops the cached state if the append failed after the check, so it is
// read again from storage.
func (n *Node) replicationGuard(pid localstore.PartitionID, h *protocols.BatchHeader, env *protocols.Envelope) (check func(int64) ([]localstore.Op, *localstore.AppendResult, error), finish func(error)) {
	origin := env.OriginRegion
	epoch, err := protocols.OriginEpoch(env)
	entry := dedup.ReplEntry{Epoch: epoch, Offset: env.OriginOffset, Count: h.OffsetCount()}
	key := replKey{pid: pid, origin: origin}
	r := n.repl
	check = func(base int64) ([]localstore.Op, *localstore.AppendResult, error) {
		if err != nil {
			return nil, nil, err
		}
		if origin == n.cfg.Node.Region {
			return nil, nil, fmt.Errorf("%w: an entry replicated back to its origin region %s", protocols.ErrCorruptEntry, origin)
		}
		r.dedup.Lock()
		defer r.dedup.Unlock()
		st, ok := r.dedup.m[key]
		if !ok {
			v, found, err := n.store.Get(localstore.ReplHWMKey(pid, origin))
			if err != nil {
				return nil, nil, err
			}
			if found {
				if st, err = dedup.DecodeReplState(v); err != nil {
					return nil, nil, err
				}
			}
		}
		verdict, err := st.Check(entry)
		if err != nil {
			return nil, nil, err
		}
		if verdict != dedup.ReplApply {
			r.dedup.m[key] = st
			return nil, &localstore.AppendResult{BaseOffset: st.LocalBase, Count: st.LocalCount}, nil
		}
		next := st.Applied(entry, base)
		r.dedup.m[key] = next
		return []localstore.Op{{Key: localstore.ReplHWMKey(pid, origin), Value: next.Encode()}}, nil, nil
	}
	finish = func(err error) {
		if err != nil {
			r.dedup.Lock()
			delete(r.dedup.m, key)
			r.dedup.Unlock()
		}
	}
	return check, finish
}

var _ replicator.Host = (*Node)(nil)
