package localstore

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
)

// head is a partition's persistent summary, rewritten in the same pebble
// batch as every append and every retention step, so it always agrees with
// the entries on disk.
type head struct {
	Start      int64 // log start offset
	Next       int64 // offset the next entry gets
	Bytes      int64 // bytes of retained entries
	Entries    int64 // retained entries
	MaxTime    int64 // running max of record timestamps, Unix ms
	LastAppend int64 // last append time, Unix ms (append times never go back)
}

const headSize = 1 + 6*8

func (h *head) encode() []byte {
	b := make([]byte, 1, headSize)
	b[0] = 1
	for _, v := range []int64{h.Start, h.Next, h.Bytes, h.Entries, h.MaxTime, h.LastAppend} {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	return b
}

func decodeHead(b []byte) (head, error) {
	var h head
	if len(b) != headSize || b[0] != 1 {
		return h, fmt.Errorf("%w: partition head of %d bytes, version %v", ErrCorrupt, len(b), b[:min(1, len(b))])
	}
	f := []*int64{&h.Start, &h.Next, &h.Bytes, &h.Entries, &h.MaxTime, &h.LastAppend}
	for i, p := range f {
		*p = int64(binary.BigEndian.Uint64(b[1+8*i:]))
	}
	return h, nil
}

// indexValue is the small per-entry record that retention and time lookups
// scan instead of the entries themselves.
type indexValue struct {
	Count      int64 // offsets the entry covers
	Size       int64 // entry bytes
	AppendTime int64 // Unix ms, non-decreasing along the log
	MaxTime    int64 // running max of record timestamps up to this entry
}

const indexSize = 1 + 4*8

func (v *indexValue) encode() []byte {
	b := make([]byte, 1, indexSize)
	b[0] = 1
	for _, x := range []int64{v.Count, v.Size, v.AppendTime, v.MaxTime} {
		b = binary.BigEndian.AppendUint64(b, uint64(x))
	}
	return b
}

func decodeIndex(b []byte) (indexValue, error) {
	var v indexValue
	if len(b) != indexSize || b[0] != 1 {
		return v, fmt.Errorf("%w: entry index of %d bytes", ErrCorrupt, len(b))
	}
	v.Count = int64(binary.BigEndian.Uint64(b[1:]))
	v.Size = int64(binary.BigEndian.Uint64(b[9:]))
	v.AppendTime = int64(binary.BigEndian.Uint64(b[17:]))
	v.MaxTime = int64(binary.BigEndian.Uint64(b[25:]))
	return v, nil
}

// partition is the in-memory state of one log.
type partition struct {
	id    PartitionID
	store *Store

	// mu is the append lock: it orders offset assignment and the
	// submission of pebble batches, and guards head.
	mu   sync.Mutex
	head head

	// hw is one past the last entry readers may see (durable under sync).
	hw    atomic.Int64
	start atomic.Int64

	// The Wait calls blocked on the partition. wgen counts the wakes,
	// each of which empties waiters: a waiter's place in it (waitSlot) is
	// valid while wgen is what it was when the waiter was added.
	wmu     sync.Mutex
	waiters []waitRef
	wgen    uint64
	closed  bool
}

func newPartition(s *Store, pid PartitionID, h head) *partition {
	p := &partition{id: pid, store: s, head: h}
	p.hw.Store(h.Next)
	p.start.Store(h.Start)
	return p
}

// advance moves the high watermark forward to hw (never back) and wakes
// waiters. Two appenders may finish their fsync waits in either order; the
// later entry's durability implies the earlier one's (the WAL is written in
// offset order), so taking the max is correct.
func (p *partition) advance(hw int64) {
	for {
		cur := p.hw.Load()
		if hw <= cur {
			return
		}
		if p.hw.CompareAndSwap(cur, hw) {
			break
		}
	}
	p.wake()
}

func (p *partition) wake() {
	p.wmu.Lock()
	p.wakeLocked()
	p.wmu.Unlock()
}

func (p *partition) wakeLocked() {
	for _, r := range p.waiters {
		r.w.signal()
	}
	clear(p.waiters)
	p.waiters = p.waiters[:0]
	p.wgen++
}

// close wakes every waiter for good: the partition is gone or the store
// is closing.
func (p *partition) close() {
	p.wmu.Lock()
	p.closed = true
	p.wakeLocked()
	p.wmu.Unlock()
}

// waiter is one blocked Wait call, registered on several partitions: at[k]
// is its place among the waiters of the k-th partition it watches, read and
// written under that partition's wmu only.
//
// The waiters were a map per partition. A Kafka fetch that waits watches
// every partition it names, and adding and deleting a thousand map entries
// per fetch was a tenth of a node's CPU for a consumer of 1000 partitions;
// a waiter now leaves a partition by moving the last one into its place.
type waiter struct {
	ch chan struct{}
	at []waitSlot
}

// waitRef is a waiter in a partition's list, and which of its places
// (waiter.at) is this one.
type waitRef struct {
	w *waiter
	k int
}

type waitSlot struct {
	i   int
	gen uint64
}

// addLocked adds w to p's waiters as its k-th watch; p.wmu is held.
func (p *partition) addLocked(w *waiter, k int) {
	w.at[k] = waitSlot{i: len(p.waiters), gen: p.wgen}
	p.waiters = append(p.waiters, waitRef{w: w, k: k})
}

// remove takes w's k-th watch out of p's waiters, if a wake has not.
func (p *partition) remove(w *waiter, k int) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	sl := w.at[k]
	if sl.gen != p.wgen {
		return // woken: the wake emptied the list
	}
	last := len(p.waiters) - 1
	if sl.i != last {
		moved := p.waiters[last]
		p.waiters[sl.i] = moved
		moved.w.at[moved.k].i = sl.i
	}
	p.waiters[last] = waitRef{}
	p.waiters = p.waiters[:last]
}

func (w *waiter) signal() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}
