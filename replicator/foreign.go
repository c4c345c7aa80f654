package replicator

// In a full mesh a region sends only what was produced in it, yet its partition logs also hold
// everything the other regions sent it. A sender that read those entries only to drop them would
// read the log once per destination region for nothing. So the receiver, which knows exactly
// where it appended each replicated entry, records those offset ranges per partition, and senders
// that send only local entries jump over them without reading.
//
// The record is a hint kept in memory: a range is added only after its entries are appended
// (every offset in it holds an entry with a foreign origin), so skipping it is always right, and
// a range that is missing (after a restart, or dropped to bound memory) only costs a read.

import (
	"sort"
	"sync"

	"github.com/ternmq/tern/localstore"
)

// maxForeignRanges bounds the ranges kept per partition; the oldest go first.
const maxForeignRanges = 1024

type offsetRange struct{ from, to int64 }

type foreignRanges struct {
	mu sync.Mutex
	m  map[localstore.PartitionID][]offsetRange // sorted, disjoint, not adjacent
}

func newForeignRanges() *foreignRanges {
	return &foreignRanges{m: map[localstore.PartitionID][]offsetRange{}}
}

// add records that [from, to) of a partition holds replicated entries.
func (f *foreignRanges) add(pid localstore.PartitionID, from, to int64) {
	if to <= from {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	rs := f.m[pid]
	// Appends come in offset order, so the new range is nearly always at (or touching) the end.
	if n := len(rs); n > 0 && rs[n-1].to == from {
		rs[n-1].to = to
		return
	}
	if n := len(rs); n == 0 || rs[n-1].to < from {
		rs = append(rs, offsetRange{from, to})
	} else {
		i := sort.Search(len(rs), func(i int) bool { return rs[i].from > from })
		rs = append(rs, offsetRange{})
		copy(rs[i+1:], rs[i:])
		rs[i] = offsetRange{from, to}
		// Merge neighbours that now touch or overlap.
		out := rs[:0]
		for _, r := range rs {
			if k := len(out); k > 0 && out[k-1].to >= r.from {
				out[k-1].to = max(out[k-1].to, r.to)
				continue
			}
			out = append(out, r)
		}
		rs = out
	}
	if len(rs) > maxForeignRanges {
		rs = append(rs[:0], rs[len(rs)-maxForeignRanges:]...)
	}
	f.m[pid] = rs
}

// skip returns the end of the recorded range holding offset at, if any.
func (f *foreignRanges) skip(pid localstore.PartitionID, at int64) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rs := f.m[pid]
	i := sort.Search(len(rs), func(i int) bool { return rs[i].to > at })
	if i < len(rs) && rs[i].from <= at {
		return rs[i].to, true
	}
	return 0, false
}

// forget drops a partition's ranges (it was deleted).
func (f *foreignRanges) forget(pid localstore.PartitionID) {
	f.mu.Lock()
	delete(f.m, pid)
	f.mu.Unlock()
}
