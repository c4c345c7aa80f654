package proxy

import (
	"context"
	"slices"

	"github.com/ternmq/tern/localstore"
	"github.com/ternmq/tern/protocols"
)

// Acknowledgements, redeliveries, seeks and unsubscribes, run on the
// subscription's goroutine.
//
// Clients name messages by the first offset of the delivery they came in
// (the Pulsar entry id) and an index. The subscription remembers where each
// delivery of a durable subscription ends; when it does not (a delivery made
// before a restart, or by a non-durable subscription), a delivery is taken
// to run to the end of its entry, which is what every delivery but a
// Key_Shared split does.

// unitEnd is where the delivery starting at off ends.
func (s *subscription) unitEnd(off int64) int64 {
	if end, ok := s.units[off]; ok {
		return end
	}
	if e := s.cache.find(off); e != nil {
		return e.end()
	}
	if base, count, ok := s.n.entryAt(s.key.pid, off); ok {
		return base + count
	}
	return off + 1
}

// cumulativeEnd is one past the last offset a cumulative ack of the
// position off covers: the delivery starting at off, or the one ending at
// off (Pulsar clients acknowledge "the entry before" as entry id - 1), or
// else the entry holding off.
func (s *subscription) cumulativeEnd(off int64) int64 {
	if end, ok := s.units[off]; ok {
		return end
	}
	for _, end := range s.units {
		if end == off+1 {
			return end
		}
	}
	return s.unitEnd(off)
}

// ack applies acknowledgements from consumer c.
func (s *subscription) ack(c *consumer, acks []protocols.AckPosition, cumulative bool) error {
	_, hw, err := s.n.store.Offsets(s.key.pid)
	if err != nil {
		return mapStoreErr(err)
	}
	for _, a := range acks {
		if a.Offset < 0 || a.Offset >= hw {
			continue
		}
		if cumulative {
			var upto int64
			switch {
			case a.BatchIndex >= 0:
				upto = a.Offset + int64(a.BatchIndex) + 1
			case a.Unacked != nil:
				upto = a.Offset
				s.ackBits(a.Offset, s.unitEnd(a.Offset), a.Unacked, hw)
			default:
				upto = s.cumulativeEnd(a.Offset)
			}
			s.ackUpTo(min(upto, hw))
			continue
		}
		switch {
		case a.BatchIndex >= 0:
			o := a.Offset + int64(a.BatchIndex)
			s.ackRange(o, o+1, hw)
		case a.Unacked != nil:
			s.ackBits(a.Offset, s.unitEnd(a.Offset), a.Unacked, hw)
		default:
			s.ackRange(a.Offset, s.unitEnd(a.Offset), hw)
		}
	}
	s.touched()
	return nil
}

// ackBits acknowledges the offsets of [from, to) whose bit in unacked is
// clear.
func (s *subscription) ackBits(from, to int64, unacked []uint64, hw int64) {
	for o := from; o < to; o++ {
		i := o - from
		w := i / 64
		if w < int64(len(unacked)) && unacked[w]&(1<<(i%64)) != 0 {
			continue
		}
		s.ackRange(o, o+1, hw)
	}
}

// ackRange acknowledges [from, to), clipped to the log.
func (s *subscription) ackRange(from, to, hw int64) {
	to = min(to, hw)
	if to <= from {
		return
	}
	s.cursor.Ack(from, to)
	s.release(from, to)
	for _, c := range s.consumers {
		c.pending.remove(from, to)
	}
	s.replay.remove(from, to)
	if len(s.redeliveries) > 0 {
		for o := from; o < to; o++ {
			delete(s.redeliveries, o)
		}
	}
	if end, ok := s.units[from]; ok && s.fullyAcked(from, end) {
		delete(s.units, from)
	}
}

// ackUpTo acknowledges every offset below to.
func (s *subscription) ackUpTo(to int64) {
	if to <= s.cursor.MarkDelete {
		return
	}
	s.cursor.AckUpTo(to)
	s.release(0, to)
	for _, c := range s.consumers {
		c.pending.removeBelow(to)
	}
	s.replay.removeBelow(to)
	for o := range s.redeliveries {
		if o < to {
			delete(s.redeliveries, o)
		}
	}
	for from, end := range s.units {
		if end <= to {
			delete(s.units, from)
		}
	}
}

// redeliver hands back what consumer c holds of the deliveries starting at
// offsets, or everything it holds when offsets is nil.
func (s *subscription) redeliver(c *consumer, offsets []int64, count bool) {
	if offsets == nil {
		s.handBack(c, count)
		c.timeouts = nil
		return
	}
	for _, off := range offsets {
		end := s.unitEnd(off)
		for _, sp := range c.pending.intersect(off, end) {
			c.pending.remove(sp.from, sp.to)
			c.forgetDeadlines(sp.from, sp.to)
			s.requeue(sp.from, sp.to, count)
		}
	}
}

// forgetDeadlines takes [from, to) out of the consumer's ack deadlines:
// those offsets were handed back, and if they come to it again, that
// delivery brings its own deadline. Left in, the old deadline would take
// the new delivery back before its time. The deadlines keep their order;
// a session handing back everything it holds calls this once per
// delivery, so the common case filters in place.
func (c *consumer) forgetDeadlines(from, to int64) {
	ts := c.timeouts
	out := ts[:0]
	for i, d := range ts {
		switch {
		case d.to <= from || d.from >= to:
			out = append(out, d)
		case d.from < from && d.to > to:
			// Both ends stay: one deadline becomes two, which needs a
			// slot the in-place filter does not have.
			out = append(slices.Clip(out), ackDeadline{from: d.from, to: from, at: d.at}, ackDeadline{from: to, to: d.to, at: d.at})
			out = append(out, ts[i+1:]...)
			c.timeouts = out
			c.forgetDeadlines(from, to) // the rest, now in out
			return
		case d.from < from:
			out = append(out, ackDeadline{from: d.from, to: from, at: d.at})
		case d.to > to:
			out = append(out, ackDeadline{from: to, to: d.to, at: d.at})
		}
	}
	clear(ts[len(out):])
	c.timeouts = out
}

// seek moves the cursor and ends every consumer.
func (s *subscription) seek(t protocols.SeekTarget) error {
	start, hw, err := s.n.store.Offsets(s.key.pid)
	if err != nil {
		return mapStoreErr(err)
	}
	off := t.Offset
	if t.ByTime {
		if off, err = s.n.OffsetForTime(context.Background(), s.part, t.Time, protocols.PublishTime); err != nil {
			return err
		}
	}
	off = min(max(off, start), hw)
	s.reset(off)
	if s.durable {
		s.save()
	}
	for _, c := range s.consumers {
		s.endConsumer(c, protocols.ErrSubscriptionReset)
	}
	s.consumers = nil
	s.active = nil
	s.keys = nil
	if !s.durable {
		s.beginEnd(nil)
	}
	return nil
}

// reset forgets every delivery and positions the cursor at off.
func (s *subscription) reset(off int64) {
	s.cursor = localstore.Cursor{MarkDelete: off, Props: s.props}
	s.dirty = true
	s.readPos = off
	for _, e := range s.ahead {
		e.unref()
	}
	s.ahead = nil
	s.cache.reset()
	s.replay.clear()
	s.delayed = nil
	clear(s.units)
	clear(s.redeliveries)
	clear(s.held)
	clear(s.holders)
	for _, c := range s.consumers {
		c.pending.clear()
		c.timeouts = nil
	}
}

// unsubscribe deletes the subscription on behalf of consumer c (nil for
// the admin API).
func (s *subscription) unsubscribe(c *consumer, force bool) error {
	others := 0
	for _, o := range s.consumers {
		if o != c {
			others++
		}
	}
	if others > 0 && !force {
		return errorf(protocols.ErrConsumerBusy, "subscription %q has %d other consumers; close them or force the unsubscribe", s.name, others)
	}
	if c != nil {
		c.gone.Store(true)
	}
	for _, o := range s.consumers {
		if o != c {
			s.endConsumer(o, protocols.ErrSubscriptionDeleted)
		}
	}
	s.consumers = nil
	if s.durable {
		if err := s.n.store.DeleteCursor(s.key.pid, s.name); err != nil {
			return mapStoreErr(err)
		}
		s.durable = false
	}
	s.beginEnd(nil)
	return nil
}

// backlog counts unacknowledged messages in the retained log.
func (s *subscription) backlog() int64 {
	start, hw, err := s.n.store.Offsets(s.key.pid)
	if err != nil {
		return 0
	}
	return cursorBacklog(&s.cursor, start, hw)
}

// cursorBacklog counts the offsets in [max(markDelete, start), hw) that c
// does not acknowledge.
func cursorBacklog(c *localstore.Cursor, start, hw int64) int64 {
	from := max(c.MarkDelete, start)
	if from >= hw {
		return 0
	}
	n := hw - from
	for _, r := range c.Acked {
		lo, hi := max(r.From, from), min(r.To, hw)
		if hi > lo {
			n -= hi - lo
		}
	}
	return n
}

// skip acknowledges the next n unacknowledged messages (all when n < 0).
func (s *subscription) skip(n int64) error {
	start, hw, err := s.n.store.Offsets(s.key.pid)
	if err != nil {
		return mapStoreErr(err)
	}
	if n < 0 {
		s.ackUpTo(hw)
		s.touched()
		return nil
	}
	off := max(s.cursor.MarkDelete, start)
	for n > 0 && off < hw {
		if s.cursor.IsAcked(off) {
			off++
			continue
		}
		s.ackRange(off, off+1, hw)
		n--
		off++
	}
	s.touched()
	return nil
}
