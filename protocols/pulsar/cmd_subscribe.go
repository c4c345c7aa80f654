package pulsar

// SUBSCRIBE -> SUCCESS | ERROR, and the consumer's life on the connection.
//
// All four subscription types, durable and non-durable (readers), initial
// position Latest or Earliest, and start_message_id for readers (the earliest
// and latest sentinels, or a message id: delivery starts with the entry that
// holds it and the client drops what precedes its start). A message id of an
// older incarnation of the topic starts at the earliest message, one of a
// newer incarnation at the latest. Key_Shared takes AUTO_SPLIT or STICKY
// with hash ranges and allowOutOfOrderDelivery. A consumer schema must be
// compatible with the topic's.
//
// Extension: a consumer metadata entry ackTimeoutMillis=<ms> asks the
// broker to redeliver what this consumer leaves unacknowledged that long
// (the WebSocket API's ackTimeoutMillis; the Go client has no ack timeout of
// its own).
//
// The node pushes to the consumer through consumerState, the
// protocols.ConsumerSink: MESSAGE frames (never before the first FLOW, since
// permits start at zero), ACTIVE_CONSUMER_CHANGE (held back until the
// consumer's first FLOW: the Go client registers a consumer some time after
// reading SUCCESS, and sends FLOW only once it has, so a notice sent earlier
// may arrive before the client knows the consumer and be dropped), and
// CLOSE_CONSUMER when the node ends the consumer (after a seek, an
// unsubscribe by another client or the admin API, a topic deletion).

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/protocols/pulsar/pb"
)

// AckTimeoutProperty is the consumer metadata key that asks the broker for
// an ack timeout, in milliseconds.
const AckTimeoutProperty = "ackTimeoutMillis"

// consumerState is one consumer on the connection and its sink.
type consumerState struct {
	id     uint64
	c      *conn
	topic  string
	part   protocols.Partition
	ledger int64
	cons   protocols.Consumer

	mu      sync.Mutex
	ready   bool
	pending *bool // an active change held until the first FLOW
	closed  atomic.Bool
	// starved: Full refused this consumer, which waits for makeRoom.
	starved atomic.Bool
}

func (c *conn) consumer(id uint64) *consumerState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.consumers[id]
}

// removeConsumer forgets cs if it is still registered.
func (c *conn) removeConsumer(cs *consumerState) {
	c.mu.Lock()
	if c.mu.consumers[cs.id] == cs {
		delete(c.mu.consumers, cs.id)
	}
	c.mu.Unlock()
}

// Deliver implements protocols.ConsumerSink.
func (cs *consumerState) Deliver(d protocols.Delivery) {
	if cs.closed.Load() {
		return
	}
	size := int64(0)
	for i := range d.Messages {
		size += int64(len(d.Messages[i].Key)+len(d.Messages[i].Value)) + outOverhead
	}
	cs.c.outBytes.Add(size)
	cs.c.enqueue(outItem{msg: &outMessage{cs: cs, d: d, size: size}})
}

// ActiveChanged implements protocols.ConsumerSink.
func (cs *consumerState) ActiveChanged(active bool) {
	cs.mu.Lock()
	if !cs.ready {
		cs.pending = &active
		cs.mu.Unlock()
		return
	}
	cs.mu.Unlock()
	cs.c.queue(NewCommand(&pb.CommandActiveConsumerChange{ConsumerId: proto.Uint64(cs.id), IsActive: proto.Bool(active)}))
}

// Ended implements protocols.ConsumerSink.
func (cs *consumerState) Ended(err error) {
	if cs.closed.Swap(true) {
		return
	}
	cs.c.removeConsumer(cs)
	cs.c.log.Debug("consumer closed by the broker", "consumer_id", cs.id, "topic", cs.topic, "reason", err)
	cs.c.queue(NewCommand(&pb.CommandCloseConsumer{ConsumerId: proto.Uint64(cs.id), RequestId: proto.Uint64(math.MaxUint64)}))
}

// markReady lets sink notices through, at the first FLOW.
func (cs *consumerState) markReady() {
	cs.mu.Lock()
	cs.ready = true
	p := cs.pending
	cs.pending = nil
	cs.mu.Unlock()
	if p != nil {
		cs.ActiveChanged(*p)
	}
}

// close detaches the consumer from the node.
func (cs *consumerState) close() {
	if cs.closed.Swap(true) || cs.cons == nil {
		return
	}
	_ = cs.cons.Close()
}

func (c *conn) handleSubscribe(cmd *pb.CommandSubscribe) {
	rid := cmd.GetRequestId()
	if c.consumer(cmd.GetConsumerId()) != nil {
		c.queue(errorCommand(rid, pb.ServerError_ConsumerBusy,
			fmt.Sprintf("consumer id %d is already in use on this connection", cmd.GetConsumerId())))
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, requestTimeout)
	defer cancel()
	part, err := c.resolve(ctx, cmd.GetTopic(), true)
	if err != nil {
		c.replyError(rid, err)
		return
	}
	if s := cmd.GetSchema(); s != nil && s.GetType() > pb.Schema_None {
		if err := c.s.b.CheckSchema(ctx, part.Topic, schemaInfo(s)); err != nil {
			c.replyError(rid, err)
			return
		}
	}
	ledger, err := c.s.b.Incarnation(ctx, part)
	if err != nil {
		c.replyError(rid, err)
		return
	}
	req, err := subscribeRequest(cmd, ledger, c.remote)
	if err != nil {
		c.replyError(rid, err)
		return
	}
	cs := &consumerState{id: cmd.GetConsumerId(), c: c, topic: cmd.GetTopic(), part: part, ledger: ledger}
	c.mu.Lock()
	c.mu.consumers[cs.id] = cs
	c.mu.Unlock()
	cons, err := c.s.b.Subscribe(ctx, part, req, cs)
	if err != nil {
		c.removeConsumer(cs)
		c.replyError(rid, err)
		return
	}
	cs.cons = cons
	c.queue(successCommand(rid))
}

// subscribeRequest converts SUBSCRIBE.
func subscribeRequest(cmd *pb.CommandSubscribe, ledger int64, remote string) (protocols.SubscribeRequest, error) {
	req := protocols.SubscribeRequest{
		Subscription:  cmd.GetSubscription(),
		Type:          protocols.SubscriptionType(cmd.GetSubType()),
		ConsumerName:  cmd.GetConsumerName(),
		Durable:       cmd.GetDurable(),
		PriorityLevel: cmd.GetPriorityLevel(),
		Address:       remote,
	}
	if cmd.GetInitialPosition() == pb.CommandSubscribe_Earliest {
		req.Start.Kind = protocols.StartEarliest
	}
	if id := cmd.GetStartMessageId(); id != nil {
		req.Start = startPosition(id, ledger)
	}
	if ks := cmd.GetKeySharedMeta(); ks != nil {
		req.KeyShared.Mode = protocols.KeySharedMode(ks.GetKeySharedMode())
		req.KeyShared.AllowOutOfOrder = ks.GetAllowOutOfOrderDelivery()
		for _, r := range ks.GetHashRanges() {
			req.KeyShared.Ranges = append(req.KeyShared.Ranges, protocols.HashRange{Start: r.GetStart(), End: r.GetEnd()})
		}
	}
	if md := cmd.GetMetadata(); len(md) > 0 {
		req.Metadata = make(map[string]string, len(md))
		for _, kv := range md {
			req.Metadata[kv.GetKey()] = kv.GetValue()
		}
		if v, ok := req.Metadata[AckTimeoutProperty]; ok {
			ms, err := strconv.ParseInt(v, 10, 64)
			if err != nil || ms < 0 {
				return req, fmt.Errorf("%w: consumer metadata %s=%q: want a number of milliseconds", protocols.ErrInvalidSubscription, AckTimeoutProperty, v)
			}
			req.AckTimeout = time.Duration(ms) * time.Millisecond
		}
	}
	if sp := cmd.GetSubscriptionProperties(); len(sp) > 0 {
		req.Properties = make(map[string]string, len(sp))
		for _, kv := range sp {
			req.Properties[kv.GetKey()] = kv.GetValue()
		}
	}
	return req, nil
}

// startPosition maps a start message id to a position on the partition
// whose incarnation is ledger.
func startPosition(id *pb.MessageIdData, ledger int64) protocols.StartPosition {
	switch {
	case IsEarliestMessageID(id):
		return protocols.StartPosition{Kind: protocols.StartEarliest}
	case IsLatestMessageID(id):
		return protocols.StartPosition{Kind: protocols.StartLatest}
	}
	l := int64(id.GetLedgerId())
	switch {
	case l < ledger:
		return protocols.StartPosition{Kind: protocols.StartEarliest}
	case l > ledger:
		return protocols.StartPosition{Kind: protocols.StartLatest}
	}
	off := int64(id.GetEntryId())
	if off < 0 {
		return protocols.StartPosition{Kind: protocols.StartEarliest}
	}
	if b := id.GetBatchIndex(); b > 0 {
		off += int64(b)
	}
	return protocols.StartPosition{Kind: protocols.StartAtOffset, Offset: off}
}

// position maps a message id from an ACK, SEEK or REDELIVER to an offset;
// ok is false for an id of another incarnation.
func (cs *consumerState) position(id *pb.MessageIdData) (int64, bool) {
	if int64(id.GetLedgerId()) != cs.ledger || int64(id.GetEntryId()) < 0 {
		return 0, false
	}
	return int64(id.GetEntryId()), true
}

// requestTimeout bounds the node-side work of one request.
const requestTimeout = 30 * time.Second
