package pulsar

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/protocols/pulsar/pb"
)

// Run with: go test ./protocols/pulsar -run NONE -bench . -benchmem
//
// BenchmarkLimit* measure the unavoidable work on the same bytes (copying
// and checksumming them), as the ceiling the codec paths compare with.

// loopReader replays one frame forever, standing in for a connection.
type loopReader struct {
	b   []byte
	off int
}

func (r *loopReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m := copy(p[n:], r.b[r.off:])
		n += m
		r.off = (r.off + m) % len(r.b)
	}
	return n, nil
}

// benchRecords returns realistic message bodies: small JSON documents with
// repeated keys and varied values, compressible the way event data is.
func benchRecords(n, size int) [][]byte {
	rnd := rand.New(rand.NewPCG(7, 11))
	words := []string{"order", "created", "shipped", "customer", "eu-west", "us-east", "sku", "price", "quantity", "status"}
	out := make([][]byte, n)
	for i := range out {
		var b bytes.Buffer
		for b.Len() < size {
			fmt.Fprintf(&b, `{"id":%d,"type":"%s","region":"%s","amount":%d.%02d,"tag":"%x"},`,
				rnd.IntN(1<<30), words[rnd.IntN(len(words))], words[rnd.IntN(len(words))],
				rnd.IntN(10000), rnd.IntN(100), rnd.Uint32())
		}
		out[i] = b.Bytes()[:size]
	}
	return out
}

// sendBatchFrame returns a SEND frame carrying n messages of size bytes as
// one batch compressed with ct.
func sendBatchFrame(b testing.TB, c *Codec, ct pb.CompressionType, n, size int) []byte {
	return sendBatchFrameOf(b, c, ct, n, size, false)
}

// sendBatchFrameOf is sendBatchFrame; with bare, each message's metadata
// is what the Go client sends for a message with no key, properties or
// event time: its sequence id and payload size.
func sendBatchFrameOf(b testing.TB, c *Codec, ct pb.CompressionType, n, size int, bare bool) []byte {
	var batch []byte
	for i, rec := range benchRecords(n, size) {
		smm := pb.SingleMessageMetadata_builder{
			PartitionKey: proto.String(fmt.Sprintf("key-%d", i%10)),
			SequenceId:   proto.Uint64(uint64(i)),
			EventTime:    proto.Uint64(1_700_000_000_000),
			Properties:   []*pb.KeyValue{{Key: proto.String("source"), Value: proto.String("bench")}},
		}
		if bare {
			smm = pb.SingleMessageMetadata_builder{SequenceId: proto.Uint64(uint64(i))}
		}
		var err error
		batch, err = AppendBatchMessage(batch, smm.Build(), rec)
		if err != nil {
			b.Fatal(err)
		}
	}
	md := testMetadata(0)
	md.NumMessagesInBatch = proto.Int32(int32(n))
	md.Compression = ct.Enum()
	md.UncompressedSize = proto.Uint32(uint32(len(batch)))
	payload, err := c.Compress(nil, ct, batch)
	if err != nil {
		b.Fatal(err)
	}
	frame, err := AppendPayloadCommand(nil, sendCommand(1, 0, int32(n)), nil, md, payload)
	if err != nil {
		b.Fatal(err)
	}
	return frame
}

// BenchmarkDecodeSend reads a SEND frame of 100 x 1 KiB messages off a
// reader, verifies its checksum, decodes command and metadata, decompresses
// and walks every message with its metadata: the broker's receive path up
// to handing messages on. MB/s counts uncompressed message bytes. Its
// messages have a key, a property and an event time; in NONE-bare they
// have only what the Go client sends without those (as tern bench's do).
func BenchmarkDecodeSend(b *testing.B) {
	c := mustCodec(b)
	type variant struct {
		ct   pb.CompressionType
		bare bool
	}
	variants := []variant{{ct: pb.CompressionType_NONE}, {ct: pb.CompressionType_NONE, bare: true}}
	for _, ct := range []pb.CompressionType{pb.CompressionType_LZ4, pb.CompressionType_ZSTD,
		pb.CompressionType_SNAPPY, pb.CompressionType_ZLIB} {
		variants = append(variants, variant{ct: ct})
	}
	for _, v := range variants {
		name := v.ct.String()
		if v.bare {
			name += "-bare"
		}
		b.Run(name, func(b *testing.B) {
			frame := sendBatchFrameOf(b, c, v.ct, 100, 1024, v.bare)
			fr := NewFrameReader(&loopReader{b: frame}, DefaultMaxFrameSize)
			var cmd pb.BaseCommand
			var md pb.MessageMetadata
			var smm pb.SingleMessageMetadata
			var scratch []byte
			b.SetBytes(100 * 1024)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				p, err := fr.ReadCommand(&cmd)
				if err != nil {
					b.Fatal(err)
				}
				if err := p.DecodeMetadata(&md); err != nil {
					b.Fatal(err)
				}
				plain, err := c.DecompressPayload(scratch, &md, p.Data)
				if err != nil {
					b.Fatal(err)
				}
				if md.GetCompression() != pb.CompressionType_NONE {
					scratch = plain
				}
				r := NewBatchReader(plain, int(md.GetNumMessagesInBatch()))
				n := 0
				for {
					_, err := r.Next(&smm)
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					n++
				}
				if n != 100 {
					b.Fatal(n)
				}
			}
			b.ReportMetric(float64(len(frame)), "frame-bytes")
		})
	}
}

// BenchmarkReadSendFrame is the framing part alone: read, split, decode the
// command and verify the checksum of the 100 x 1 KiB SEND.
func BenchmarkReadSendFrame(b *testing.B) {
	c := mustCodec(b)
	frame := sendBatchFrame(b, c, pb.CompressionType_NONE, 100, 1024)
	fr := NewFrameReader(&loopReader{b: frame}, DefaultMaxFrameSize)
	var cmd pb.BaseCommand
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := fr.ReadCommand(&cmd); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLimitCopyAndChecksum is the floor for reading a frame: copy it
// once and CRC-32C it once.
func BenchmarkLimitCopyAndChecksum(b *testing.B) {
	c := mustCodec(b)
	frame := sendBatchFrame(b, c, pb.CompressionType_NONE, 100, 1024)
	dst := make([]byte, len(frame))
	b.SetBytes(int64(len(frame)))
	var sink uint32
	for b.Loop() {
		copy(dst, frame)
		sink += Checksum(dst)
	}
	_ = sink
}

// BenchmarkEncodeMessage encodes MESSAGE frames into a reused buffer, the
// broker's dispatch path.
func BenchmarkEncodeMessage(b *testing.B) {
	c := mustCodec(b)
	rec := benchRecords(1, 1024)[0]
	md := testMetadata(1)
	cmd := messageCommand(1, 7, 0)
	msgID := cmd.GetMessage().GetMessageId()
	bem := NewBrokerEntryMetadata(1_700_000_000_000, 0)

	// A stored section, as kept from the SEND.
	send, _ := AppendPayloadCommand(nil, sendCommand(1, 1, 1), nil, md, rec)
	sf, _ := SplitFrame(send[4:])
	stored := bytes.Clone(sf.Payload)

	b.Run("passthrough-1KiB", func(b *testing.B) {
		var buf []byte
		b.SetBytes(int64(len(rec)))
		b.ReportAllocs()
		i := uint64(0)
		for b.Loop() {
			i++
			msgID.EntryId = &i
			bem.Index = &i
			var err error
			if buf, err = AppendChecksummedPayloadCommand(buf[:0], cmd, bem, stored); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("marshal-1KiB", func(b *testing.B) {
		var buf []byte
		b.SetBytes(int64(len(rec)))
		b.ReportAllocs()
		for b.Loop() {
			var err error
			if buf, err = AppendPayloadCommand(buf[:0], cmd, bem, md, rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	recs := benchRecords(100, 1024)
	smms := make([]*pb.SingleMessageMetadata, len(recs))
	for i := range smms {
		smms[i] = pb.SingleMessageMetadata_builder{PartitionKey: proto.String("k"), SequenceId: proto.Uint64(uint64(i))}.Build()
	}
	bmd := testMetadata(1)
	bmd.NumMessagesInBatch = proto.Int32(100)
	b.Run("batch-100x1KiB", func(b *testing.B) {
		var buf []byte
		b.SetBytes(100 * 1024)
		b.ReportAllocs()
		for b.Loop() {
			var mark PayloadMark
			var err error
			if buf, mark, err = StartPayloadCommand(buf[:0], cmd, bem, bmd); err != nil {
				b.Fatal(err)
			}
			for i, r := range recs {
				if buf, err = AppendBatchMessage(buf, smms[i], r); err != nil {
					b.Fatal(err)
				}
			}
			if buf, err = FinishPayloadCommand(buf, mark); err != nil {
				b.Fatal(err)
			}
		}
	})
	batch, _ := buildBatch(b, 100, 1024)
	b.Run("batch-100x1KiB-lz4", func(b *testing.B) {
		lmd := proto.Clone(bmd).(*pb.MessageMetadata)
		lmd.Compression = pb.CompressionType_LZ4.Enum()
		lmd.UncompressedSize = proto.Uint32(uint32(len(batch)))
		var buf []byte
		b.SetBytes(int64(len(batch)))
		b.ReportAllocs()
		for b.Loop() {
			var mark PayloadMark
			var err error
			if buf, mark, err = StartPayloadCommand(buf[:0], cmd, bem, lmd); err != nil {
				b.Fatal(err)
			}
			if buf, err = c.Compress(buf, pb.CompressionType_LZ4, batch); err != nil {
				b.Fatal(err)
			}
			if buf, err = FinishPayloadCommand(buf, mark); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCompression runs each codec both ways on 1 MiB of event-like
// JSON, reporting the compressed size as a fraction of the input.
func BenchmarkCompression(b *testing.B) {
	c := mustCodec(b)
	in := bytes.Join(benchRecords(1024, 1024), nil)
	b.Run("limit-copy", func(b *testing.B) {
		out := make([]byte, len(in))
		b.SetBytes(int64(len(in)))
		for b.Loop() {
			copy(out, in)
		}
	})
	for _, ct := range allCodecs[1:] {
		enc, err := c.Compress(nil, ct, in)
		if err != nil {
			b.Fatal(err)
		}
		ratio := float64(len(enc)) / float64(len(in))
		b.Run("compress-"+ct.String(), func(b *testing.B) {
			var out []byte
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				if out, err = c.Compress(out[:0], ct, in); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(ratio, "ratio")
		})
		b.Run("decompress-"+ct.String(), func(b *testing.B) {
			var out []byte
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				if out, err = c.Decompress(out[:0], ct, enc, len(in)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppendMessage encodes one delivery of 100 1 KiB messages, as
// the dispatch path does for a batch a producer sent: the frame, its
// metadata and a SingleMessageMetadata per message.
func BenchmarkAppendMessage(b *testing.B) {
	const n = 100
	om := &outMessage{cs: &consumerState{id: 1, ledger: 7}, d: protocols.Delivery{
		Offset: 1000, EntryOffset: 1000, EntryCount: n,
		Envelope: protocols.Envelope{ProducerName: "bench", SequenceFirst: 5, AppendTime: 1_700_000_000_000},
	}}
	for i, r := range benchRecords(n, 1024) {
		om.d.Messages = append(om.d.Messages, protocols.Message{Timestamp: 1_700_000_000_000 + int64(i), Value: r})
		om.d.Extras = append(om.d.Extras, protocols.MessageExtras{})
	}
	c := &conn{}
	var buf []byte
	b.SetBytes(n * 1024)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = c.appendMessage(buf[:0], om); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/msg")
}
