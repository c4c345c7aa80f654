package pulsar

// PRODUCER -> PRODUCER_SUCCESS | ERROR, and CLOSE_PRODUCER -> SUCCESS.
//
// The node registers the producer (protocols.Producers): it assigns a name
// when the client brings none, refuses a name already attached to the topic
// with ProducerBusy (unless the request comes from the same producer
// reconnecting, with a higher epoch), and enforces the access mode. With
// WaitForExclusive the broker answers producer_ready=false at once and a
// second PRODUCER_SUCCESS when the producer holds the topic alone, as the Go
// client expects. last_sequence_id is the highest sequence id stored for the
// name when the namespace deduplicates, -1 otherwise. A schema in the
// request is added to the topic's schema history (or found there) after the
// compatibility check; an incompatible one fails with IncompatibleSchema.
// initial_subscription_name creates a durable subscription at the earliest
// position, as Pulsar does for dead-letter topics.
//
// When the node takes the registration away (another connection took the
// name over, an exclusive producer fenced this one), the broker sends
// CLOSE_PRODUCER and the client reconnects.

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/proto"

	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/protocols/pulsar/pb"
)

// producer is one producer attached through this connection.
type producer struct {
	id     uint64
	c      *conn
	topic  string
	part   protocols.Partition
	ledger int64
	lease  protocols.ProducerLease
	closed atomic.Bool
	done   chan struct{}
	once   sync.Once
}

func (p *producer) close() {
	p.once.Do(func() {
		p.closed.Store(true)
		close(p.done)
		p.lease.Close()
	})
}

func (c *conn) producer(id uint64) *producer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.producers[id]
}

func (c *conn) handleProducer(cmd *pb.CommandProducer) {
	rid := cmd.GetRequestId()
	if old := c.producer(cmd.GetProducerId()); old != nil {
		if old.topic == cmd.GetTopic() {
			// A repeated request for a producer already created here.
			c.queue(c.producerSuccess(rid, old, nil, true))
			return
		}
		c.queue(errorCommand(rid, pb.ServerError_ProducerBusy,
			fmt.Sprintf("producer id %d is already in use on this connection for %s", cmd.GetProducerId(), old.topic)))
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, requestTimeout)
	defer cancel()
	part, err := c.resolve(ctx, cmd.GetTopic(), true)
	if err != nil {
		c.replyError(rid, err)
		return
	}
	var schemaVersion []byte
	if s := cmd.GetSchema(); s != nil && s.GetType() > pb.Schema_None {
		v, err := c.s.b.AddSchema(ctx, part.Topic, schemaInfo(s))
		if err != nil {
			c.replyError(rid, err)
			return
		}
		schemaVersion = binary.BigEndian.AppendUint64(nil, uint64(v))
	}
	lease, err := c.s.b.OpenProducer(ctx, part, protocols.ProducerRequest{
		Name:       cmd.GetProducerName(),
		Epoch:      cmd.GetEpoch(),
		AccessMode: protocols.ProducerAccessMode(cmd.GetProducerAccessMode()),
		Address:    c.remote,
	})
	if err != nil {
		c.replyError(rid, err)
		return
	}
	ledger, err := c.s.b.Incarnation(ctx, part)
	if err != nil {
		lease.Close()
		c.replyError(rid, err)
		return
	}
	if sub := cmd.GetInitialSubscriptionName(); sub != "" {
		if err := c.initialSubscription(ctx, part, sub); err != nil {
			lease.Close()
			c.replyError(rid, err)
			return
		}
	}
	p := &producer{id: cmd.GetProducerId(), c: c, topic: cmd.GetTopic(), part: part, ledger: ledger, lease: lease, done: make(chan struct{})}
	c.mu.Lock()
	c.mu.producers[p.id] = p
	c.mu.Unlock()
	select {
	case <-lease.Ready():
		c.queue(c.producerSuccess(rid, p, schemaVersion, true))
	default:
		c.queue(c.producerSuccess(rid, p, schemaVersion, false))
		go func() {
			select {
			case <-lease.Ready():
				c.queue(c.producerSuccess(rid, p, schemaVersion, true))
			case <-p.done:
			case <-c.aborted:
			}
		}()
	}
	go c.watchProducer(p)
}

func (c *conn) producerSuccess(rid uint64, p *producer, schemaVersion []byte, ready bool) *pb.BaseCommand {
	return NewCommand(&pb.CommandProducerSuccess{
		RequestId:      proto.Uint64(rid),
		ProducerName:   proto.String(p.lease.Name()),
		LastSequenceId: proto.Int64(p.lease.LastSequence()),
		SchemaVersion:  schemaVersion,
		ProducerReady:  proto.Bool(ready),
	})
}

// watchProducer closes the client's producer when the node revokes it.
func (c *conn) watchProducer(p *producer) {
	select {
	case <-p.lease.Revoked():
	case <-p.done:
		return
	case <-c.aborted:
		return
	}
	c.mu.Lock()
	if c.mu.producers[p.id] == p {
		delete(c.mu.producers, p.id)
	}
	c.mu.Unlock()
	p.close()
	c.queue(NewCommand(&pb.CommandCloseProducer{ProducerId: proto.Uint64(p.id), RequestId: proto.Uint64(math.MaxUint64)}))
}

// initialSubscription creates a durable subscription at the earliest
// position unless it exists.
func (c *conn) initialSubscription(ctx context.Context, part protocols.Partition, name string) error {
	cons, err := c.s.b.Subscribe(ctx, part, protocols.SubscribeRequest{
		Subscription: name, Type: protocols.SubShared, Durable: true,
		Start: protocols.StartPosition{Kind: protocols.StartEarliest}, ConsumerName: "initial-subscription",
	}, nopSink{})
	if err != nil {
		return err
	}
	return cons.Close()
}

// nopSink receives nothing: it never grants permits.
type nopSink struct{}

func (nopSink) Deliver(protocols.Delivery) {}
func (nopSink) ActiveChanged(bool)         {}
func (nopSink) Ended(error)                {}

func (c *conn) handleCloseProducer(cmd *pb.CommandCloseProducer) {
	c.mu.Lock()
	p := c.mu.producers[cmd.GetProducerId()]
	delete(c.mu.producers, cmd.GetProducerId())
	c.mu.Unlock()
	if p != nil {
		p.close()
	}
	// Answered after the receipts of every SEND before it.
	c.inOrder(successCommand(cmd.GetRequestId()), nil)
}

// schemaInfo converts a protocol schema.
func schemaInfo(s *pb.Schema) protocols.SchemaInfo {
	info := protocols.SchemaInfo{Type: schemaTypeName(s.GetType()), Name: s.GetName(), Data: s.GetSchemaData()}
	if len(s.GetProperties()) > 0 {
		info.Properties = make(map[string]string, len(s.GetProperties()))
		for _, kv := range s.GetProperties() {
			info.Properties[kv.GetKey()] = kv.GetValue()
		}
	}
	return info
}

// pbSchema converts a stored schema back.
func pbSchema(info protocols.SchemaInfo) *pb.Schema {
	s := &pb.Schema{Name: proto.String(info.Name), SchemaData: info.Data, Type: schemaTypeOf(info.Type).Enum()}
	if s.SchemaData == nil {
		s.SchemaData = []byte{}
	}
	for k, v := range info.Properties {
		s.Properties = append(s.Properties, &pb.KeyValue{Key: proto.String(k), Value: proto.String(v)})
	}
	return s
}

var schemaTypeNames = map[pb.Schema_Type]string{
	pb.Schema_None: "NONE", pb.Schema_String: "STRING", pb.Schema_Json: "JSON", pb.Schema_Protobuf: "PROTOBUF",
	pb.Schema_Avro: "AVRO", pb.Schema_Bool: "BOOLEAN", pb.Schema_Int8: "INT8", pb.Schema_Int16: "INT16",
	pb.Schema_Int32: "INT32", pb.Schema_Int64: "INT64", pb.Schema_Float: "FLOAT", pb.Schema_Double: "DOUBLE",
	pb.Schema_Date: "DATE", pb.Schema_Time: "TIME", pb.Schema_Timestamp: "TIMESTAMP", pb.Schema_KeyValue: "KEY_VALUE",
	pb.Schema_Instant: "INSTANT", pb.Schema_LocalDate: "LOCAL_DATE", pb.Schema_LocalTime: "LOCAL_TIME",
	pb.Schema_LocalDateTime: "LOCAL_DATE_TIME", pb.Schema_ProtobufNative: "PROTOBUF_NATIVE",
}

func schemaTypeName(t pb.Schema_Type) string {
	if n, ok := schemaTypeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("TYPE_%d", int32(t))
}

func schemaTypeOf(name string) pb.Schema_Type {
	for t, n := range schemaTypeNames {
		if n == name {
			return t
		}
	}
	return pb.Schema_None
}
