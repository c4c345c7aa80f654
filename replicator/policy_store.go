package replicator

// The policy store keeps the latest version of every policy record. Its input is the system
// topic's local log, which holds the records written here and those replicated from every other
// region: one goroutine reads the log from the start and then follows it, folding each record in
// by last-writer-wins. A local write appends to the log and folds its record in at once, so the
// writer reads its own write; the follower meets the same record later and keeps it (a record
// never beats itself). Because every region's log ends up with every region's records, and the
// fold is order-independent, all nodes converge on the same latest versions.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/ternmq/tern/localstore"
	"github.com/ternmq/tern/protocols"
)

type policyStore struct {
	region string
	clock  *hlcClock

	// writeMu serialises local writes so a compare-and-set reads and writes one record without
	// another local write in between.
	writeMu sync.Mutex

	mu struct {
		sync.RWMutex
		recs map[PolicyKey]*Policy
	}
	// changed receives a token whenever a fold changed a record (never blocks).
	changed chan struct{}
}

func newPolicyStore(region string, clock *hlcClock) *policyStore {
	ps := &policyStore{region: region, clock: clock, changed: make(chan struct{}, 1)}
	ps.mu.recs = map[PolicyKey]*Policy{}
	return ps
}

// fold applies one record by last-writer-wins and reports whether it became the latest.
func (ps *policyStore) fold(p *Policy) bool {
	ps.clock.Observe(p.Stamp)
	ps.mu.Lock()
	cur, ok := ps.mu.recs[p.PolicyKey]
	win := !ok || p.newer(cur)
	if win {
		ps.mu.recs[p.PolicyKey] = p
	}
	ps.mu.Unlock()
	if win {
		select {
		case ps.changed <- struct{}{}:
		default:
		}
	}
	return win
}

// get returns the latest version of a record (deleted ones included).
func (ps *policyStore) get(k PolicyKey) (*Policy, bool) {
	ps.mu.RLock()
	defer ps.mu.RUnlock()
	p, ok := ps.mu.recs[k]
	return p, ok
}

// effective is the policy that governs a topic: its own, else its namespace's, else nil (the
// topic stays in its region).
func (ps *policyStore) effective(t protocols.TopicName) *Policy {
	ps.mu.RLock()
	defer ps.mu.RUnlock()
	if p, ok := ps.mu.recs[PolicyKey{Kind: KindTopic, Name: t.String()}]; ok && !p.Deleted {
		return p
	}
	if p, ok := ps.mu.recs[PolicyKey{Kind: KindNamespace, Name: t.NamespaceName().String()}]; ok && !p.Deleted {
		return p
	}
	return nil
}

// list returns the latest version of every record, sorted by kind and name.
func (ps *policyStore) list(withDeleted bool) []Policy {
	ps.mu.RLock()
	out := make([]Policy, 0, len(ps.mu.recs))
	for _, p := range ps.mu.recs {
		if withDeleted || !p.Deleted {
			out = append(out, *p)
		}
	}
	ps.mu.RUnlock()
	slices.SortFunc(out, func(a, b Policy) int {
		if c := strings.Compare(string(a.Kind), string(b.Kind)); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// foldEntries folds every policy record in a run of system topic entries. A record that does
// not decode is logged and skipped: one bad record must not stop every policy.
func (e *Engine) foldEntries(entries []localstore.Entry) {
	dec := &protocols.Decompressor{}
	for _, se := range entries {
		ent, err := protocols.DecodeEntry(se.Value)
		if err != nil {
			e.log.Error("replicator: skipping a corrupt policy entry", "offset", se.BaseOffset, "err", err)
			continue
		}
		msgs, err := protocols.Records(ent.Batch, ent.Header, dec)
		if err != nil {
			e.log.Error("replicator: skipping a corrupt policy entry", "offset", se.BaseOffset, "err", err)
			continue
		}
		for _, m := range msgs {
			p, err := decodePolicy(m.Value)
			if err != nil {
				e.log.Error("replicator: skipping a policy record that does not decode", "offset", m.Offset, "key", string(m.Key), "err", err)
				continue
			}
			if e.policies.fold(p) {
				e.log.Info("replicator: policy updated", "policy", p.PolicyKey.String(), "version", p.Version,
					"regions", p.Regions, "deleted", p.Deleted, "writer", p.Writer)
			}
		}
	}
}

// followPolicies reads the system topic from its start and then follows it. It closes loaded
// once it has read up to the high watermark it found first.
func (e *Engine) followPolicies(loaded chan<- struct{}) {
	defer e.wg.Done()
	st := e.host.Store()
	once := sync.OnceFunc(func() { close(loaded) })
	defer once()
	pid, err := st.LookupPartition(SystemTopic, -1)
	if err != nil {
		e.log.Error("replicator: policy topic missing; policies are not followed", "err", err)
		return
	}
	_, hw, err := st.Offsets(pid)
	if err != nil {
		e.log.Error("replicator: reading the policy topic", "err", err)
		return
	}
	next := int64(0)
	for e.ctx.Err() == nil {
		if next >= hw {
			once()
		}
		entries, err := st.Read(pid, next, 1<<20)
		var oor *protocols.OffsetOutOfRangeError
		switch {
		case errors.As(err, &oor) && next < oor.Start:
			e.log.Warn("replicator: policy records were removed from the log; reading from its start", "from", next, "start", oor.Start)
			next = oor.Start
			continue
		case err != nil:
			if e.ctx.Err() == nil {
				e.log.Error("replicator: reading the policy topic stopped", "err", err)
			}
			return
		}
		if len(entries) == 0 {
			if err := st.Wait(e.ctx, []localstore.Watch{{PID: pid, Offset: next}}); err != nil && e.ctx.Err() == nil {
				e.log.Error("replicator: following the policy topic stopped", "err", err)
				return
			}
			continue
		}
		e.foldEntries(entries)
		last := entries[len(entries)-1]
		next = last.BaseOffset + last.Count
	}
}

// PolicyWrite asks for a policy change.
type PolicyWrite struct {
	Key PolicyKey
	// Spec is the new content; ignored by DeletePolicy.
	Spec PolicySpec
	// IfVersion, when set, makes the write a compare-and-set: it applies only if the record's
	// latest version on this node is this one (0: the record does not exist or was never
	// written).
	IfVersion *int64
	// DryRun validates and returns the version that would be written without writing it.
	DryRun bool
}

// PolicyChange is the outcome of a write: the version before (nil if none) and the new one.
type PolicyChange struct {
	Previous *Policy `json:"previous"`
	Policy   *Policy `json:"policy"`
	// Applied is false for a dry run.
	Applied bool `json:"applied"`
}

// SetPolicy writes a policy version: it validates the spec against the regions the mesh knows
// (refusing unknown ones with the list of known ones), checks IfVersion, appends the record to
// the system topic and returns once it is durable here. Other regions receive it by
// replication.
func (e *Engine) SetPolicy(ctx context.Context, w PolicyWrite) (PolicyChange, error) {
	if err := w.Key.Validate(); err != nil {
		return PolicyChange{}, err
	}
	if err := w.Spec.normalize(e.peers.known()); err != nil {
		return PolicyChange{}, err
	}
	return e.writePolicy(ctx, w, func(p *Policy) {
		p.Regions, p.Start, p.Topology, p.Hub = w.Spec.Regions, w.Spec.Start, w.Spec.Topology, w.Spec.Hub
	})
}

// DeletePolicy removes a policy: the topic or namespace falls back to its namespace's policy,
// or to staying local. It writes a tombstone version, so it orders against concurrent writes
// like any other version.
func (e *Engine) DeletePolicy(ctx context.Context, w PolicyWrite) (PolicyChange, error) {
	if err := w.Key.Validate(); err != nil {
		return PolicyChange{}, err
	}
	return e.writePolicy(ctx, w, func(p *Policy) { p.Deleted = true })
}

func (e *Engine) writePolicy(ctx context.Context, w PolicyWrite, fill func(*Policy)) (PolicyChange, error) {
	ps := e.policies
	ps.writeMu.Lock()
	defer ps.writeMu.Unlock()
	cur, ok := ps.get(w.Key)
	var curVersion int64
	if ok {
		curVersion = cur.Version
	}
	if w.IfVersion != nil && *w.IfVersion != curVersion {
		return PolicyChange{}, &VersionMismatchError{Key: w.Key, Expected: *w.IfVersion, Current: curVersion}
	}
	next := &Policy{PolicyKey: w.Key, Version: curVersion + 1, Writer: e.cfg.Region}
	fill(next)
	var prev *Policy
	if ok {
		prev = cur
	}
	if w.DryRun {
		next.Stamp = ps.clock.Now()
		return PolicyChange{Previous: prev, Policy: next}, nil
	}
	if !e.started.Load() {
		return PolicyChange{}, ErrNotStarted
	}
	next.Stamp = ps.clock.Now()
	val, err := encodePolicy(next)
	if err != nil {
		return PolicyChange{}, err
	}
	batch, err := protocols.AppendBatch(nil, protocols.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		[]protocols.Message{{Timestamp: next.Stamp.Wall, Key: []byte(w.Key.String()), Value: val}}, nil)
	if err != nil {
		return PolicyChange{}, err
	}
	sys, _ := protocols.ParseTopicName(SystemTopic, "")
	pp, err := e.host.StartProduce(ctx, protocols.Partition{Topic: sys, Index: -1}, protocols.ProduceRequest{Batch: batch})
	if err != nil {
		return PolicyChange{}, fmt.Errorf("replicator: writing policy %s: %w", w.Key, err)
	}
	if _, err := pp.Wait(); err != nil {
		return PolicyChange{}, fmt.Errorf("replicator: writing policy %s: %w", w.Key, err)
	}
	ps.fold(next)
	e.log.Info("replicator: policy written", "policy", w.Key.String(), "version", next.Version, "regions", next.Regions, "deleted", next.Deleted)
	return PolicyChange{Previous: prev, Policy: next, Applied: true}, nil
}

// Policy returns the latest version of a record, deleted or not.
func (e *Engine) Policy(k PolicyKey) (Policy, bool) {
	p, ok := e.policies.get(k)
	if !ok {
		return Policy{}, false
	}
	return *p, true
}

// Policies lists the latest version of every record.
func (e *Engine) Policies(withDeleted bool) []Policy { return e.policies.list(withDeleted) }

// EffectivePolicy is the policy that governs a topic, and false when none does.
func (e *Engine) EffectivePolicy(t protocols.TopicName) (Policy, bool) {
	if p := e.policies.effective(t); p != nil {
		return *p, true
	}
	return Policy{}, false
}

// KnownRegions lists the regions the mesh has seen, the local one included.
func (e *Engine) KnownRegions() []string { return e.peers.known() }
