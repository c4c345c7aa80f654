package localstore

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// TimeKind selects which time LookupTime searches.
type TimeKind int

const (
	// EventTime searches record timestamps (their running maximum, as
	// Kafka's time index does, since producers may send them out of order).
	EventTime TimeKind = iota
	// AppendTime searches publish times, which never go back.
	AppendTime
)

// LookupTime returns the base offset of the first entry whose time (of the
// given kind) is at or after ts, Unix ms. found is false when every entry
// is older; the offset is then the high watermark.
//
// Both times are non-decreasing along the log, so this is a binary search
// over the entry index: O(log n) pebble seeks, no entry is read.
func (s *Store) LookupTime(pid PartitionID, ts int64, kind TimeKind) (offset int64, found bool, err error) {
	p, err := s.partition(pid)
	if err != nil {
		return 0, false, err
	}
	hw := p.hw.Load()
	lo := p.start.Load()
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: pidPrefix(kindIndex, pid),
		UpperBound: logKey(kindIndex, pid, hw),
	})
	if err != nil {
		return 0, false, err
	}
	defer it.Close()
	// Find the entry holding lo: the log start may sit inside an entry.
	if it.SeekLT(logKey(kindIndex, pid, lo+1)) {
		_, base, _ := decodeLogKey(it.Key())
		lo = base
	}
	hi := hw
	answer := int64(-1)
	for lo < hi {
		mid := lo + (hi-lo)/2
		if !it.SeekGE(logKey(kindIndex, pid, mid)) {
			hi = mid
			continue
		}
		base, iv, err := indexAt(it, pid)
		if err != nil {
			return 0, false, err
		}
		t := iv.MaxTime
		if kind == AppendTime {
			t = iv.AppendTime
		}
		if t >= ts {
			answer = base
			hi = mid
		} else {
			lo = base + iv.Count
		}
	}
	if err := it.Error(); err != nil {
		return 0, false, err
	}
	if answer < 0 {
		return hw, false, nil
	}
	return max(answer, p.start.Load()), true, nil
}

// AppendTimeAt returns the append time (Unix ms) of the entry holding
// offset, from the entry index: no entry is read. ok is false when the
// offset is not in the log.
func (s *Store) AppendTimeAt(pid PartitionID, offset int64) (t int64, ok bool, err error) {
	p, err := s.partition(pid)
	if err != nil {
		return 0, false, err
	}
	if offset < p.start.Load() || offset >= p.hw.Load() {
		return 0, false, nil
	}
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: pidPrefix(kindIndex, pid),
		UpperBound: logKey(kindIndex, pid, offset+1),
	})
	if err != nil {
		return 0, false, err
	}
	defer it.Close()
	if !it.Last() {
		return 0, false, it.Error()
	}
	base, iv, err := indexAt(it, pid)
	if err != nil {
		return 0, false, err
	}
	if base+iv.Count <= offset {
		return 0, false, nil
	}
	return iv.AppendTime, true, nil
}

// indexAt decodes the index record of partition pid where it stands: the
// entry's base offset and its record.
func indexAt(it *pebble.Iterator, pid PartitionID) (int64, indexValue, error) {
	_, base, _ := decodeLogKey(it.Key())
	v, err := it.ValueAndErr()
	if err != nil {
		return base, indexValue{}, err
	}
	iv, err := decodeIndex(v)
	if err != nil {
		return base, iv, fmt.Errorf("partition %d offset %d: %w", pid, base, err)
	}
	return base, iv, nil
}
