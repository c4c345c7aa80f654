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

	wmu     sync.Mutex
	waiters map[*waiter]struct{}
	closed  bool
}

func newPartition(s *Store, pid PartitionID, h head) *partition {
	p := &partition{id: pid, store: s, head: h, waiters: map[*waiter]struct{}{}}
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
	for w := range p.waiters {
		w.signal()
		delete(p.waiters, w)
	}
	p.wmu.Unlock()
}

// close wakes every waiter for good: the partition is gone or the store
// is closing.
func (p *partition) close() {
	p.wmu.Lock()
	p.closed = true
	for w := range p.waiters {
		w.signal()
		delete(p.waiters, w)
	}
	p.wmu.Unlock()
}

// waiter is one blocked Wait call, registered on several partitions.
type waiter struct{ ch chan struct{} }

func (w *waiter) signal() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}
