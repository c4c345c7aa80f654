package proxy

import (
	"context"
	"sync"

	"github.com/ternmq/tern/dedup"
	"github.com/ternmq/tern/localstore"
	"github.com/ternmq/tern/protocols"
)

// Pulsar producer deduplication (DESIGN §5, layer 1) wired to the log.
//
// When a namespace enables deduplication, every entry whose envelope names
// a producer passes dedup.PulsarProducers under the partition's append lock
// (the Guard of localstore.AppendRequest). A new entry writes the producer's
// state (dedup.PulsarKind) in the same pebble batch; a resend writes nothing
// and is answered as a duplicate. The state of a partition is loaded from
// storage the first time it is needed.
//
// A duplicate's ProduceResult carries the original entry's offsets when the
// resend is of the producer's latest entry. Otherwise BaseOffset is -1 and
// LastOffset is the last offset submitted before the resend arrived: the
// original is at or below it. Either way the log answers only once those
// offsets are durable, so no resend is acknowledged while a crash could
// still take its original away.

type dedupStates struct {
	mu    sync.Mutex
	parts map[localstore.PartitionID]*dedupState
}

type dedupState struct {
	mu     sync.Mutex
	loaded bool
	p      *dedup.PulsarProducers
}

func (d *dedupStates) get(pid localstore.PartitionID) *dedupState {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.parts[pid]
	if st == nil {
		st = &dedupState{p: dedup.NewPulsarProducers()}
		d.parts[pid] = st
	}
	return st
}

// loadLocked reads a partition's producer records once.
func (st *dedupState) loadLocked(n *Node, pid localstore.PartitionID) error {
	if st.loaded {
		return nil
	}
	prefix := localstore.ProducerPrefix(pid, dedup.PulsarKind)
	err := n.store.Scan(context.Background(), prefix, func(k localstore.Key, v []byte) error {
		s, err := dedup.DecodePulsarState(v)
		if err != nil {
			return err
		}
		st.p.Load(string(k[len(prefix):]), s)
		return nil
	})
	if err != nil {
		return mapStoreErr(err)
	}
	st.loaded = true
	return nil
}

// pulsarGuard returns the layer-1 check and its finish for an append, or
// nil when it does not apply: no producer name, deduplication off for the
// namespace, or a replicated entry (layer 3 handles those).
//
// The check records the producer's new state at once, under the append
// lock, so the next append of the same name (possibly a resend arriving on
// another connection) sees it. If the append then fails before pebble takes
// the write, finish puts the previous state back, unless a later append has
// moved it on already. A failure after pebble took the write fails the
// store, which reloads the state from disk on restart.
func (n *Node) pulsarGuard(pid localstore.PartitionID, h *protocols.BatchHeader, env *protocols.Envelope, lim *topicLimits) (func(int64) ([]localstore.Op, *localstore.AppendResult, error), func(error)) {
	if env.ProducerName == "" || !lim.dedup || env.OriginRegion != "" || h.ProducerID >= 0 {
		return nil, nil
	}
	st := n.messaging().dedup.get(pid)
	name := env.ProducerName
	first, last := env.SequenceFirst, max(env.SequenceLast, env.SequenceFirst)
	count := h.OffsetCount()
	var prev, next dedup.PulsarState
	var hadPrev, recorded bool
	check := func(base int64) ([]localstore.Op, *localstore.AppendResult, error) {
		st.mu.Lock()
		defer st.mu.Unlock()
		if err := st.loadLocked(n, pid); err != nil {
			return nil, nil, err
		}
		if v := st.p.Check(name, first, last); v.Duplicate {
			if v.Base >= 0 {
				return nil, &localstore.AppendResult{BaseOffset: v.Base, Count: v.Last - v.Base + 1}, nil
			}
			// The original is somewhere below base: answer once all of it
			// is durable (the store waits for BaseOffset+Count).
			return nil, &localstore.AppendResult{BaseOffset: -1, Count: base + 1}, nil
		}
		prev, hadPrev = st.p.State(name)
		next = st.p.Record(name, last, base, base+count-1)
		recorded = true
		return []localstore.Op{{Key: localstore.ProducerKey(pid, dedup.PulsarKind, []byte(name)), Value: next.Encode()}}, nil, nil
	}
	finish := func(err error) {
		if err == nil || !recorded {
			return
		}
		st.mu.Lock()
		defer st.mu.Unlock()
		if cur, ok := st.p.State(name); ok && cur == next {
			st.p.Restore(name, prev, hadPrev)
		}
	}
	return check, finish
}

// pulsarLastSequence is the highest sequence id stored for a producer name
// when the partition's namespace deduplicates, else -1.
func (n *Node) pulsarLastSequence(ctx context.Context, pid localstore.PartitionID, p protocols.Partition, name string) (int64, error) {
	lim, err := n.limits(ctx, p.Topic)
	if err != nil {
		return -1, err
	}
	if !lim.dedup {
		return -1, nil
	}
	st := n.messaging().dedup.get(pid)
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := st.loadLocked(n, pid); err != nil {
		return -1, err
	}
	return st.p.Last(name), nil
}
