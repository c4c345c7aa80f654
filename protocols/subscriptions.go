package protocols

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// Subscriptions are Pulsar's consumption model, served by the node and
// shared by every front end that speaks it: the Pulsar binary protocol and
// the Pulsar WebSocket API use this contract alike, so both see the same
// subscriptions, cursors and redelivery counts.
//
// # Model
//
// A subscription is a named cursor on one partition log. A durable
// subscription keeps its cursor in storage across restarts and exists until
// it is unsubscribed; a non-durable one (a reader) lives in memory and ends
// with its last consumer. The cursor is message-granular: every offset below
// the mark-delete point is acknowledged, and so is every offset in a set of
// individually acknowledged ranges above it.
//
// Consumers attach to a subscription with Subscribe and receive messages by
// push: the node calls the consumer's ConsumerSink with Deliveries, never
// more than the consumer's permits allow (Flow adds permits; one message
// uses one permit, so a delivery of n messages uses n; like Pulsar, the last
// delivery may overdraw the permits). No message is pushed before the first
// Flow.
//
// # Deliveries and positions
//
// A Delivery is a run of consecutive offsets from one entry. A front end
// names each delivered message by (Delivery.Offset, index) and a client
// echoes Delivery.Offset back in acks and redelivery requests: it is what a
// Pulsar client sees as the entry id, and offset = Offset + index always
// holds. A first delivery usually covers a whole entry; redeliveries of a
// partially acknowledged entry, and Key_Shared deliveries of an entry whose
// keys belong to several consumers, cover the unacknowledged or matching part
// only, so no client is handed a message that is not its own.
//
// # Dispatch by type
//
//   - Exclusive: one consumer; a second gets ErrConsumerBusy.
//   - Failover: many consumers, one active (the first by priority level then
//     consumer name, or for partition i of a partitioned topic the i-th modulo
//     the count). ActiveChanged tells each consumer when it gains or loses
//     that role; a new active consumer gets the old one's unacknowledged
//     messages again.
//   - Shared: round robin among the consumers with permits, highest priority
//     (lowest PriorityLevel) first; messages whose delivery time
//     (AttrDeliverAt) lies ahead are held until it comes.
//   - Key_Shared: each message goes to the consumer that owns its key's hash
//     (the ordering key, else the key), in AUTO_SPLIT mode by consistent
//     hashing, in STICKY mode by the hash ranges consumers declare. Per-key
//     order holds across consumers: a hash is served by one consumer at a
//     time, so when hashes move (a consumer joins or leaves) the new owner
//     gets messages of a moved hash only once the previous holder has
//     acknowledged or handed back all it held of it; and a message never
//     overtakes an older one of the same key waiting for redelivery.
//     AllowOutOfOrder lifts the first rule. Delivery times apply as for
//     Shared.
//
// # Threading
//
// Each subscription is owned by one goroutine in the node. Consumer methods
// hand work to it and may be called from any goroutine; ConsumerSink
// methods are called from it and must not block.
type Subscriptions interface {
	// Subscribe attaches a consumer to a subscription on one partition,
	// creating the subscription if needed. Errors: ErrTopicNotFound,
	// ErrPartitionNotFound, ErrConsumerBusy (Exclusive taken, or a
	// different subscription type already in use), ErrConsumerAssign
	// (Key_Shared STICKY ranges overlap), ErrInvalidSubscription.
	Subscribe(ctx context.Context, p Partition, req SubscribeRequest, sink ConsumerSink) (Consumer, error)
	// Incarnation is the partition's incarnation number: it changes when a
	// topic is deleted and created again, so a position taken before
	// cannot be mistaken for one after. Pulsar clients see it as the ledger
	// id of every message id.
	Incarnation(ctx context.Context, p Partition) (int64, error)
}

// Messaging is everything the Pulsar binary and WebSocket front ends need:
// the Broker plus subscriptions, producer registration and schemas.
type Messaging interface {
	Broker
	Subscriptions
	Producers
	Schemas
}

// SubscriptionType selects how a subscription spreads messages over its
// consumers. The numbers are Pulsar's.
type SubscriptionType int8

// The subscription types.
const (
	SubExclusive SubscriptionType = 0
	SubShared    SubscriptionType = 1
	SubFailover  SubscriptionType = 2
	SubKeyShared SubscriptionType = 3
)

func (t SubscriptionType) String() string {
	switch t {
	case SubExclusive:
		return "Exclusive"
	case SubShared:
		return "Shared"
	case SubFailover:
		return "Failover"
	case SubKeyShared:
		return "Key_Shared"
	}
	return "SubscriptionType(" + strconv.Itoa(int(t)) + ")"
}

// StartKind says where a subscription begins reading.
type StartKind int8

const (
	// StartLatest begins after the last message present when the
	// subscription is created.
	StartLatest StartKind = iota
	// StartEarliest begins at the log start.
	StartEarliest
	// StartAtOffset begins at a given offset (readers and reconnects after
	// a seek). Delivery begins with the whole entry holding that offset:
	// earlier messages of the entry are delivered too, as Pulsar clients
	// expect (they drop them themselves); a front end whose clients do not
	// filter drops messages below Offset (or at it, when not inclusive).
	StartAtOffset
)

// StartPosition is where a new subscription, or any non-durable one, begins.
// A durable subscription that already exists ignores it and resumes at its
// cursor.
type StartPosition struct {
	Kind   StartKind
	Offset int64
}

// KeySharedMode selects how Key_Shared assigns key hashes to consumers.
type KeySharedMode int8

// The Key_Shared modes, with Pulsar's numbers.
const (
	KeySharedAutoSplit KeySharedMode = 0
	KeySharedSticky    KeySharedMode = 1
)

// KeyHashRange is the size of the key hash space Key_Shared divides:
// hashes are 0 to KeyHashRange-1, as in Pulsar.
const KeyHashRange = 1 << 16

// HashRange is an inclusive range of key hashes.
type HashRange struct{ Start, End int32 }

// KeySharedPolicy is a Key_Shared consumer's choice of mode.
type KeySharedPolicy struct {
	Mode KeySharedMode
	// Ranges are the hashes a STICKY consumer takes; they must not overlap
	// another consumer's.
	Ranges []HashRange
	// AllowOutOfOrder lifts the per-key order guarantee when hashes move
	// between consumers: a new owner gets its keys at once.
	AllowOutOfOrder bool
}

// SubscribeRequest describes a consumer and, when it creates one, its
// subscription.
type SubscribeRequest struct {
	// Subscription names the subscription on the partition.
	Subscription string
	Type         SubscriptionType
	// ConsumerName is shown in stats and orders Failover consumers.
	ConsumerName string
	// Durable subscriptions keep their cursor in storage.
	Durable bool
	// Start is where a new (or non-durable) subscription begins.
	Start StartPosition
	// PriorityLevel orders Shared dispatch and Failover activation: lower
	// is preferred.
	PriorityLevel int32
	// KeyShared applies to Key_Shared subscriptions.
	KeyShared KeySharedPolicy
	// AckTimeout, when positive, redelivers a message this consumer has
	// not acknowledged that long after delivery, counting a redelivery.
	// Pulsar clients run that timer themselves; the WebSocket API asks the
	// broker to (ackTimeoutMillis).
	AckTimeout time.Duration
	// Metadata is the consumer's own key/value metadata (stats).
	Metadata map[string]string
	// Properties are stored with a durable subscription it creates.
	Properties map[string]string
	// Address is the client's address, for stats.
	Address string
}

// Consumer is one attached consumer. Every method is safe to call from any
// goroutine; all but Flow wait for the subscription's goroutine to act.
type Consumer interface {
	// Flow grants n more permits (messages). Flow(0) grants none and has
	// the node try to send again: a FullSink calls it once it has room.
	Flow(n int)
	// Ack acknowledges messages. Individual acks may name any delivered
	// message; cumulative acks (Exclusive and Failover only, else
	// ErrInvalidAck) acknowledge everything up to and including the
	// position. Acks of messages already acknowledged, or outside the log,
	// are ignored.
	Ack(ctx context.Context, acks []AckPosition, cumulative bool) error
	// Redeliver hands back the unacknowledged messages of the deliveries
	// starting at the given offsets (a Pulsar negative ack), or of every
	// delivery this consumer holds when offsets is nil, and counts one
	// redelivery for each message.
	Redeliver(ctx context.Context, offsets []int64) error
	// Seek moves the subscription: everything before the target becomes
	// acknowledged and everything from it on unacknowledged. Every consumer
	// of the subscription, this one included, is then ended with
	// ErrSubscriptionReset, as Pulsar clients expect (they subscribe again).
	Seek(ctx context.Context, target SeekTarget) error
	// Unsubscribe deletes the subscription. It fails with ErrConsumerBusy
	// while other consumers are attached, unless force is set (which ends
	// them).
	Unsubscribe(ctx context.Context, force bool) error
	// MarkDelete is the subscription's mark-delete point: every offset
	// below it is acknowledged.
	MarkDelete(ctx context.Context) (int64, error)
	// Close detaches the consumer; messages it held unacknowledged go to
	// other consumers (without counting a redelivery). A non-durable
	// subscription ends with its last consumer.
	Close() error
}

// AckPosition names acknowledged messages by the delivery they came in.
type AckPosition struct {
	// Offset is the first offset of the delivery (Delivery.Offset, the
	// Pulsar entry id).
	Offset int64
	// BatchIndex, when >= 0, acknowledges only message Offset+BatchIndex
	// (cumulative: everything up to it). -1 means the whole delivery, or
	// the messages Unacked leaves out.
	BatchIndex int32
	// Unacked, when not nil, is a bitset over the delivery's messages
	// (little-endian words, bit i for message Offset+i) in which a set bit
	// means still unacknowledged: Pulsar's batch-index ack_set. Only
	// messages whose bit is clear are acknowledged.
	Unacked []uint64
}

// SeekTarget is an offset or a publish time.
type SeekTarget struct {
	// ByTime selects Time instead of Offset.
	ByTime bool
	// Offset is the first offset to deliver again; it is clamped to the
	// retained log.
	Offset int64
	// Time is a publish time, Unix ms: delivery resumes at the first entry
	// appended at or after it.
	Time int64
}

// ConsumerSink receives what the node pushes to a consumer. Its methods are
// called from the subscription's goroutine, one at a time, and must return
// promptly (queue the work); deliveries are bounded by the consumer's
// permits, so a queue cannot grow past what the consumer asked for.
type ConsumerSink interface {
	// Deliver hands over messages. The Delivery and everything it points
	// to belong to the sink, until it calls Delivery.Buffer.Release.
	Deliver(d Delivery)
	// ActiveChanged tells an Exclusive or Failover consumer whether it is
	// the one receiving messages. It is called when the consumer attaches
	// and whenever the role moves.
	ActiveChanged(active bool)
	// Ended tells the consumer that the node detached it: err is
	// ErrSubscriptionReset after a seek, ErrSubscriptionDeleted after an
	// unsubscribe or a cursor reset through the admin API,
	// ErrTopicNotFound when the topic was deleted, ErrClosed when the node
	// shuts down. No call follows it. It is not called after Close.
	Ended(err error)
}

// FullSink is a ConsumerSink that bounds what it holds unsent, as a
// Pulsar broker stops dispatching to a connection whose socket is not
// writable. While Full reports true the node sends the consumer nothing,
// whatever its permits; the sink then calls Consumer.Flow(0) once it has
// room again. The node calls Full before each delivery, on the
// subscription's goroutine, so it must be cheap; and every Full that
// reports true must be followed by a Flow(0), whatever happens meanwhile
// on the sink's side.
type FullSink interface {
	ConsumerSink
	Full() bool
}

// Delivery is a run of consecutive messages of one entry, pushed to one
// consumer.
type Delivery struct {
	// Offset is the first message's offset; clients echo it in acks.
	Offset int64
	// Messages are the messages at Offset, Offset+1, ... in order.
	Messages []Message
	// Extras are per-message properties beyond Message, parallel to
	// Messages.
	Extras []MessageExtras
	// Envelope is the entry's envelope: producer, sequence range, schema
	// version, batch attributes (AttrDeliverAt, AttrChunk, ...) and
	// AppendTime, the publish time.
	Envelope Envelope
	// EntryOffset and EntryCount locate the entry the run comes from.
	EntryOffset int64
	EntryCount  int
	// RedeliveryCount is how many times these messages were handed back
	// (negative acks, ack timeouts): the highest among them.
	RedeliveryCount int32
	// Buffer, when set, is the read buffer the messages, extras and
	// envelope lie in. A sink that has copied out everything it needs of
	// the delivery (encoded it into frames of its own) may call
	// Buffer.Release, once, and must not touch the delivery's slices
	// after that: the node reads into the buffer again. A sink that keeps
	// the messages does not call it, and the buffer is left to the
	// garbage collector.
	Buffer Releaser
}

// Releaser is a buffer shared by several holders, each of which gives its
// share back once with Release.
type Releaser interface {
	Release()
}

// Errors of the subscription contract.
var (
	ErrConsumerBusy         = errors.New("protocols: subscription is busy")
	ErrConsumerAssign       = errors.New("protocols: key hash ranges overlap another consumer's")
	ErrInvalidSubscription  = errors.New("protocols: invalid subscription request")
	ErrInvalidAck           = errors.New("protocols: invalid acknowledgement")
	ErrSubscriptionReset    = errors.New("protocols: subscription was reset; subscribe again")
	ErrSubscriptionDeleted  = errors.New("protocols: subscription was deleted")
	ErrSubscriptionNotFound = errors.New("protocols: subscription not found")
	ErrConsumerClosed       = errors.New("protocols: consumer is closed")
)
