package localstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"sort"
)

// Range is a half-open run of offsets [From, To).
type Range struct{ From, To int64 }

// Cursor is a durable subscription position: every offset below MarkDelete
// is acknowledged, and so is every offset in Acked (individual acks above
// the mark-delete point, as Pulsar Shared subscriptions make them).
type Cursor struct {
	MarkDelete int64
	// Acked is sorted, disjoint, non-adjacent and entirely at or above
	// MarkDelete; Normalize restores that shape.
	Acked []Range
	// Props are small named values a subscription keeps with its position.
	Props map[string]string
}

// IsAcked reports whether offset is acknowledged.
func (c *Cursor) IsAcked(off int64) bool {
	if off < c.MarkDelete {
		return true
	}
	i := sort.Search(len(c.Acked), func(i int) bool { return c.Acked[i].To > off })
	return i < len(c.Acked) && c.Acked[i].From <= off
}

// Ack acknowledges [from, to) and normalizes.
func (c *Cursor) Ack(from, to int64) {
	if to <= from || to <= c.MarkDelete {
		return
	}
	c.Acked = append(c.Acked, Range{From: max(from, c.MarkDelete), To: to})
	c.Normalize()
}

// AckUpTo acknowledges every offset below to (a cumulative ack).
func (c *Cursor) AckUpTo(to int64) {
	if to > c.MarkDelete {
		c.MarkDelete = to
		c.Normalize()
	}
}

// Normalize sorts and merges the acked ranges and folds those touching the
// mark-delete point into it.
func (c *Cursor) Normalize() {
	slices.SortFunc(c.Acked, func(a, b Range) int {
		switch {
		case a.From < b.From:
			return -1
		case a.From > b.From:
			return 1
		}
		return 0
	})
	out := c.Acked[:0]
	for _, r := range c.Acked {
		if r.To <= c.MarkDelete || r.To <= r.From {
			continue
		}
		r.From = max(r.From, c.MarkDelete)
		if n := len(out); n > 0 && r.From <= out[n-1].To {
			out[n-1].To = max(out[n-1].To, r.To)
			continue
		}
		out = append(out, r)
	}
	for len(out) > 0 && out[0].From <= c.MarkDelete {
		c.MarkDelete = max(c.MarkDelete, out[0].To)
		out = out[1:]
	}
	c.Acked = slices.Clone(out)
}

// End is one past the highest acknowledged offset.
func (c *Cursor) End() int64 {
	if n := len(c.Acked); n > 0 {
		return c.Acked[n-1].To
	}
	return c.MarkDelete
}

func (c *Cursor) encode() []byte {
	b := []byte{1}
	b = binary.AppendVarint(b, c.MarkDelete)
	b = binary.AppendUvarint(b, uint64(len(c.Acked)))
	prev := c.MarkDelete
	for _, r := range c.Acked {
		b = binary.AppendVarint(b, r.From-prev)
		b = binary.AppendVarint(b, r.To-r.From)
		prev = r.To
	}
	keys := slices.Sorted(maps.Keys(c.Props))
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(c.Props[k])))
		b = append(b, c.Props[k]...)
	}
	return b
}

func decodeCursor(b []byte) (Cursor, error) {
	var c Cursor
	bad := fmt.Errorf("%w: cursor record", ErrCorrupt)
	if len(b) < 1 || b[0] != 1 {
		return c, bad
	}
	b = b[1:]
	varint := func() int64 {
		v, n := binary.Varint(b)
		if n <= 0 {
			b = nil
			return 0
		}
		b = b[n:]
		return v
	}
	uvarint := func() uint64 {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			b = nil
			return 0
		}
		b = b[n:]
		return v
	}
	str := func() string {
		l := uvarint()
		if l > uint64(len(b)) {
			b = nil
			return ""
		}
		s := string(b[:l])
		b = b[l:]
		return s
	}
	c.MarkDelete = varint()
	n := uvarint()
	if n > uint64(len(b)) {
		return c, bad
	}
	prev := c.MarkDelete
	for i := uint64(0); i < n && b != nil; i++ {
		from := prev + varint()
		to := from + varint()
		c.Acked = append(c.Acked, Range{From: from, To: to})
		prev = to
	}
	np := uvarint()
	if np > uint64(len(b)) {
		return c, bad
	}
	for i := uint64(0); i < np && b != nil; i++ {
		if c.Props == nil {
			c.Props = map[string]string{}
		}
		k := str()
		c.Props[k] = str()
	}
	if b == nil {
		return c, bad
	}
	return c, nil
}

// SaveCursor stores a cursor. It refuses a cursor that points past the high
// watermark: a subscription can only acknowledge what it was given.
// Cursors are written without their own fsync: the WAL is ordered, so a
// cursor that survives a crash never outlives the entries below it, and an
// interval sync bounds what a crash can roll back.
func (s *Store) SaveCursor(pid PartitionID, name string, c Cursor) error {
	p, err := s.partition(pid)
	if err != nil {
		return err
	}
	if hw := p.hw.Load(); c.End() > hw || c.MarkDelete > hw {
		return fmt.Errorf("%w: cursor %q on partition %d ends at %d, the log at %d", ErrCursorPastLog, name, pid, c.End(), hw)
	}
	return s.Write([]Op{{Key: CursorKey(pid, name), Value: c.encode()}}, false)
}

// CursorOp is the op that stores a cursor, for writes that must move a
// cursor atomically with something else (an Append's Guard, a Write).
func CursorOp(pid PartitionID, name string, c Cursor) Op {
	return Op{Key: CursorKey(pid, name), Value: c.encode()}
}

// LoadCursor reads a cursor. A cursor found past the log (which the write
// path prevents) is clamped to the high watermark and reported in the log.
func (s *Store) LoadCursor(pid PartitionID, name string) (Cursor, bool, error) {
	p, err := s.partition(pid)
	if err != nil {
		return Cursor{}, false, err
	}
	v, ok, err := s.Get(CursorKey(pid, name))
	if err != nil || !ok {
		return Cursor{}, ok, err
	}
	c, err := decodeCursor(v)
	if err != nil {
		return Cursor{}, false, err
	}
	if hw := p.hw.Load(); c.End() > hw {
		s.log.Error("cursor past the end of the log; clamping", "partition", pid, "cursor", name, "end", c.End(), "hw", hw)
		c.MarkDelete = min(c.MarkDelete, hw)
		c.Acked = slices.DeleteFunc(c.Acked, func(r Range) bool { return r.To > hw })
	}
	return c, true, nil
}

// DeleteCursor removes a cursor.
func (s *Store) DeleteCursor(pid PartitionID, name string) error {
	return s.Write([]Op{{Key: CursorKey(pid, name), Delete: true}}, false)
}

// Cursors lists a partition's cursors by name.
func (s *Store) Cursors(pid PartitionID) (map[string]Cursor, error) {
	out := map[string]Cursor{}
	prefix := pidPrefix(kindCursor, pid)
	err := s.Scan(context.Background(), prefix, func(k Key, v []byte) error {
		c, err := decodeCursor(v)
		if err != nil {
			return err
		}
		out[string(k[len(prefix):])] = c
		return nil
	})
	return out, err
}
