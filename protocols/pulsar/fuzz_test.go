package pulsar

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/ternmq/tern/protocols/pulsar/pb"
)

// Every decoder has a fuzz target; the seeds below run in every go test.
// Run one for real with, for example:
//
//	go test ./protocols/pulsar -run NONE -fuzz FuzzReadFrame -fuzztime 60s

// fuzzMaxFrame keeps fuzzed frames small so that the allocation bound is
// checked against a limit the fuzzer can easily exceed.
const fuzzMaxFrame = 64 << 10

// frameSeeds returns well-formed frames of several kinds and broken
// variants of them.
func frameSeeds(t testing.TB) [][]byte {
	ping := unhex(t, goldenPing)
	connect := unhex(t, goldenConnect)
	send, _ := AppendPayloadCommand(nil, sendCommand(1, 2, 1), nil, testMetadata(2), []byte("payload"))
	batch, _ := buildBatch(t, 3, 5)
	md := testMetadata(3)
	md.NumMessagesInBatch = proto.Int32(3)
	md.Compression = pb.CompressionType_LZ4.Enum()
	md.UncompressedSize = proto.Uint32(uint32(len(batch)))
	c, _ := NewCodec(DefaultCodecConfig())
	defer c.Close()
	compressed, _ := c.Compress(nil, pb.CompressionType_LZ4, batch)
	msg, _ := AppendPayloadCommand(nil, messageCommand(1, 2, 3), NewBrokerEntryMetadata(4, 5), md, compressed)

	badCRC := bytes.Clone(send)
	badCRC[len(badCRC)-1] ^= 1
	badMagic := bytes.Clone(send)
	cmdLen := int(send[7]) // command sizes here are below 256
	badMagic[8+cmdLen] = 0x0f
	seeds := [][]byte{
		ping, connect, send, msg, badCRC, badMagic,
		append(bytes.Clone(ping), connect...),
		ping[:3], ping[:8], connect[:20], send[:len(send)-3], msg[:40],
		u32(0), u32(5), u32(0xffffffff), u32(fuzzMaxFrame + 1),
		append(u32(6), u32(0)...), append(u32(6), u32(0xffffffff)...),
		frameOf(u32(2), []byte{0x08, 0x06}),
		frameOf(u32(2), []byte{0x08, 99}),
		{},
	}
	return seeds
}

func FuzzReadFrame(f *testing.F) {
	for _, s := range frameSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fr := NewFrameReader(bytes.NewReader(data), fuzzMaxFrame)
		var cmd pb.BaseCommand
		for {
			p, err := fr.ReadCommand(&cmd)
			if cap(fr.buf) > fuzzMaxFrame {
				t.Fatalf("reader buffer grew to %d bytes, limit %d", cap(fr.buf), fuzzMaxFrame)
			}
			if err == io.EOF || errors.Is(err, ErrFrame) {
				return
			}
			if err != nil {
				// The stream stays in sync after command and payload errors.
				if !errors.Is(err, ErrCommand) && !errors.Is(err, ErrPayload) &&
					!errors.Is(err, ErrChecksum) && !errors.Is(err, ErrUnsupportedCommand) {
					t.Fatalf("error outside the documented classes: %v", err)
				}
				continue
			}
			checkReencode(t, &cmd, p)
		}
	})
}

// checkReencode encodes a decoded command again and requires it to decode to
// the same thing.
func checkReencode(t *testing.T, cmd *pb.BaseCommand, p Payload) {
	var out []byte
	var err error
	if HasPayload(cmd.GetType()) {
		out, err = AppendChecksummedPayloadCommand(nil, cmd, nil, p.Checksummed)
	} else {
		out, err = AppendCommand(nil, cmd)
	}
	if err != nil {
		t.Fatalf("cannot re-encode a decoded %s: %v", cmd.GetType(), err)
	}
	var again pb.BaseCommand
	q, err := NewFrameReader(bytes.NewReader(out), len(out)).ReadCommand(&again)
	if err != nil {
		t.Fatalf("cannot decode a re-encoded %s: %v", cmd.GetType(), err)
	}
	if !proto.Equal(&again, cmd) || !bytes.Equal(q.Checksummed, p.Checksummed) {
		t.Fatalf("re-encoding changed %s", cmd.GetType())
	}
}

func FuzzDecodeCommand(f *testing.F) {
	for _, s := range frameSeeds(f) {
		if fr, err := SplitFrame(s[min(4, len(s)):]); err == nil {
			f.Add(fr.Command)
		}
	}
	for _, body := range allCommandBodies() {
		b, _ := proto.Marshal(NewCommand(body))
		f.Add(b)
	}
	f.Add([]byte{0x08, 18})
	f.Add([]byte{0x08, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		var cmd pb.BaseCommand
		if err := DecodeCommand(data, &cmd); err != nil {
			if !errors.Is(err, ErrCommand) && !errors.Is(err, ErrUnsupportedCommand) {
				t.Fatalf("error outside the documented classes: %v", err)
			}
			return
		}
		if CommandBody(&cmd) == nil {
			t.Fatalf("%s accepted without a body", cmd.GetType())
		}
		b, err := proto.Marshal(&cmd)
		if err != nil {
			t.Fatalf("cannot re-encode %s: %v", cmd.GetType(), err)
		}
		var again pb.BaseCommand
		if err := DecodeCommand(b, &again); err != nil || !proto.Equal(&again, &cmd) {
			t.Fatalf("re-encoding changed %s: %v", cmd.GetType(), err)
		}
	})
}

func FuzzParsePayload(f *testing.F) {
	for _, s := range frameSeeds(f) {
		if fr, err := SplitFrame(s[min(4, len(s)):]); err == nil && fr.Payload != nil {
			f.Add(fr.Payload)
			f.Add(fr.Payload[:len(fr.Payload)/2])
		}
	}
	f.Add([]byte{0x0e, 0x02, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0x0e, 0x01, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0x0e, 0x01, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePayload(data)
		if err != nil {
			if !errors.Is(err, ErrPayload) && !errors.Is(err, ErrChecksum) {
				t.Fatalf("error outside the documented classes: %v", err)
			}
			// After a checksum error the parts are still split; decode
			// them anyway so that the fuzzer reaches the metadata decoder
			// without having to forge a CRC.
			if !errors.Is(err, ErrChecksum) {
				return
			}
		}
		if !bytes.HasSuffix(data, p.Checksummed) || !bytes.HasSuffix(p.Checksummed, p.Data) ||
			len(p.Checksummed) != 10+len(p.Metadata)+len(p.Data) {
			t.Fatal("payload parts do not tile the section")
		}
		var md pb.MessageMetadata
		if err := p.DecodeMetadata(&md); err != nil {
			if !errors.Is(err, ErrPayload) {
				t.Fatalf("metadata error outside ErrPayload: %v", err)
			}
		}
		var bem pb.BrokerEntryMetadata
		if _, err := p.DecodeBrokerEntryMetadata(&bem); err != nil && !errors.Is(err, ErrPayload) {
			t.Fatalf("broker entry metadata error outside ErrPayload: %v", err)
		}
	})
}

func FuzzDecodeMessageMetadata(f *testing.F) {
	for _, seq := range []uint64{0, 1, 1 << 60} {
		md := testMetadata(seq)
		b, _ := proto.Marshal(md)
		f.Add(b)
		md.NumMessagesInBatch = proto.Int32(100)
		md.Compression = pb.CompressionType_ZSTD.Enum()
		md.UncompressedSize = proto.Uint32(1 << 20)
		md.ReplicateTo = []string{"a", "b"}
		md.EncryptionKeys = []*pb.EncryptionKeys{{Key: proto.String("k"), Value: []byte{1}}}
		b, _ = proto.Marshal(md)
		f.Add(b)
		f.Add(b[:len(b)-1])
	}
	f.Add([]byte{})
	f.Add([]byte{0x40, 0x07})
	f.Fuzz(func(t *testing.T, data []byte) {
		var md pb.MessageMetadata
		if err := DecodeMessageMetadata(data, &md); err != nil {
			if !errors.Is(err, ErrPayload) {
				t.Fatalf("error outside ErrPayload: %v", err)
			}
			return
		}
		b, err := proto.Marshal(&md)
		if err != nil {
			t.Fatalf("cannot re-encode: %v", err)
		}
		var again pb.MessageMetadata
		if err := DecodeMessageMetadata(b, &again); err != nil || !proto.Equal(&again, &md) {
			t.Fatalf("re-encoding changed the metadata: %v", err)
		}
	})
}

func FuzzParseBatch(f *testing.F) {
	batch, _ := buildBatch(f, 3, 5)
	f.Add(batch, 3)
	f.Add(batch, 4)
	f.Add(batch, 2)
	f.Add(batch, -1)
	f.Add(batch[:len(batch)-2], 3)
	f.Add([]byte{}, 0)
	f.Add([]byte{0, 0, 0, 2, 0x18, 0x7f}, 1)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, 1)
	f.Add([]byte{0, 0, 0, 2, 0x18, 0x00}, 1<<30)
	f.Fuzz(func(t *testing.T, data []byte, count int) {
		msgs, err := ParseBatch(data, count)
		if err != nil {
			if !errors.Is(err, ErrBatch) {
				t.Fatalf("error outside ErrBatch: %v", err)
			}
			return
		}
		if len(msgs) != count {
			t.Fatalf("%d messages, %d announced", len(msgs), count)
		}
		var rebuilt []byte
		for _, m := range msgs {
			if int(m.Metadata.GetPayloadSize()) != len(m.Payload) {
				t.Fatal("payload_size disagrees with the payload")
			}
			if rebuilt, err = AppendBatchMessage(rebuilt, m.Metadata, m.Payload); err != nil {
				t.Fatal(err)
			}
		}
		again, err := ParseBatch(rebuilt, count)
		if err != nil || len(again) != count {
			t.Fatalf("rebuilt batch does not parse: %v", err)
		}
		for i := range again {
			if !proto.Equal(again[i].Metadata, msgs[i].Metadata) || !bytes.Equal(again[i].Payload, msgs[i].Payload) {
				t.Fatalf("message %d changed in the rebuild", i)
			}
		}
	})
}

// fuzzDecompress fuzzes one codec's decompressor with arbitrary input and
// announced sizes, and its compressor with the input as plain data.
func fuzzDecompress(f *testing.F, ct pb.CompressionType) {
	cfg := DefaultCodecConfig()
	cfg.MaxUncompressedSize = 1 << 20
	c, err := NewCodec(cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = c.Close() })
	for _, in := range [][]byte{{}, {1}, []byte("hello hello hello hello hello"), make([]byte, 5000)} {
		enc, _ := c.Compress(nil, ct, in)
		f.Add(enc, uint32(len(in)))
		f.Add(enc, uint32(len(in)+1))
		f.Add(enc[:len(enc)/2], uint32(len(in)))
		f.Add(enc, uint32(0))
		f.Add(enc, uint32(0xffffffff))
	}
	zeros := make([]byte, 2<<20)
	bomb, _ := c.Compress(nil, ct, zeros)
	f.Add(bomb, uint32(100))
	f.Add(bomb, uint32(len(zeros)))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f}, uint32(1000))
	f.Fuzz(func(t *testing.T, data []byte, size uint32) {
		out, err := c.Decompress(nil, ct, data, int(size))
		if err != nil {
			if !errors.Is(err, ErrCompression) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("error outside the documented classes: %v", err)
			}
		} else if len(out) != int(size) {
			t.Fatalf("decompressed to %d bytes, announced %d", len(out), size)
		}
		if len(data) > 64<<10 {
			return // keep the compression round trip cheap
		}
		enc, err := c.Compress(nil, ct, data)
		if err != nil {
			t.Fatal(err)
		}
		back, err := c.Decompress(nil, ct, enc, len(data))
		if err != nil || !bytes.Equal(back, data) {
			t.Fatalf("round trip of %d bytes: %v", len(data), err)
		}
	})
}

func FuzzDecompressLZ4(f *testing.F)    { fuzzDecompress(f, pb.CompressionType_LZ4) }
func FuzzDecompressZlib(f *testing.F)   { fuzzDecompress(f, pb.CompressionType_ZLIB) }
func FuzzDecompressZstd(f *testing.F)   { fuzzDecompress(f, pb.CompressionType_ZSTD) }
func FuzzDecompressSnappy(f *testing.F) { fuzzDecompress(f, pb.CompressionType_SNAPPY) }

func FuzzParseMessageID(f *testing.F) {
	for _, s := range []string{"CAAQAw==", "CAAQAw", "CAAQ", "", "====", "-_-_", "CAAQAw== ", "CP///////////wEQ////////////AQ==",
		"CLvvtDoQKhgDIAcoASgKMAo=", "EAM="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseMessageID(s)
		if err != nil {
			if !errors.Is(err, ErrMessageID) {
				t.Fatalf("error outside ErrMessageID: %v", err)
			}
			return
		}
		text, err := FormatMessageID(id)
		if err != nil {
			t.Fatalf("cannot format a parsed id: %v", err)
		}
		again, err := ParseMessageID(text)
		if err != nil || !proto.Equal(again, id) {
			t.Fatalf("%q -> %v -> %q -> %v (%v)", s, id, text, again, err)
		}
	})
}
