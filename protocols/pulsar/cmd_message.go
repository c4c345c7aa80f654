package pulsar

// MESSAGE: how a delivery goes out.
//
// Every delivery is sent as a batch payload (num_messages_in_batch set,
// even for one message), uncompressed, with a SingleMessageMetadata per
// message: key, properties, event time (unless the producer gave none),
// ordering key, sequence id and null_value. The message id is (partition
// incarnation, first offset of the delivery), so the client's (entry id,
// batch index) always adds up to the message's offset. publish_time is the
// append time. A chunk goes out unbatched with its chunk metadata and its
// bytes as stored. Clients that support broker entry metadata get it in
// front, with index = offset of the delivery's last message, which is how
// the Go client numbers messages (Message.Index).

import (
	"google.golang.org/protobuf/proto"

	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/protocols/pulsar/pb"
)

// outMessage is a delivery queued for the writer.
type outMessage struct {
	cs *consumerState
	d  protocols.Delivery
	// size is what the delivery counts in conn.outBytes.
	size int64
}

// outOverhead is what a queued message counts beyond its key and value.
const outOverhead = 64

// appendMessage encodes a delivery as a MESSAGE frame.
func (c *conn) appendMessage(buf []byte, om *outMessage) ([]byte, error) {
	cs, d := om.cs, &om.d
	if cs.closed.Load() || len(d.Messages) == 0 {
		return buf, nil
	}
	id := &pb.MessageIdData{LedgerId: proto.Uint64(uint64(cs.ledger)), EntryId: proto.Uint64(uint64(d.Offset))}
	cmd := NewCommand(&pb.CommandMessage{
		ConsumerId:      proto.Uint64(cs.id),
		MessageId:       id,
		RedeliveryCount: proto.Uint32(uint32(max(d.RedeliveryCount, 0))),
	})
	var bem *pb.BrokerEntryMetadata
	if c.entryMeta {
		bem = NewBrokerEntryMetadata(uint64(d.Envelope.AppendTime), uint64(d.Offset+int64(len(d.Messages))-1))
	}
	env := &d.Envelope
	seq := env.SequenceFirst + (d.Offset - d.EntryOffset)
	md := &pb.MessageMetadata{
		ProducerName: proto.String(env.ProducerName),
		SequenceId:   proto.Uint64(uint64(max(seq, 0))),
		PublishTime:  proto.Uint64(uint64(env.AppendTime)),
	}
	if len(env.SchemaVersion) > 0 {
		md.SchemaVersion = env.SchemaVersion
	}
	if ch, ok := protocols.Chunk(env); ok {
		m := &d.Messages[0]
		md.Uuid = proto.String(ch.UUID)
		md.ChunkId = proto.Int32(ch.ID)
		md.NumChunksFromMsg = proto.Int32(ch.Count)
		md.TotalChunkMsgSize = proto.Int32(ch.TotalSize)
		md.Compression = pb.CompressionType(ch.Codec).Enum()
		md.UncompressedSize = proto.Uint32(uint32(ch.UncompressedSize))
		if m.Key != nil {
			md.PartitionKey = proto.String(string(m.Key))
		}
		md.Properties = keyValues(m.Headers)
		if x := d.Extras[0]; !x.NoEventTime {
			md.EventTime = proto.Uint64(uint64(m.Timestamp))
		}
		if x := d.Extras[0]; x.OrderingKey != nil {
			md.OrderingKey = x.OrderingKey
		}
		return AppendPayloadCommand(buf, cmd, bem, md, m.Value)
	}
	md.NumMessagesInBatch = proto.Int32(int32(len(d.Messages)))
	buf, mark, err := StartPayloadCommand(buf, cmd, bem, md)
	if err != nil {
		return buf, err
	}
	// One metadata value serves the whole delivery: each message sets the
	// fields it has and clears the ones it has not, so none leaks into the
	// next. (A Reset per message cost more: each set after it updates the
	// presence bits atomically, and every field would be set anew.)
	smm := &pb.SingleMessageMetadata{}
	for i := range d.Messages {
		m := &d.Messages[i]
		x := &d.Extras[i]
		if len(m.Headers) > 0 {
			smm.SetProperties(keyValues(m.Headers))
		} else if len(smm.GetProperties()) > 0 {
			smm.SetProperties(nil)
		}
		smm.SetSequenceId(uint64(max(seq+int64(i), 0)))
		if m.Key != nil {
			smm.SetPartitionKey(string(m.Key))
		} else if smm.HasPartitionKey() {
			smm.ClearPartitionKey()
		}
		if !x.NoEventTime && m.Timestamp > 0 {
			smm.SetEventTime(uint64(m.Timestamp))
		} else if smm.HasEventTime() {
			smm.ClearEventTime()
		}
		if x.OrderingKey != nil {
			smm.SetOrderingKey(x.OrderingKey)
		} else if smm.HasOrderingKey() {
			smm.ClearOrderingKey()
		}
		if m.Value == nil {
			smm.SetNullValue(true)
		} else if smm.HasNullValue() {
			smm.ClearNullValue()
		}
		if buf, err = AppendBatchMessage(buf, smm, m.Value); err != nil {
			return buf, err
		}
	}
	return FinishPayloadCommand(buf, mark)
}

func keyValues(hs []protocols.Header) []*pb.KeyValue {
	if len(hs) == 0 {
		return nil
	}
	kvs := make([]*pb.KeyValue, len(hs))
	for i, h := range hs {
		kvs[i] = &pb.KeyValue{Key: proto.String(h.Key), Value: proto.String(string(h.Value))}
	}
	return kvs
}
