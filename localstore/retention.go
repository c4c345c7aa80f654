package localstore

import (
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Retention bounds what a partition keeps. Zero fields mean no bound.
type Retention struct {
	// MaxAge removes entries appended longer ago than this.
	MaxAge time.Duration
	// MaxBytes removes the oldest entries while the log is larger.
	MaxBytes int64
}

// EnforceRetention deletes the oldest whole entries that fall outside r and
// moves the log start offset past them. It returns the number of entries
// removed. Entries are removed as key ranges in one pebble batch with the
// new head, so a crash leaves either the old or the new log start.
func (s *Store) EnforceRetention(pid PartitionID, r Retention) (int64, error) {
	n, err := s.enforceRetention(pid, r)
	if err == nil && n > 0 {
		s.kickCollection()
	}
	return n, err
}

func (s *Store) enforceRetention(pid PartitionID, r Retention) (int64, error) {
	if r.MaxAge <= 0 && r.MaxBytes <= 0 {
		return 0, nil
	}
	p, err := s.partition(pid)
	if err != nil {
		return 0, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.head
	hw := p.hw.Load()
	cutoff := int64(-1)
	if r.MaxAge > 0 {
		cutoff = s.cfg.Now().Add(-r.MaxAge).UnixMilli()
	}
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: pidPrefix(kindIndex, pid),
		UpperBound: logKey(kindIndex, pid, hw),
	})
	if err != nil {
		return 0, err
	}
	var (
		newStart = h.Start
		bytes    = h.Bytes
		removed  int64
	)
	for ok := it.First(); ok; ok = it.Next() {
		_, base, _ := decodeLogKey(it.Key())
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return 0, err
		}
		iv, err := decodeIndex(v)
		if err != nil {
			_ = it.Close()
			return 0, fmt.Errorf("partition %d offset %d: %w", pid, base, err)
		}
		tooOld := cutoff >= 0 && iv.AppendTime < cutoff
		tooBig := r.MaxBytes > 0 && bytes > r.MaxBytes
		if !tooOld && !tooBig {
			break
		}
		bytes -= iv.Size
		removed++
		newStart = max(newStart, base+iv.Count)
	}
	if err := it.Close(); err != nil {
		return 0, err
	}
	if removed == 0 {
		return 0, nil
	}
	return removed, s.truncateLocked(p, newStart, bytes, h.Entries-removed)
}

// TruncateBefore moves the log start offset to offset (at most the high
// watermark) and deletes the entries that end at or before it. An entry
// that straddles offset stays; reads below offset are refused.
func (s *Store) TruncateBefore(pid PartitionID, offset int64) (int64, error) {
	start, err := s.truncateBefore(pid, offset)
	if err == nil {
		s.kickCollection()
	}
	return start, err
}

func (s *Store) truncateBefore(pid PartitionID, offset int64) (int64, error) {
	p, err := s.partition(pid)
	if err != nil {
		return 0, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	hw := p.hw.Load()
	if offset > hw {
		return 0, fmt.Errorf("localstore: truncate at %d is past the high watermark %d", offset, hw)
	}
	if offset <= p.head.Start {
		return p.head.Start, nil
	}
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: pidPrefix(kindIndex, pid),
		UpperBound: logKey(kindIndex, pid, offset),
	})
	if err != nil {
		return 0, err
	}
	bytes, entries := p.head.Bytes, p.head.Entries
	for ok := it.First(); ok; ok = it.Next() {
		_, base, _ := decodeLogKey(it.Key())
		iv, err := decodeIndex(it.Value())
		if err != nil {
			_ = it.Close()
			return 0, err
		}
		if base+iv.Count > offset {
			break
		}
		bytes -= iv.Size
		entries--
	}
	if err := it.Close(); err != nil {
		return 0, err
	}
	return offset, s.truncateLocked(p, offset, bytes, entries)
}

// truncateLocked writes the new head and deletes entries wholly below
// newStart. p.mu is held.
func (s *Store) truncateLocked(p *partition, newStart, bytes, entries int64) error {
	if err := s.check(); err != nil {
		return err
	}
	// Entries whose base is below the first kept entry go; find that entry
	// (the one holding newStart, which may straddle it).
	keepFrom := newStart
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: pidPrefix(kindIndex, p.id),
		UpperBound: logKey(kindIndex, p.id, newStart+1),
	})
	if err != nil {
		return err
	}
	if it.Last() {
		_, base, _ := decodeLogKey(it.Key())
		if iv, err := decodeIndex(it.Value()); err == nil && base+iv.Count > newStart {
			keepFrom = base
		}
	}
	if err := it.Close(); err != nil {
		return err
	}
	nh := p.head
	nh.Start = newStart
	nh.Bytes = bytes
	nh.Entries = entries
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.DeleteRange(pidPrefix(kindEntry, p.id), logKey(kindEntry, p.id, keepFrom), nil)
	_ = b.DeleteRange(pidPrefix(kindIndex, p.id), logKey(kindIndex, p.id, keepFrom), nil)
	_ = b.Set(headKey(p.id), nh.encode(), nil)
	// After the appends started before it: their batches carry the head.
	if err := s.commitOrdered(b, true); err != nil {
		return err
	}
	p.head = nh
	p.start.Store(newStart)
	return nil
}
