package replicator

// The engine is the replication logic of one node. It owns:
//
//   - the policy store, fed by the system topic's log (policy_store.go);
//   - the peer table, fed by the region directory (peers.go);
//   - one sender per (local partition, destination region) that a policy asks for (sender.go);
//   - the receiving side of every stream peers open to this node (receiver.go).
//
// One goroutine, the controller, owns the set of senders: whenever a policy or the membership
// changes, and every RescanInterval (to see topics created or deleted), it computes the senders
// the policies call for and starts or stops the difference. Senders never decide their own
// existence; a sender that finds its partition gone stops and asks the controller to look.

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ternmq/tern/localstore"
	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/regions"
)

// Engine replicates this node's partitions to other regions and receives theirs.
type Engine struct {
	cfg       EngineConfig
	host      Host
	log       *slog.Logger
	now       func() time.Time
	policies  *policyStore
	peers     *peerTable
	foreign   *foreignRanges
	transport *Transport
	members   Membership

	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	started atomic.Bool
	kick    chan struct{}

	// ahead is the node's runs read ahead of their sending (see sendAheadBytes); streaming counts
	// the senders with a stream open, which share sendAheadBytes in their reads.
	ahead     chan struct{}
	streaming atomic.Int32

	mu struct {
		sync.Mutex
		running bool
		closed  bool
		senders map[senderKey]*sender
		inbound map[inboundKey]*inbound
	}
}

// NewEngine validates the configuration. The engine does nothing until Start; it can be given
// to New as the transport's Handler first (streams that arrive before Start are refused and
// retried by their senders).
func NewEngine(cfg EngineConfig, host Host) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if host == nil {
		return nil, fmt.Errorf("replicator: NewEngine needs a Host")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	e := &Engine{
		cfg:  cfg,
		host: host,
		log:  cfg.Logger.With("region", cfg.Region),
		now:  cfg.Now,
		kick: make(chan struct{}, 1),
	}
	e.ahead = make(chan struct{}, max(2, sendAheadBytes/cfg.ReadBytes))
	e.policies = newPolicyStore(cfg.Region, &hlcClock{now: cfg.Now})
	e.peers = newPeerTable(cfg.Region, cfg.NodeName)
	e.foreign = newForeignRanges()
	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.mu.senders = map[senderKey]*sender{}
	e.mu.inbound = map[inboundKey]*inbound{}
	return e, nil
}

// Start creates the policy topic if needed, reads the policies, follows the membership and
// starts replicating. t may be nil on a node without mesh TLS: policies then work and every
// stream reports StreamOff. members may be nil for a node alone in its mesh.
func (e *Engine) Start(ctx context.Context, t *Transport, members Membership) error {
	e.mu.Lock()
	if e.mu.running || e.mu.closed {
		e.mu.Unlock()
		return fmt.Errorf("replicator: engine started twice or after Close")
	}
	e.mu.running = true
	e.mu.Unlock()
	e.transport, e.members = t, members
	sys, err := protocols.ParseTopicName(SystemTopic, "")
	if err != nil {
		return err
	}
	info, err := e.host.EnsureTopic(ctx, sys, 0, map[string]string{"retention.ms": "-1", "retention.bytes": "-1"})
	if err != nil {
		return fmt.Errorf("replicator: creating the policy topic %s: %w", SystemTopic, err)
	}
	if info.Partitions != 0 {
		return fmt.Errorf("replicator: the policy topic %s has %d partitions; it must be a non-partitioned topic", SystemTopic, info.Partitions)
	}
	loaded := make(chan struct{})
	e.wg.Add(1)
	go e.followPolicies(loaded)
	select {
	case <-loaded:
	case <-ctx.Done():
		e.cancel()
		e.wg.Wait()
		return ctx.Err()
	}
	if members != nil {
		e.wg.Add(1)
		go e.followMembers()
	}
	e.started.Store(true)
	e.wg.Add(1)
	go e.control()
	e.log.Info("replicator: replication engine started", "policies", len(e.policies.list(false)), "transport", t != nil)
	return nil
}

// Close stops every sender and the engine's goroutines and waits for them. Streams being
// received end when the transport closes (close the engine first, then the transport).
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.mu.closed {
		e.mu.Unlock()
		return nil
	}
	e.mu.closed = true
	e.mu.Unlock()
	e.started.Store(false)
	e.cancel()
	e.wg.Wait()
	return nil
}

func (e *Engine) kickControl() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// followMembers keeps the peer table and the transport's peers in step with the directory.
func (e *Engine) followMembers() {
	defer e.wg.Done()
	for e.ctx.Err() == nil {
		dir, events := e.members.SubscribeWithDirectory(e.ctx)
		add, remove, changed := e.peers.reset(dir)
		e.updatePeers(add, remove)
		if changed {
			e.kickControl()
		}
		overflow := false
		for ev := range events {
			if ev.Kind == regions.EventOverflow {
				overflow = true
				break
			}
			a, r, changed := e.peers.apply(ev)
			var adds []Peer
			if a != nil {
				adds = append(adds, *a)
			}
			var rems []string
			if r != "" {
				rems = append(rems, r)
			}
			e.updatePeers(adds, rems)
			if changed {
				e.kickControl()
			}
		}
		if !overflow {
			return // the mesh closed, or the engine is closing
		}
		e.log.Warn("replicator: fell behind the region directory; resubscribing")
	}
}

func (e *Engine) updatePeers(add []Peer, remove []string) {
	if e.transport == nil {
		return
	}
	for _, p := range add {
		if err := e.transport.AddPeer(p); err != nil && e.ctx.Err() == nil {
			e.log.Warn("replicator: cannot add mesh peer", "peer", p.Name, "addr", p.Addr, "err", err)
		}
	}
	for _, name := range remove {
		e.transport.RemovePeer(name)
	}
}

// control owns the set of senders.
func (e *Engine) control() {
	defer e.wg.Done()
	t := time.NewTicker(e.cfg.RescanInterval)
	defer t.Stop()
	for {
		e.reconcile()
		select {
		case <-e.ctx.Done():
			e.stopAll()
			return
		case <-t.C:
		case <-e.kick:
		case <-e.policies.changed:
		}
	}
}

// desired computes the senders the policies call for.
func (e *Engine) desired() map[senderKey]senderSpec {
	want := map[senderKey]senderSpec{}
	local := e.cfg.Region
	for _, t := range e.host.Store().Topics("") {
		name, err := protocols.ParseTopicName(t.Name, "")
		if err != nil || name.String() != t.Name {
			continue
		}
		var r route
		start := func(string) Start { return StartEarliest }
		if t.Name == SystemTopic {
			// Policies go to every region the mesh knows, directly from where they were written.
			r = route{dests: e.peers.remoteRegions(), originOnly: true}
		} else {
			p := e.policies.effective(name)
			r = routeFor(p, local)
			if p != nil {
				start = p.StartFor
			}
		}
		for _, dest := range r.dests {
			for i, pid := range t.PIDs {
				index := i
				if t.Partitions == 0 {
					index = -1
				}
				want[senderKey{pid: pid, dest: dest}] = senderSpec{
					topic: name, index: index, count: t.Partitions, pid: pid, epoch: t.CreatedMs,
					dest: dest, start: start(dest), originOnly: r.originOnly,
				}
			}
		}
	}
	return want
}

// reconcile starts and stops senders to match the policies.
func (e *Engine) reconcile() {
	if e.ctx.Err() != nil {
		return
	}
	want := e.desired()
	e.mu.Lock()
	var stop []*sender
	for k, s := range e.mu.senders {
		if spec, ok := want[k]; !ok || spec != s.spec {
			stop = append(stop, s)
			delete(e.mu.senders, k)
		}
	}
	e.mu.Unlock()
	for _, s := range stop {
		s.stop()
		if _, still := want[senderKey{pid: s.spec.pid, dest: s.spec.dest}]; !still {
			// The destination left the policy: forget the cursor, so that adding the region back
			// starts where the policy says then, not where this sender stopped.
			if err := e.host.Store().Write([]localstore.Op{{Key: localstore.ReplCursorKey(s.spec.pid, s.spec.dest), Delete: true}}, false); err != nil {
				e.log.Warn("replicator: cannot remove a replication cursor", "topic", s.spec.topic.String(), "dest", s.spec.dest, "err", err)
			}
			e.log.Info("replicator: replication stopped", "topic", s.spec.topic.String(), "partition", s.spec.index, "dest", s.spec.dest)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mu.closed {
		return
	}
	keys := make([]senderKey, 0, len(want))
	for k := range want {
		if _, ok := e.mu.senders[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b senderKey) int {
		if a.pid != b.pid {
			return int(a.pid) - int(b.pid)
		}
		if a.dest < b.dest {
			return -1
		}
		return 1
	})
	for _, k := range keys {
		s := newSender(e, want[k])
		e.mu.senders[k] = s
		s.start(e.ctx)
	}
	if len(keys) > 0 {
		e.log.Debug("replicator: senders started", "count", len(keys))
	}
}

func (e *Engine) stopAll() {
	e.mu.Lock()
	all := make([]*sender, 0, len(e.mu.senders))
	for k, s := range e.mu.senders {
		all = append(all, s)
		delete(e.mu.senders, k)
	}
	e.mu.Unlock()
	for _, s := range all {
		s.stop()
	}
}
