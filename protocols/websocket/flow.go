package websocket

import (
	"time"

	"github.com/ternmq/tern/protocols"
)

// Flow control of consumer and reader sessions.
//
// Pulsar's WebSocket service keeps a count of messages pushed to the
// client and not yet acknowledged, and stops pushing at receiverQueueSize
// (push mode); in pull mode the client grants messages with permit
// commands instead. Two of its bugs are not repeated here: a message
// redelivered after its ack timeout took a second slot and never gave the
// first back, so a consumer that let messages time out stalled for good
// (Pulsar #2731); and an ack counted as freeing a slot even when it named a
// message the session did not hold. Here the session remembers which
// messages it sent and holds a slot per message: an ack or negative ack of
// one of them frees its slot, a message not acknowledged within the ack
// timeout frees it (the node delivers it again, here or to another
// consumer), and a message the node delivers again while the client still
// holds it keeps the one slot it had.
//
// The node pushes deliveries against permits (protocols.Consumer.Flow).
// The session grants each partition enough permits to fill what the client
// may receive, less what is already buffered, and buffers what the node
// pushes beyond it (a delivery is a run of an entry's messages and may
// overdraw the permits) until the client may take it, so the client never
// holds more than it allows.

// msgKey names a message of a session: its log and offset.
type msgKey struct {
	slot int
	off  int64
}

// item is one message on its way to the client.
type item struct {
	key msgKey
	// entry is the first offset of the delivery, index the message's place
	// in it and size its length: the message id's entry id, batch index and
	// batch size.
	entry       int64
	index, size int
	msg         protocols.Message
	extra       protocols.MessageExtras
	env         *protocols.Envelope
	redelivery  int32
}

// flow is a session's flow state. It is not safe for concurrent use; the
// consumer session guards it with its mutex.
type flow struct {
	pull       bool
	size       int
	permits    int64
	ackTimeout time.Duration

	slots   []slotFlow
	ready   []item
	inReady map[msgKey]struct{}
	sent    map[msgKey]time.Time
	expiry  []expiry
	// timedOut are the messages whose slots expire freed since the last
	// takeTimedOut: the session hands them back to the node before it
	// grants the freed permits, so the node redelivers them ahead of new
	// messages instead of racing its own ack timer.
	timedOut []expiry
}

// slotFlow is one log's share: permits granted to the node and not used
// yet (negative after an overdraw), and how many of its messages wait in
// ready.
type slotFlow struct {
	granted int64
	ready   int
}

type expiry struct {
	at    time.Time
	key   msgKey
	entry int64
}

// grant is a Flow call to make.
type grant struct {
	slot int
	n    int
}

// newFlow sizes a flow for slots logs. size is the receiver queue size
// (push mode and readers); pull mode starts with no permits.
func newFlow(slots int, pull bool, size int, ackTimeout time.Duration) *flow {
	return &flow{
		pull: pull, size: max(size, 1), ackTimeout: ackTimeout,
		slots:   make([]slotFlow, slots),
		inReady: map[msgKey]struct{}{},
		sent:    map[msgKey]time.Time{},
	}
}

// delivered records a delivery of count messages from slot, of which
// items are to go to the client (a reader drops those before its start).
func (f *flow) delivered(slot, count int, items []item) {
	f.slots[slot].granted -= int64(count)
	for _, it := range items {
		// The node took the message back and delivers it again: the client
		// gets it again, in the slot it held.
		delete(f.sent, it.key)
		if _, ok := f.inReady[it.key]; ok {
			continue
		}
		f.inReady[it.key] = struct{}{}
		f.ready = append(f.ready, it)
		f.slots[slot].ready++
	}
}

// take returns the messages the client may receive now, in order, and
// counts them as held.
func (f *flow) take(now time.Time) []item {
	f.expire(now)
	var out []item
	for len(f.ready) > 0 && f.room() {
		it := f.ready[0]
		f.ready[0] = item{}
		f.ready = f.ready[1:]
		delete(f.inReady, it.key)
		f.slots[it.key.slot].ready--
		var at time.Time
		if f.ackTimeout > 0 {
			at = now.Add(f.ackTimeout)
			f.expiry = append(f.expiry, expiry{at: at, key: it.key, entry: it.entry})
		}
		f.sent[it.key] = at
		if f.pull {
			f.permits--
		}
		out = append(out, it)
	}
	if len(f.ready) == 0 {
		f.ready = nil
	}
	return out
}

// room reports whether the client may receive one more message.
func (f *flow) room() bool {
	if f.pull {
		return f.permits > 0
	}
	return len(f.sent) < f.size
}

// expire frees the slots of messages held past the ack timeout.
func (f *flow) expire(now time.Time) {
	for len(f.expiry) > 0 && !f.expiry[0].at.After(now) {
		e := f.expiry[0]
		f.expiry = f.expiry[1:]
		if at, ok := f.sent[e.key]; ok && at.Equal(e.at) {
			delete(f.sent, e.key)
			f.timedOut = append(f.timedOut, e)
		}
	}
}

// takeTimedOut returns and forgets the messages expire freed.
func (f *flow) takeTimedOut() []expiry {
	out := f.timedOut
	f.timedOut = nil
	return out
}

// release frees a held message's slot (an ack or a negative ack); it
// reports whether the session held the message.
func (f *flow) release(k msgKey) bool {
	if _, ok := f.sent[k]; !ok {
		return false
	}
	delete(f.sent, k)
	return true
}

// releaseAny frees one held message's slot: a reader's ack frees a slot
// whatever it names, as in Pulsar.
func (f *flow) releaseAny() {
	for k := range f.sent {
		delete(f.sent, k)
		return
	}
}

// permit adds client permits (pull mode).
func (f *flow) permit(n int64) {
	f.permits = min(f.permits+n, 1<<40)
}

// grants computes the permits to grant the node so that each log can
// deliver what the client may still take, less what is buffered. Small top
// ups wait until a log has used half the queue, as Pulsar clients do, but
// a log with no permits left always gets them.
func (f *flow) grants() []grant {
	target := int64(f.size - len(f.sent))
	threshold := int64(max(1, f.size/2))
	if f.pull {
		target, threshold = f.permits, 1
	}
	var out []grant
	for i := range f.slots {
		sl := &f.slots[i]
		desired := target - int64(sl.ready)
		if desired <= 0 || desired <= sl.granted {
			continue
		}
		if sl.granted > 0 && desired-sl.granted < threshold {
			continue
		}
		out = append(out, grant{slot: i, n: int(min(desired-sl.granted, 1<<30))})
		sl.granted = desired
	}
	return out
}

// reset forgets a log's messages and permits: its consumer was replaced.
func (f *flow) reset(slot int) {
	kept := f.ready[:0]
	for _, it := range f.ready {
		if it.key.slot == slot {
			delete(f.inReady, it.key)
			continue
		}
		kept = append(kept, it)
	}
	f.ready = kept
	for k := range f.sent {
		if k.slot == slot {
			delete(f.sent, k)
		}
	}
	f.slots[slot] = slotFlow{}
}

// deadline is when the next held message times out (zero if none).
func (f *flow) deadline() time.Time {
	for len(f.expiry) > 0 {
		e := f.expiry[0]
		if at, ok := f.sent[e.key]; ok && at.Equal(e.at) {
			return e.at
		}
		f.expiry = f.expiry[1:]
	}
	return time.Time{}
}

// held is how many messages the client holds.
func (f *flow) held() int { return len(f.sent) }
