package websocket

// Consumer sessions (/ws/v2/consumer/persistent/{tenant}/{namespace}/
// {topic}/{subscription}) and reader sessions (/ws/v2/reader/...).
//
// A consumer is a consumer of the node's subscriptions (protocols.
// Subscriptions), the same ones the Pulsar binary protocol serves, so both
// kinds of client share cursors, dispatch and redelivery counts. On a
// partitioned topic the session consumes every partition, as a Pulsar
// client's multi-partition consumer does. Parameters as in Pulsar:
// subscriptionType (Exclusive, Shared, Failover, Key_Shared),
// subscriptionMode (Durable, NonDurable), consumerName, priorityLevel,
// receiverQueueSize (at most 1000), ackTimeoutMillis (0, or 1000 and
// more: the node redelivers what the client leaves unacknowledged that
// long), negativeAckRedeliveryDelay (ms, default 60000), maxRedeliverCount
// and deadLetterTopic (default {topic}-{subscription}-DLQ), and pullMode. A
// new subscription starts at the latest message, as Pulsar's does.
//
// Client commands: an object with no type (or an unknown one) acknowledges
// its messageId; {"type":"negativeAcknowledge","messageId":..} hands the
// message back for redelivery after negativeAckRedeliveryDelay (its whole
// delivery, as a Pulsar client's negative ack of a batched message does);
// {"type":"permit","permitMessages":n} grants n messages in pull mode;
// {"type":"unsubscribe"} deletes the subscription and closes the session
// (1000); {"type":"isEndOfTopic"} is answered {"endOfTopic":false}, since
// tern topics are never terminated. A command that is not valid JSON, or
// names no valid messageId, closes the session with 4003.
//
// Message ids name each message: entry id, batch index and batch size, so
// a client acknowledges exactly the message it processed. Pulsar's
// service needed a one-hour cache of message objects to make acks of
// batched messages work (Pulsar #12530); here the id itself is enough.
//
// A message redelivered more than maxRedeliverCount times is not pushed
// again: it is written to the dead-letter topic (created when missing) with
// the properties REAL_TOPIC and ORIGIN_MESSAGE_ID, as Pulsar's client does,
// and acknowledged.
//
// A reader is a non-durable Exclusive subscription named reader-<random>,
// starting after messageId (a base64 id; on a partitioned topic, the other
// partitions start at their earliest message), at "earliest", or at
// "latest" (the default). Its acks only free slots, as in Pulsar; the
// session advances the reader's cursor itself.
//
// When an admin resets the subscription's cursor the node ends its
// consumers; the session subscribes again at the new position, as a
// Pulsar client does. When the subscription or the topic is deleted the
// session closes with 4002.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/protocols/pulsar"
)

// maxReceiverQueue caps receiverQueueSize, as Pulsar's service does.
const maxReceiverQueue = 1000

// minAckTimeout is the shortest ack timeout Pulsar's consumer accepts.
const minAckTimeout = time.Second

// consumerSession is a consumer or reader set up for a session.
type consumerSession struct {
	s         *Server
	t         target
	reader    bool
	slots     []slot
	reqs      []protocols.SubscribeRequest
	skipTo    []int64
	nackDelay time.Duration
	dlq       *deadLetter
	wake      chan struct{}

	mu struct {
		sync.Mutex
		f     *flow
		parts []*partConsumer
		nacks []nackEntry
		ended []ended
		// dead are messages to move to the dead-letter topic.
		dead []deadItem
		// cursor is a reader's last message sent, per log, to acknowledge.
		cursor map[int]position
	}
}

// partConsumer is the consumer of one log; it is the node's sink.
type partConsumer struct {
	cs   *consumerSession
	slot int
	cons protocols.Consumer
}

type nackEntry struct {
	at    time.Time
	pc    *partConsumer
	entry int64
}

type deadItem struct {
	it item
	pc *partConsumer
}

type ended struct {
	pc  *partConsumer
	err error
}

func (s *Server) setupConsumer(ctx context.Context, t target, p *params, remote string) (*consumerSession, error) {
	cs := &consumerSession{s: s, t: t, reader: t.kind == epReader, wake: make(chan struct{}, 1)}
	queue := p.int64("receiverQueueSize", maxReceiverQueue, 0, 1<<31)
	queue = max(min(queue, maxReceiverQueue), 1)
	p.str("cryptoFailureAction")
	req := protocols.SubscribeRequest{Address: remote, Metadata: map[string]string{"transport": "websocket"}}
	var pull bool
	var ackTimeout time.Duration
	var start string
	if cs.reader {
		req.Subscription = "reader-" + randomHex(5)
		req.Type = protocols.SubExclusive
		req.ConsumerName = p.str("readerName")
		start = p.str("messageId")
	} else {
		req.Subscription = t.subscription
		req.Type = map[string]protocols.SubscriptionType{
			"Exclusive": protocols.SubExclusive, "Shared": protocols.SubShared,
			"Failover": protocols.SubFailover, "Key_Shared": protocols.SubKeyShared,
		}[p.oneOf("subscriptionType", "Exclusive", "Exclusive", "Shared", "Failover", "Key_Shared")]
		req.Durable = p.oneOf("subscriptionMode", "Durable", "Durable", "NonDurable") == "Durable"
		req.ConsumerName = p.str("consumerName")
		req.PriorityLevel = int32(p.int64("priorityLevel", 0, 0, 1<<31-1))
		ms := p.int64("ackTimeoutMillis", 0, 0, 1<<40)
		ackTimeout = time.Duration(ms) * time.Millisecond
		if ackTimeout > 0 && ackTimeout < minAckTimeout {
			p.fail("ackTimeoutMillis=%d: Ack timeout should be greater than 1000 ms (or 0 for none)", ms)
			ackTimeout = 0
		}
		req.AckTimeout = ackTimeout
		cs.nackDelay = time.Duration(p.int64("negativeAckRedeliveryDelay", 60000, 0, 1<<40)) * time.Millisecond
		pull = p.bool("pullMode", false)
		if p.has("maxRedeliverCount") || p.has("deadLetterTopic") {
			n := p.int64("maxRedeliverCount", 0, 0, 1<<31-1)
			if n <= 0 {
				p.fail("maxRedeliverCount must be > 0 to use a dead-letter topic")
			}
			name := p.str("deadLetterTopic")
			if name == "" {
				name = t.topic.String() + "-" + t.subscription + "-DLQ"
			}
			dt, err := protocols.ParseTopicName(name, t.topic.NamespaceName().String())
			if err != nil {
				p.fail("deadLetterTopic: %v", err)
			}
			cs.dlq = &deadLetter{max: int32(n), topic: dt}
		}
	}
	if req.ConsumerName == "" {
		req.ConsumerName = "ws-" + randomHex(4)
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	parts, err := s.resolve(ctx, t.topic)
	if err != nil {
		return nil, err
	}
	if cs.slots, err = s.incarnations(ctx, parts); err != nil {
		return nil, err
	}
	cs.reqs = make([]protocols.SubscribeRequest, len(parts))
	cs.skipTo = make([]int64, len(parts))
	for i := range cs.reqs {
		cs.reqs[i] = req
		cs.skipTo[i] = -1
	}
	if cs.reader {
		if err := cs.readerStart(start); err != nil {
			return nil, err
		}
	}
	cs.mu.f = newFlow(len(parts), pull, int(queue), ackTimeout)
	cs.mu.parts = make([]*partConsumer, len(parts))
	cs.mu.cursor = map[int]position{}
	for i := range cs.slots {
		if err := cs.subscribe(ctx, i); err != nil {
			cs.abort()
			return nil, err
		}
	}
	return cs, nil
}

// readerStart sets each log's start from the messageId parameter.
func (cs *consumerSession) readerStart(v string) error {
	kind := protocols.StartLatest
	switch v {
	case "", "latest":
	case "earliest":
		kind = protocols.StartEarliest
	default:
		id, err := pulsar.ParseMessageID(v)
		if err != nil {
			return badRequest("messageId: %v; want earliest, latest or a message id as the API returns it", err)
		}
		switch {
		case pulsar.IsEarliestMessageID(id):
			kind = protocols.StartEarliest
		case pulsar.IsLatestMessageID(id):
		default:
			at := 0
			if len(cs.slots) > 1 {
				at = int(id.GetPartition())
				if id.Partition == nil || at < 0 || at >= len(cs.slots) {
					return badRequest("messageId names partition %d, but %s has partitions 0 to %d", id.GetPartition(), cs.t.topic, len(cs.slots)-1)
				}
			}
			for i := range cs.reqs {
				cs.reqs[i].Start.Kind = protocols.StartEarliest
			}
			sl := cs.slots[at]
			l := int64(id.GetLedgerId())
			switch {
			case l < sl.ledger:
			case l > sl.ledger:
				cs.reqs[at].Start.Kind = protocols.StartLatest
			default:
				off := int64(id.GetEntryId()) + int64(max(id.GetBatchIndex(), 0))
				cs.reqs[at].Start = protocols.StartPosition{Kind: protocols.StartAtOffset, Offset: off}
				// A reader starts after the message it names.
				cs.skipTo[at] = off
			}
			return nil
		}
	}
	for i := range cs.reqs {
		cs.reqs[i].Start.Kind = kind
	}
	return nil
}

// subscribe attaches a consumer to log i (again, after a reset).
func (cs *consumerSession) subscribe(ctx context.Context, i int) error {
	pc := &partConsumer{cs: cs, slot: i}
	cs.mu.Lock()
	cs.mu.parts[i] = pc
	cs.mu.f.reset(i)
	cs.mu.Unlock()
	cons, err := cs.s.b.Subscribe(ctx, cs.slots[i].part, cs.reqs[i], pc)
	if err != nil {
		return err
	}
	cs.mu.Lock()
	pc.cons = cons
	cs.mu.Unlock()
	return nil
}

func (cs *consumerSession) abort() {
	cs.mu.Lock()
	parts := cs.mu.parts
	cs.mu.parts = make([]*partConsumer, len(parts))
	cs.mu.Unlock()
	for _, pc := range parts {
		if pc != nil {
			cs.mu.Lock()
			cons := pc.cons
			cs.mu.Unlock()
			if cons != nil {
				_ = cons.Close()
			}
		}
	}
}

func (cs *consumerSession) goAway(ss *session) {
	ss.closeWith(websocket.StatusGoingAway, "the node is shutting down")
}

// consumerOf is the node consumer of log i, or nil while it is being
// replaced.
func (cs *consumerSession) consumerOf(i int) protocols.Consumer {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if pc := cs.mu.parts[i]; pc != nil {
		return pc.cons
	}
	return nil
}

// current reports whether pc is still the consumer of its log.
func (cs *consumerSession) currentLocked(pc *partConsumer) bool {
	return cs.mu.parts[pc.slot] == pc
}

// currentConsumer returns pc's consumer while pc is still the consumer of its
// log, nil once it was replaced or closed.
func (cs *consumerSession) currentConsumer(pc *partConsumer) protocols.Consumer {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.currentLocked(pc) {
		return pc.cons
	}
	return nil
}

func (cs *consumerSession) signal() {
	select {
	case cs.wake <- struct{}{}:
	default:
	}
}

// Deliver implements protocols.ConsumerSink.
func (pc *partConsumer) Deliver(d protocols.Delivery) {
	cs := pc.cs
	env := d.Envelope
	items := make([]item, 0, len(d.Messages))
	var dead []deadItem
	skip := cs.skipTo[pc.slot]
	for i := range d.Messages {
		off := d.Offset + int64(i)
		if off <= skip {
			continue
		}
		it := item{
			key: msgKey{slot: pc.slot, off: off}, entry: d.Offset, index: i, size: len(d.Messages),
			msg: d.Messages[i], extra: d.Extras[i], env: &env, redelivery: d.RedeliveryCount,
		}
		if cs.dlq != nil && d.RedeliveryCount > cs.dlq.max {
			dead = append(dead, deadItem{it: it, pc: pc})
			continue
		}
		items = append(items, it)
	}
	cs.mu.Lock()
	if !cs.currentLocked(pc) {
		cs.mu.Unlock()
		return
	}
	cs.mu.f.delivered(pc.slot, len(d.Messages), items)
	cs.mu.dead = append(cs.mu.dead, dead...)
	cs.mu.Unlock()
	cs.signal()
}

// ActiveChanged implements protocols.ConsumerSink; Pulsar's WebSocket API
// does not tell clients.
func (pc *partConsumer) ActiveChanged(bool) {}

// Ended implements protocols.ConsumerSink.
func (pc *partConsumer) Ended(err error) {
	cs := pc.cs
	cs.mu.Lock()
	if cs.currentLocked(pc) {
		cs.mu.ended = append(cs.mu.ended, ended{pc: pc, err: err})
	}
	cs.mu.Unlock()
	cs.signal()
}

func (cs *consumerSession) run(ss *session) {
	cs.signal()
	ss.start(func() { cs.pump(ss) })
	for {
		b, err := ss.read()
		if err != nil {
			ss.readErr(err)
			break
		}
		cs.handle(ss, b)
	}
	ss.closeNow()
	// The pump has stopped once the session's goroutines are done; the
	// consumers are closed after it so no Flow races the Close.
	ss.wg.Wait()
	cs.abort()
}

// handle runs one client command.
func (cs *consumerSession) handle(ss *session, b []byte) {
	var cmd consumerCommand
	if err := unmarshal(b, &cmd); err != nil {
		cs.s.m.badInput.Add(1)
		ss.fail(CloseFailedToDeserializeFromJSON, jsonError(b, err))
		return
	}
	switch {
	case cmd.Type == "isEndOfTopic":
		out, _ := json.Marshal(endOfTopic{EndOfTopic: false})
		ss.queue(out)
	case cs.reader:
		cs.mu.Lock()
		if pos, ok := cs.position(cmd); !ok || !cs.mu.f.release(msgKey{pos.slot, pos.offset()}) {
			cs.mu.f.releaseAny()
		}
		cs.mu.Unlock()
		cs.signal()
	case cmd.Type == "permit":
		if cmd.PermitMessages == nil || *cmd.PermitMessages <= 0 {
			cs.s.m.badInput.Add(1)
			ss.fail(CloseFailedToDeserializeFromJSON, `a "permit" command needs "permitMessages": a number above 0`)
			return
		}
		cs.mu.Lock()
		if cs.mu.f.pull {
			cs.mu.f.permit(*cmd.PermitMessages)
		}
		cs.mu.Unlock()
		cs.signal()
	case cmd.Type == "unsubscribe":
		cs.unsubscribe(ss)
	case cmd.Type == "negativeAcknowledge":
		pos, ok := cs.idOf(ss, cmd)
		if !ok {
			return
		}
		cs.mu.Lock()
		if pc := cs.mu.parts[pos.slot]; pc != nil {
			cs.mu.f.release(msgKey{pos.slot, pos.offset()})
			cs.mu.nacks = append(cs.mu.nacks, nackEntry{at: time.Now().Add(cs.nackDelay), pc: pc, entry: pos.entry})
		}
		cs.mu.Unlock()
		cs.signal()
	default:
		pos, ok := cs.idOf(ss, cmd)
		if !ok {
			return
		}
		cs.mu.Lock()
		var cons protocols.Consumer
		if pc := cs.mu.parts[pos.slot]; pc != nil {
			cons = pc.cons
		}
		cs.mu.f.release(msgKey{pos.slot, pos.offset()})
		cs.mu.Unlock()
		cs.signal()
		if cons == nil {
			return
		}
		ctx, cancel := context.WithTimeout(ss.ctx, cs.s.cfg.SetupTimeout)
		err := cons.Ack(ctx, []protocols.AckPosition{{Offset: pos.entry, BatchIndex: pos.batch}}, false)
		cancel()
		if err != nil {
			ss.log.Debug("ack refused", "err", err)
			return
		}
		cs.s.m.acked.Add(1)
	}
}

// position reads a command's message id, if it has a usable one.
func (cs *consumerSession) position(cmd consumerCommand) (position, bool) {
	if cmd.MessageID == nil {
		return position{}, false
	}
	id, err := pulsar.ParseMessageID(*cmd.MessageID)
	if err != nil {
		return position{}, false
	}
	return locate(cs.slots, id)
}

// idOf reads the message id of an ack or negative ack. A missing or
// undecodable id closes the session; an id of another incarnation of the
// topic, or of a partition the session does not serve, is ignored.
func (cs *consumerSession) idOf(ss *session, cmd consumerCommand) (position, bool) {
	if cmd.MessageID == nil {
		cs.s.m.badInput.Add(1)
		ss.fail(CloseFailedToDeserializeFromJSON, `the command names no "messageId"`)
		return position{}, false
	}
	id, err := pulsar.ParseMessageID(*cmd.MessageID)
	if err != nil {
		cs.s.m.badInput.Add(1)
		ss.fail(CloseFailedToDeserializeFromJSON, "messageId: "+err.Error())
		return position{}, false
	}
	pos, ok := locate(cs.slots, id)
	if !ok {
		ss.log.Debug("a message id of another incarnation or partition is ignored", "messageId", clip(*cmd.MessageID, 64))
	}
	return pos, ok
}

// unsubscribe deletes the subscription on every log and closes the session.
func (cs *consumerSession) unsubscribe(ss *session) {
	ctx, cancel := context.WithTimeout(ss.ctx, cs.s.cfg.SetupTimeout)
	defer cancel()
	for i := range cs.slots {
		cons := cs.consumerOf(i)
		if cons == nil {
			continue
		}
		if err := cons.Unsubscribe(ctx, false); err != nil {
			ss.fail(CloseUnknownError, "unsubscribe failed: "+err.Error())
			return
		}
	}
	ss.closeWith(websocket.StatusNormalClosure, "unsubscribed: the subscription was deleted")
}

// pump is the session's writer: it moves messages the client may take
// from the flow to the connection, grants the node permits, moves
// dead-letter messages, acts on due negative acks and on consumers the
// node ended, and writes queued answers.
func (cs *consumerSession) pump(ss *session) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		select {
		case <-ss.ctx.Done():
			return
		case <-cs.wake:
		case <-ss.wake:
		case <-timer.C:
		}
		if ss.flush() != nil {
			return
		}
		now := time.Now()
		cs.mu.Lock()
		send := cs.mu.f.take(now)
		// Messages past their ack timeout go back to the node before the
		// permits their slots freed are granted, so they come again before
		// newer messages take the slots (the node's own ack timer races
		// this one; a message it already took back is not redelivered
		// twice).
		var timedOut []nackEntry
		for _, e := range cs.mu.f.takeTimedOut() {
			if pc := cs.mu.parts[e.key.slot]; pc != nil {
				timedOut = append(timedOut, nackEntry{pc: pc, entry: e.entry})
			}
		}
		grants := cs.mu.f.grants()
		var due []nackEntry
		for len(cs.mu.nacks) > 0 && !cs.mu.nacks[0].at.After(now) {
			due = append(due, cs.mu.nacks[0])
			cs.mu.nacks = cs.mu.nacks[1:]
		}
		gone := cs.mu.ended
		cs.mu.ended = nil
		dead := cs.mu.dead
		cs.mu.dead = nil
		conss := make([]protocols.Consumer, len(cs.mu.parts))
		for i, pc := range cs.mu.parts {
			if pc != nil {
				conss[i] = pc.cons
			}
		}
		next := cs.mu.f.deadline()
		if len(cs.mu.nacks) > 0 && (next.IsZero() || cs.mu.nacks[0].at.Before(next)) {
			next = cs.mu.nacks[0].at
		}
		cs.mu.Unlock()

		for _, e := range gone {
			if !cs.consumerEnded(ss, e) {
				return
			}
			conss[e.pc.slot] = nil
			cs.signal()
		}
		cs.redeliver(ss, timedOut)
		for _, g := range grants {
			if c := conss[g.slot]; c != nil {
				c.Flow(g.n)
			}
		}
		for _, d := range dead {
			cs.deadLetter(ss, &d.it, d.pc)
		}
		if !cs.send(ss, send, conss) {
			return
		}
		cs.redeliver(ss, due)
		if !next.IsZero() {
			timer.Reset(max(time.Until(next), time.Millisecond))
		}
	}
}

// errNotSent ends a batch whose message could not be encoded.
var errNotSent = errors.New("websocket: a message could not be encoded")

// send writes messages and advances a reader's cursor.
func (cs *consumerSession) send(ss *session, items []item, conss []protocols.Consumer) bool {
	last := map[int]item{}
	var buf bytes.Buffer // each frame's encoding, written before the next
	err := ss.batch(func(ctx context.Context) error {
		for i := range items {
			it := &items[i]
			frame, err := marshalTo(&buf, cs.message(it))
			if err != nil {
				ss.fail(CloseFailedToSerializeToJSON, err.Error())
				return errNotSent
			}
			if err := ss.writeIn(ctx, frame); err != nil {
				return err
			}
			cs.s.m.delivered.Add(1)
			last[it.key.slot] = *it
		}
		return nil
	})
	if err != nil {
		return false
	}
	if cs.reader {
		for slot, it := range last {
			c := conss[slot]
			if c == nil {
				continue
			}
			ctx, cancel := context.WithTimeout(ss.ctx, cs.s.cfg.SetupTimeout)
			_ = c.Ack(ctx, []protocols.AckPosition{{Offset: it.entry, BatchIndex: int32(it.index)}}, true)
			cancel()
		}
	}
	return true
}

// message is the JSON form of a delivered message.
func (cs *consumerSession) message(it *item) consumerMessage {
	cm := consumerMessage{
		MessageID:       messageID(&cs.slots[it.key.slot], it.entry, it.index, it.size),
		Payload:         it.msg.Value,
		Properties:      make(map[string]string, len(it.msg.Headers)),
		PublishTime:     formatTime(it.env.AppendTime),
		RedeliveryCount: it.redelivery,
	}
	for _, h := range it.msg.Headers {
		cm.Properties[h.Key] = string(h.Value)
	}
	if !it.extra.NoEventTime && it.msg.Timestamp > 0 {
		cm.EventTime = formatTime(it.msg.Timestamp)
	}
	if it.msg.Key != nil {
		k := string(it.msg.Key)
		cm.Key = &k
	}
	return cm
}

// redeliver hands negatively acknowledged deliveries back to the node.
func (cs *consumerSession) redeliver(ss *session, due []nackEntry) {
	for len(due) > 0 {
		pc := due[0].pc
		var offs []int64
		rest := due[:0]
		for _, n := range due {
			if n.pc == pc {
				offs = append(offs, n.entry)
			} else {
				rest = append(rest, n)
			}
		}
		due = rest
		cons := cs.currentConsumer(pc)
		if cons == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(ss.ctx, cs.s.cfg.SetupTimeout)
		if err := cons.Redeliver(ctx, offs); err != nil {
			ss.log.Debug("redelivery refused", "err", err)
		}
		cancel()
	}
}

// consumerEnded acts on a consumer the node ended: after a cursor reset
// it subscribes again; otherwise the session closes. It reports whether
// the session goes on.
func (cs *consumerSession) consumerEnded(ss *session, e ended) bool {
	switch {
	case errors.Is(e.err, protocols.ErrSubscriptionReset) && !cs.reader:
		ctx, cancel := context.WithTimeout(ss.ctx, cs.s.cfg.SetupTimeout)
		defer cancel()
		if err := cs.subscribe(ctx, e.pc.slot); err != nil {
			ss.fail(CloseFailedToSubscribe, "subscribing again after the cursor was reset failed: "+err.Error())
			return false
		}
		ss.log.Debug("subscribed again after a cursor reset", "partition", cs.slots[e.pc.slot].part.Index)
		return true
	case errors.Is(e.err, protocols.ErrClosed):
		ss.closeWith(websocket.StatusGoingAway, "the node is shutting down")
	case errors.Is(e.err, protocols.ErrSubscriptionDeleted):
		ss.fail(CloseFailedToSubscribe, "the subscription was deleted; connect again to create it anew")
	case errors.Is(e.err, protocols.ErrTopicNotFound):
		ss.fail(CloseFailedToSubscribe, "the topic was deleted")
	default:
		ss.fail(CloseUnknownError, fmt.Sprintf("the node ended the consumer: %v", e.err))
	}
	return false
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
