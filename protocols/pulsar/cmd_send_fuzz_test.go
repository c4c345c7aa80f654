package pulsar

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/protocols/pulsar/pb"
)

// fixedLease is a registered producer name for driving buildEntry without a
// node; it has no behaviour to speak of.
type fixedLease struct{ ready chan struct{} }

func (fixedLease) Name() string             { return "fuzz-producer" }
func (fixedLease) LastSequence() int64      { return -1 }
func (l fixedLease) Ready() <-chan struct{} { return l.ready }
func (fixedLease) Revoked() <-chan struct{} { return nil }
func (fixedLease) Close()                   {}
func newFixedLease() fixedLease             { c := make(chan struct{}); close(c); return fixedLease{ready: c} }

// testConn is a connection whose socket is never used: enough to run the
// SEND conversion and the MESSAGE encoder.
func testConn(t testing.TB, storeCompressed bool) *conn {
	t.Helper()
	cfg := DefaultConfig()
	cfg.StoreCompressed = storeCompressed
	cc := DefaultCodecConfig()
	cc.MaxUncompressedSize = cfg.MaxMessageSize
	codec, err := NewCodec(cc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = codec.Close() })
	s := &Server{cfg: cfg, codec: codec, log: slog.New(slog.DiscardHandler)}
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return newConn(s, a, 1)
}

// roundTrip converts a SEND payload into an entry and the entry back into a
// MESSAGE, and returns the messages the MESSAGE carries.
func roundTrip(t testing.TB, c *conn, send *pb.CommandSend, section []byte) (protocols.ProduceRequest, []BatchMessage, *pb.MessageMetadata, error) {
	payload, err := ParsePayload(section)
	if err != nil {
		return protocols.ProduceRequest{}, nil, nil, err
	}
	p := &producer{id: 1, part: protocols.Partition{Index: -1}, lease: newFixedLease(), ledger: 7}
	req, _, err := c.buildEntry(p, send, payload)
	if err != nil {
		return req, nil, nil, err
	}
	// The entry as the log stores it.
	h, err := protocols.ValidateBatch(req.Batch)
	if err != nil {
		t.Fatalf("buildEntry made an invalid batch: %v", err)
	}
	entry, err := protocols.AppendEntry(nil, &req.Envelope, req.Batch)
	if err != nil {
		t.Fatalf("buildEntry made an envelope that does not encode: %v", err)
	}
	if err := protocols.StampEntry(entry, 100, 1_700_000_000_000); err != nil {
		t.Fatal(err)
	}
	e, err := protocols.DecodeEntry(entry)
	if err != nil {
		t.Fatalf("the stored entry does not decode: %v", err)
	}
	msgs, err := protocols.Records(e.Batch, e.Header, &protocols.Decompressor{})
	if err != nil || len(msgs) != int(h.NumRecords) {
		t.Fatalf("the stored batch does not decode: %d records, %v", len(msgs), err)
	}
	extras, err := protocols.MessageExtrasOf(&e.Envelope, len(msgs))
	if err != nil {
		t.Fatalf("the stored extras do not decode: %v", err)
	}
	cs := &consumerState{id: 3, c: c, ledger: 7}
	frame, err := c.appendMessage(nil, &outMessage{cs: cs, d: protocols.Delivery{
		Offset: 100, Messages: msgs, Extras: extras, Envelope: e.Envelope, EntryOffset: 100, EntryCount: len(msgs),
	}})
	if err != nil {
		t.Fatalf("the MESSAGE does not encode: %v", err)
	}
	f, err := SplitFrame(frame[4:])
	if err != nil {
		t.Fatal(err)
	}
	var cmd pb.BaseCommand
	out, err := DecodeFrame(f, &cmd)
	if err != nil {
		t.Fatalf("the MESSAGE does not decode: %v", err)
	}
	md := &pb.MessageMetadata{}
	if err := out.DecodeMetadata(md); err != nil {
		t.Fatal(err)
	}
	if _, ok := protocols.Chunk(&e.Envelope); ok {
		return req, []BatchMessage{{Metadata: &pb.SingleMessageMetadata{}, Payload: out.Data}}, md, nil
	}
	got, err := ParseBatch(out.Data, int(md.GetNumMessagesInBatch()))
	if err != nil {
		t.Fatalf("the MESSAGE batch does not parse: %v", err)
	}
	return req, got, md, nil
}

// TestSendRoundTrip: what a producer sends is what a consumer gets, for
// single messages, batches and every codec.
func TestSendRoundTrip(t *testing.T) {
	for _, ct := range []pb.CompressionType{pb.CompressionType_NONE, pb.CompressionType_LZ4, pb.CompressionType_ZLIB, pb.CompressionType_ZSTD, pb.CompressionType_SNAPPY} {
		for _, store := range []bool{false, true} {
			c := testConn(t, store)
			data, want := buildBatch(t, 5, 40)
			md := testMetadata(10)
			md.NumMessagesInBatch = proto.Int32(5)
			md.UncompressedSize = proto.Uint32(uint32(len(data)))
			md.Compression = ct.Enum()
			comp, err := c.s.codec.Compress(nil, ct, data)
			if err != nil {
				t.Fatal(err)
			}
			section := payloadSection(t, md, comp)
			req, got, outMD, err := roundTrip(t, c, &pb.CommandSend{ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(10), NumMessages: proto.Int32(5)}, section)
			if err != nil {
				t.Fatalf("%v: %v", ct, err)
			}
			// The per-message sequence ids of buildBatch are 0..4, below the
			// SEND's: the range never goes below the SEND's own id.
			if req.Envelope.SequenceFirst != 10 || req.Envelope.SequenceLast != 10 {
				t.Fatalf("%v: sequence range %d..%d", ct, req.Envelope.SequenceFirst, req.Envelope.SequenceLast)
			}
			if len(got) != 5 || outMD.GetProducerName() != "fuzz-producer" {
				t.Fatalf("%v: %d messages, producer %q", ct, len(got), outMD.GetProducerName())
			}
			for i, m := range got {
				w := want[i]
				if !bytes.Equal(m.Payload, w.Payload) || m.Metadata.GetPartitionKey() != w.Metadata.GetPartitionKey() ||
					m.Metadata.GetEventTime() != w.Metadata.GetEventTime() || len(m.Metadata.GetProperties()) != 1 ||
					m.Metadata.GetProperties()[0].GetValue() != w.Metadata.GetProperties()[0].GetValue() ||
					m.Metadata.GetSequenceId() != uint64(10+i) || m.Metadata.GetPayloadSize() != int32(len(w.Payload)) {
					t.Fatalf("%v: message %d: %v %q, want %v %q", ct, i, m.Metadata, m.Payload, w.Metadata, w.Payload)
				}
			}
		}
	}
}

// TestDeliveredFieldsDoNotCarryOver: a delivered batch encodes every
// message's metadata in one reused value, so a field one message has must
// not reach the next that lacks it. Messages with a key, properties, an
// ordering key, an event time and a null value alternate with bare ones.
func TestDeliveredFieldsDoNotCarryOver(t *testing.T) {
	c := testConn(t, false)
	full := func() *pb.SingleMessageMetadata {
		return pb.SingleMessageMetadata_builder{
			PartitionKey: proto.String("k"),
			Properties:   []*pb.KeyValue{{Key: proto.String("p"), Value: proto.String("v")}},
			OrderingKey:  []byte("o"),
			EventTime:    proto.Uint64(1_600_000_000_000),
			NullValue:    proto.Bool(true),
		}.Build()
	}
	in := []*pb.SingleMessageMetadata{full(), {}, full(), {}}
	var data []byte
	for i, md := range in {
		var payload []byte
		if !md.GetNullValue() {
			payload = []byte(fmt.Sprint("value-", i))
		}
		var err error
		if data, err = AppendBatchMessage(data, md, payload); err != nil {
			t.Fatal(err)
		}
	}
	md := testMetadata(10)
	md.NumMessagesInBatch = proto.Int32(int32(len(in)))
	send := &pb.CommandSend{ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(10), NumMessages: proto.Int32(int32(len(in)))}
	_, got, _, err := roundTrip(t, c, send, payloadSection(t, md, data))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(in) {
		t.Fatalf("%d messages delivered, want %d", len(got), len(in))
	}
	for i, m := range got {
		o, w := m.Metadata, in[i]
		if o.HasPartitionKey() != w.HasPartitionKey() || len(o.GetProperties()) != len(w.GetProperties()) ||
			o.HasOrderingKey() != w.HasOrderingKey() || o.HasEventTime() != w.HasEventTime() ||
			o.GetNullValue() != w.GetNullValue() || o.GetSequenceId() != uint64(10+i) {
			t.Errorf("message %d delivered with %v, sent with %v", i, o, w)
		}
	}
}

func payloadSection(t testing.TB, md *pb.MessageMetadata, data []byte) []byte {
	t.Helper()
	frame, err := AppendPayloadCommand(nil, sendCommand(1, md.GetSequenceId(), 1), nil, md, data)
	if err != nil {
		t.Fatal(err)
	}
	f, err := SplitFrame(frame[4:])
	if err != nil {
		t.Fatal(err)
	}
	return f.Payload
}

// FuzzSendToMessage feeds arbitrary metadata and payloads through the SEND
// conversion: it either refuses them with a NotAllowed-class error or makes
// an entry that stores, decodes and goes back out as a MESSAGE carrying the
// same number of messages.
func FuzzSendToMessage(f *testing.F) {
	seed := func(md *pb.MessageMetadata, data []byte, chunk bool) {
		b, err := proto.Marshal(md)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, data, chunk, uint64(md.GetSequenceId()))
	}
	data, _ := buildBatch(f, 3, 8)
	md := testMetadata(1)
	seed(md, []byte("single"), false)
	md.NumMessagesInBatch = proto.Int32(3)
	seed(md, data, false)
	md.NumMessagesInBatch = proto.Int32(4) // more than present
	seed(md, data, false)
	md.NumMessagesInBatch = proto.Int32(1)
	md.Compression = pb.CompressionType_LZ4.Enum()
	md.UncompressedSize = proto.Uint32(100)
	seed(md, []byte{0x10, 'x'}, false)
	chunk := testMetadata(2)
	chunk.Uuid = proto.String("p-2")
	chunk.ChunkId = proto.Int32(0)
	chunk.NumChunksFromMsg = proto.Int32(2)
	chunk.TotalChunkMsgSize = proto.Int32(10)
	seed(chunk, []byte("chunk"), true)
	marker := testMetadata(3)
	marker.MarkerType = proto.Int32(10)
	seed(marker, nil, false)
	deliver := testMetadata(4)
	deliver.DeliverAtTime = proto.Int64(1)
	deliver.OrderingKey = []byte("ok")
	deliver.NullValue = proto.Bool(true)
	seed(deliver, nil, false)
	f.Add([]byte{}, []byte{}, false, uint64(0))
	f.Add([]byte{0xff, 0xff}, []byte{1, 2, 3}, true, uint64(1<<63))

	c := testConn(f, true)
	f.Fuzz(func(t *testing.T, mdBytes, data []byte, chunk bool, seq uint64) {
		section := rawSection(mdBytes, data)
		send := &pb.CommandSend{ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(seq), IsChunk: proto.Bool(chunk)}
		req, got, _, err := roundTrip(t, c, send, section)
		if err != nil {
			if !errors.Is(err, errNotAllowed) && !errors.Is(err, ErrPayload) {
				t.Fatalf("a SEND was refused with an error of the wrong class: %v", err)
			}
			return
		}
		h, _ := protocols.ParseBatchHeader(req.Batch)
		if len(got) != int(h.NumRecords) {
			t.Fatalf("%d records stored, %d messages delivered", h.NumRecords, len(got))
		}
	})
}

// rawSection builds a checksummed payload section around arbitrary
// metadata bytes.
func rawSection(md, data []byte) []byte {
	inner := make([]byte, 4, 4+len(md)+len(data))
	inner[0], inner[1], inner[2], inner[3] = byte(len(md)>>24), byte(len(md)>>16), byte(len(md)>>8), byte(len(md))
	inner = append(append(inner, md...), data...)
	out := []byte{0x0e, 0x01, 0, 0, 0, 0}
	sum := Checksum(inner)
	out[2], out[3], out[4], out[5] = byte(sum>>24), byte(sum>>16), byte(sum>>8), byte(sum)
	return append(out, inner...)
}
