package proxy

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/ternmq/tern/localstore"
	"github.com/ternmq/tern/protocols"
)

// The producer registry (protocols.Producers): which Pulsar producer names
// are attached to each partition, and who holds exclusive access. It is a
// small shared index under one mutex; nothing in it blocks.

type producerRegistry struct {
	mu     sync.Mutex
	parts  map[localstore.PartitionID]*partProducers
	closed bool
	seq    atomic.Int64
}

type partProducers struct {
	active map[string]*producerLease
	// waiting are WaitForExclusive producers, in arrival order.
	waiting []*producerLease
	// exclusive is the producer holding exclusive access, if any.
	exclusive *producerLease
}

type producerLease struct {
	reg     *producerRegistry
	pid     localstore.PartitionID
	name    string
	epoch   uint64
	mode    protocols.ProducerAccessMode
	lastSeq int64
	ready   chan struct{}
	revoked chan struct{}
	// Guarded by reg.mu.
	isReady, isRevoked, closed bool
}

func (l *producerLease) Name() string             { return l.name }
func (l *producerLease) LastSequence() int64      { return l.lastSeq }
func (l *producerLease) Ready() <-chan struct{}   { return l.ready }
func (l *producerLease) Revoked() <-chan struct{} { return l.revoked }

// OpenProducer implements protocols.Producers.
func (n *Node) OpenProducer(ctx context.Context, p protocols.Partition, req protocols.ProducerRequest) (protocols.ProducerLease, error) {
	pid, err := n.pid(p)
	if err != nil {
		return nil, err
	}
	if req.AccessMode < protocols.AccessShared || req.AccessMode > protocols.AccessExclusiveWithFencing {
		return nil, fmt.Errorf("%w: producer access mode %d: want Shared (0), Exclusive (1), WaitForExclusive (2) or ExclusiveWithFencing (3)",
			protocols.ErrInvalidConfig, req.AccessMode)
	}
	m := n.messaging()
	name := req.Name
	if name == "" {
		name = n.cfg.Node.Region + "-" + n.cfg.Node.Name + "-" + strconv.FormatInt(m.producers.seq.Add(1), 10)
	}
	last, err := n.pulsarLastSequence(ctx, pid, p, name)
	if err != nil {
		return nil, err
	}
	l := &producerLease{
		reg: &m.producers, pid: pid, name: name, epoch: req.Epoch, mode: req.AccessMode, lastSeq: last,
		ready: make(chan struct{}), revoked: make(chan struct{}),
	}
	if err := m.producers.open(l); err != nil {
		return nil, err
	}
	return l, nil
}

func (r *producerRegistry) open(l *producerLease) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return protocols.ErrClosed
	}
	pp := r.parts[l.pid]
	if pp == nil {
		pp = &partProducers{active: map[string]*producerLease{}}
		r.parts[l.pid] = pp
	}
	if old := pp.find(l.name); old != nil {
		if l.epoch <= old.epoch {
			return fmt.Errorf("%w: a producer named %q is already connected to this topic; use another name or close it first",
				protocols.ErrProducerBusy, l.name)
		}
		// The same producer reconnected before its old connection was
		// noticed gone.
		r.dropLocked(pp, old, true)
	}
	switch l.mode {
	case protocols.AccessShared:
		if pp.exclusive != nil {
			return fmt.Errorf("%w: producer %q holds exclusive access to this topic", protocols.ErrProducerBusy, pp.exclusive.name)
		}
	case protocols.AccessExclusive:
		if pp.exclusive != nil || len(pp.active) > 0 {
			return fmt.Errorf("%w: exclusive access refused: the topic has %d other producers", protocols.ErrProducerFenced, len(pp.active))
		}
		pp.exclusive = l
	case protocols.AccessExclusiveWithFencing:
		for _, o := range pp.active {
			r.dropLocked(pp, o, true)
		}
		for _, o := range pp.waiting {
			r.dropLocked(pp, o, true)
		}
		pp.exclusive = l
	case protocols.AccessWaitForExclusive:
		if pp.exclusive != nil || len(pp.active) > 0 {
			pp.waiting = append(pp.waiting, l)
			return nil
		}
		pp.exclusive = l
	}
	pp.active[l.name] = l
	l.isReady = true
	close(l.ready)
	return nil
}

func (pp *partProducers) find(name string) *producerLease {
	if l := pp.active[name]; l != nil {
		return l
	}
	for _, l := range pp.waiting {
		if l.name == name {
			return l
		}
	}
	return nil
}

// dropLocked removes a lease, revoking it when asked, and promotes the
// next waiting producer when the partition becomes free.
func (r *producerRegistry) dropLocked(pp *partProducers, l *producerLease, revoke bool) {
	if pp.active[l.name] == l {
		delete(pp.active, l.name)
	}
	for i, w := range pp.waiting {
		if w == l {
			pp.waiting = append(pp.waiting[:i:i], pp.waiting[i+1:]...)
			break
		}
	}
	if pp.exclusive == l {
		pp.exclusive = nil
	}
	if revoke && !l.isRevoked {
		l.isRevoked = true
		close(l.revoked)
	}
	if len(pp.active) == 0 && pp.exclusive == nil && len(pp.waiting) > 0 {
		w := pp.waiting[0]
		pp.waiting = pp.waiting[1:]
		pp.exclusive = w
		pp.active[w.name] = w
		w.isReady = true
		close(w.ready)
	}
}

// Close implements protocols.ProducerLease.
func (l *producerLease) Close() {
	r := l.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	if pp := r.parts[l.pid]; pp != nil {
		r.dropLocked(pp, l, false)
		if len(pp.active) == 0 && len(pp.waiting) == 0 {
			delete(r.parts, l.pid)
		}
	}
}

// producers lists the producers attached to a partition (for stats).
func (r *producerRegistry) list(pid localstore.PartitionID) []*producerLease {
	r.mu.Lock()
	defer r.mu.Unlock()
	pp := r.parts[pid]
	if pp == nil {
		return nil
	}
	out := make([]*producerLease, 0, len(pp.active))
	for _, l := range pp.active {
		out = append(out, l)
	}
	return out
}

// close revokes every lease.
func (r *producerRegistry) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for _, pp := range r.parts {
		for _, l := range pp.active {
			if !l.isRevoked {
				l.isRevoked = true
				close(l.revoked)
			}
		}
		for _, l := range pp.waiting {
			if !l.isRevoked {
				l.isRevoked = true
				close(l.revoked)
			}
		}
	}
}
