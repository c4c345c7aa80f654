package pulsar

// SEND -> SEND_RECEIPT | SEND_ERROR, in the order the SENDs arrived.
//
// A SEND becomes one log entry (DESIGN §3): each message of the payload
// (one, or num_messages_in_batch of a batch) becomes a record with the
// partition key as key, the payload as value (nil for null_value), the
// properties as headers and the event time as timestamp; a message without
// an event time gets the producer's publish time as timestamp and is marked
// (protocols.AttrNoEventTime) so Pulsar readers still see none. The envelope
// carries the producer name, the sequence range (the SEND's sequence_id to
// the highest per-message sequence id), the schema version, and ordering
// keys, deliver_at_time and chunk information as entry attributes. The
// publish time is the append time the log stamps.
//
// Compressed payloads are decompressed to build the records and, with
// StoreCompressed, stored with the Kafka codec of the same family. A chunk
// of a chunked message is stored as the producer sent it (one record holding
// the chunk, still compressed as a whole message if it was), because chunks
// can only be decompressed once reassembled by the consumer.
//
// Receipts: appends are started in arrival order and a per-connection
// goroutine waits for each to become durable in turn, so receipts leave in
// SEND order while the fsyncs of consecutive SENDs are shared. Errors take
// the same queue. Codes follow what the Go client does with them: a message
// that can never be stored gets NotAllowedError (the client fails it and
// keeps going); a checksum mismatch gets ChecksumError; a storage or
// availability problem gets PersistenceError or ServiceNotReady, on which
// the client reconnects and resends, deduplicated when the namespace asks.
//
// Not supported, answered with NotAllowedError: encrypted messages,
// transactional sends, markers. replicate_to is kept with the entry
// (protocols.AttrReplicateTo) for the replicator; replicated_from is
// ignored (the replicator stamps an entry's origin itself).

import (
	"errors"
	"fmt"
	"io"
	"unsafe"

	"google.golang.org/protobuf/proto"

	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/protocols/pulsar/pb"
)

// sendScratch is the reader goroutine's reusable SEND state.
type sendScratch struct {
	md      pb.MessageMetadata
	smm     pb.SingleMessageMetadata
	plain   []byte
	msgs    []protocols.Message
	extras  []protocols.MessageExtras
	headers []protocols.Header
	batch   []byte
	comp    protocols.Compressor
}

// errNotAllowed marks a SEND that can never be stored.
var errNotAllowed = errors.New("pulsar: message refused")

func (c *conn) handleSend(cmd *pb.CommandSend, payload Payload) error {
	p := c.producer(cmd.GetProducerId())
	if p == nil {
		// A producer the broker closed: its client reconnects and resends
		// what is still pending, so SENDs already on the way are dropped.
		c.log.Debug("SEND for an unknown producer dropped", "producer_id", cmd.GetProducerId(), "sequence_id", cmd.GetSequenceId())
		return nil
	}
	select {
	case <-p.lease.Ready():
	default:
		c.sendError(cmd, pb.ServerError_NotAllowedError, "the producer is waiting for exclusive access and may not send yet")
		return nil
	}
	req, highest, err := c.buildEntry(p, cmd, payload)
	if err != nil {
		code := pb.ServerError_NotAllowedError
		if !errors.Is(err, errNotAllowed) {
			code, _ = sendErrorFor(err)
		}
		c.sendError(cmd, code, err.Error())
		return nil
	}
	size := int64(len(payload.Checksummed))
	if !c.acquire(size) {
		return nil
	}
	pending, err := c.s.b.StartProduce(c.ctx, p.part, req)
	if err != nil {
		c.release(size)
		code, msg := sendErrorFor(err)
		c.sendError(cmd, code, msg)
		return nil
	}
	c.receipts <- receiptItem{pending: pending, producer: p, seq: cmd.GetSequenceId(), highest: highest, size: size, read: c.lastRead.Load()}
	return nil
}

// sendError answers a SEND with SEND_ERROR, in order.
func (c *conn) sendError(cmd *pb.CommandSend, code pb.ServerError, msg string) {
	c.inOrder(NewCommand(&pb.CommandSendError{
		ProducerId: proto.Uint64(cmd.GetProducerId()), SequenceId: proto.Uint64(cmd.GetSequenceId()),
		Error: code.Enum(), Message: proto.String(msg),
	}), nil)
}

func (c *conn) sendChecksumError(cmd *pb.CommandSend, ce *ChecksumError) {
	c.log.Warn("SEND with a bad checksum refused; the client resends it", "producer_id", cmd.GetProducerId(), "sequence_id", cmd.GetSequenceId(), "err", ce)
	c.sendError(cmd, pb.ServerError_ChecksumError, ce.Error())
}

func refuse(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errNotAllowed}, args...)...)
}

// buildEntry converts a SEND into a produce request and reports the
// highest sequence id it carries.
func (c *conn) buildEntry(p *producer, cmd *pb.CommandSend, payload Payload) (protocols.ProduceRequest, uint64, error) {
	sc := &c.send
	md := &sc.md
	if err := payload.DecodeMetadata(md); err != nil {
		return protocols.ProduceRequest{}, 0, refuse("%v", err)
	}
	switch {
	case md.GetMarkerType() != 0 || cmd.GetMarker():
		return protocols.ProduceRequest{}, 0, refuse("markers are written by the broker, not by producers")
	case len(md.GetEncryptionKeys()) > 0:
		return protocols.ProduceRequest{}, 0, refuse("encrypted messages are not supported; send them unencrypted")
	case cmd.GetTxnidMostBits() != 0 || cmd.GetTxnidLeastBits() != 0 || md.GetTxnidMostBits() != 0 || md.GetTxnidLeastBits() != 0:
		return protocols.ProduceRequest{}, 0, refuse("transactions are not supported; send without a transaction")
	}
	publish := int64(md.GetPublishTime())
	first := cmd.GetSequenceId()
	last := first
	sc.msgs = sc.msgs[:0]
	sc.extras = sc.extras[:0]
	sc.headers = sc.headers[:0]
	env := protocols.Envelope{
		ProducerName:  p.lease.Name(),
		SequenceFirst: int64(first),
	}
	if v := md.GetSchemaVersion(); len(v) > 0 {
		env.SchemaVersion = v
	}
	if md.DeliverAtTime != nil {
		protocols.SetDeliverAt(&env, md.GetDeliverAtTime())
	}
	if to := md.GetReplicateTo(); len(to) > 0 {
		// replicate_to (or disable_replication, sent as ["__local__"]) limits where the
		// replicator sends the entry.
		if err := protocols.SetReplicateTo(&env, to); err != nil {
			return protocols.ProduceRequest{}, 0, refuse("replicate_to: %v", err)
		}
	}
	codec := protocols.CodecNone
	switch {
	case cmd.GetIsChunk() || md.GetNumChunksFromMsg() > 1:
		sc.add(md.GetPartitionKey(), md.PartitionKey != nil, payload.Data, md.GetNullValue(), md.GetProperties(), md.GetEventTime(), md.GetOrderingKey(), publish)
		protocols.SetChunk(&env, protocols.ChunkInfo{
			UUID: md.GetUuid(), ID: md.GetChunkId(), Count: md.GetNumChunksFromMsg(),
			TotalSize: md.GetTotalChunkMsgSize(), Codec: int8(md.GetCompression()),
			UncompressedSize: int32(md.GetUncompressedSize()),
		})
	default:
		data, err := c.s.codec.DecompressPayload(sc.plain[:0], md, payload.Data)
		if err != nil {
			return protocols.ProduceRequest{}, 0, refuse("%v", err)
		}
		if md.GetCompression() != pb.CompressionType_NONE {
			sc.plain = data
			if c.s.cfg.StoreCompressed {
				codec = kafkaCodec(md.GetCompression())
			}
		}
		if !IsBatch(md) {
			sc.add(md.GetPartitionKey(), md.PartitionKey != nil, data, md.GetNullValue(), md.GetProperties(), md.GetEventTime(), md.GetOrderingKey(), publish)
			break
		}
		n := int(md.GetNumMessagesInBatch())
		if n < 1 || n > len(data)/6+1 {
			return protocols.ProduceRequest{}, 0, refuse("num_messages_in_batch %d does not fit a %d-byte batch", n, len(data))
		}
		r := NewBatchReader(data, n)
		seqSeen := false
		for {
			value, err := r.Next(&sc.smm)
			if err == io.EOF {
				break
			}
			if err != nil {
				return protocols.ProduceRequest{}, 0, refuse("%v", err)
			}
			s := &sc.smm
			sc.add(s.GetPartitionKey(), s.HasPartitionKey(), value, s.GetNullValue(), s.GetProperties(), s.GetEventTime(), s.GetOrderingKey(), publish)
			if s.HasSequenceId() {
				last = max(last, s.GetSequenceId())
				seqSeen = true
			}
		}
		if !seqSeen {
			last = first + uint64(n) - 1
		}
	}
	last = max(last, cmd.GetHighestSequenceId())
	env.SequenceLast = int64(last)
	protocols.SetMessageExtras(&env, sc.extras)
	batch, err := protocols.AppendBatch(sc.batch[:0], protocols.BatchSpec{Codec: codec, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, sc.msgs, &sc.comp)
	if err != nil {
		return protocols.ProduceRequest{}, 0, refuse("%v", err)
	}
	sc.batch = batch
	h, err := protocols.ParseBatchHeader(batch)
	if err != nil {
		return protocols.ProduceRequest{}, 0, err
	}
	return protocols.ProduceRequest{Envelope: env, Batch: batch, Header: &h}, last, nil
}

// add appends one message.
func (sc *sendScratch) add(key string, hasKey bool, value []byte, null bool, props []*pb.KeyValue, eventTime uint64, orderingKey []byte, publish int64) {
	m := protocols.Message{Value: value, Timestamp: int64(eventTime)}
	if value == nil {
		m.Value = []byte{}
	}
	if null {
		m.Value = nil
	}
	if hasKey {
		m.Key = stringBytes(key)
	}
	if len(props) > 0 {
		// One backing array for the whole SEND; it only lives until the
		// batch is encoded.
		at := len(sc.headers)
		for _, kv := range props {
			sc.headers = append(sc.headers, protocols.Header{Key: kv.GetKey(), Value: stringBytes(kv.GetValue())})
		}
		m.Headers = sc.headers[at:len(sc.headers):len(sc.headers)]
	}
	x := protocols.MessageExtras{}
	if len(orderingKey) > 0 {
		x.OrderingKey = orderingKey
	}
	if eventTime == 0 {
		m.Timestamp = publish
		x.NoEventTime = true
	}
	sc.msgs = append(sc.msgs, m)
	sc.extras = append(sc.extras, x)
}

// stringBytes views a string's bytes without copying. The slices built
// from it are only read (AppendBatch copies them into the batch).
func stringBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// kafkaCodec is the Kafka codec of a Pulsar codec's family.
func kafkaCodec(t pb.CompressionType) protocols.Codec {
	switch t {
	case pb.CompressionType_LZ4:
		return protocols.CodecLZ4
	case pb.CompressionType_ZLIB:
		return protocols.CodecGzip
	case pb.CompressionType_ZSTD:
		return protocols.CodecZstd
	case pb.CompressionType_SNAPPY:
		return protocols.CodecSnappy
	}
	return protocols.CodecNone
}
