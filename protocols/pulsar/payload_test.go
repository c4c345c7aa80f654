package pulsar

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/ternmq/tern/protocols/pulsar/pb"
)

// TestChecksumIsCastagnoli pins the polynomial with the standard check value
// of CRC-32C: "123456789" hashes to 0xe3069283.
func TestChecksumIsCastagnoli(t *testing.T) {
	if got := Checksum([]byte("123456789")); got != 0xe3069283 {
		t.Fatalf("Checksum = 0x%08x, want 0xe3069283", got)
	}
	if Checksum([]byte("123456789")) == crc32.ChecksumIEEE([]byte("123456789")) {
		t.Fatal("checksum is IEEE, not Castagnoli")
	}
}

// TestPayloadLayout checks the byte layout of a SEND frame field by field.
func TestPayloadLayout(t *testing.T) {
	md := testMetadata(3)
	payload := []byte("hello")
	frame, err := AppendPayloadCommand(nil, sendCommand(4, 3, 1), nil, md, payload)
	if err != nil {
		t.Fatal(err)
	}
	cmdBytes, _ := proto.Marshal(sendCommand(4, 3, 1))
	mdBytes, _ := proto.Marshal(md)
	var want []byte
	want = binary.BigEndian.AppendUint32(want, uint32(4+len(cmdBytes)+2+4+4+len(mdBytes)+len(payload)))
	want = binary.BigEndian.AppendUint32(want, uint32(len(cmdBytes)))
	want = append(want, cmdBytes...)
	want = append(want, 0x0e, 0x01)
	covered := binary.BigEndian.AppendUint32(nil, uint32(len(mdBytes)))
	covered = append(append(covered, mdBytes...), payload...)
	want = binary.BigEndian.AppendUint32(want, crc32.Checksum(covered, crc32.MakeTable(crc32.Castagnoli)))
	want = append(want, covered...)
	if !bytes.Equal(frame, want) {
		t.Fatalf("SEND frame\n got % x\nwant % x", frame, want)
	}
}

func TestChecksumMismatch(t *testing.T) {
	frame, err := AppendPayloadCommand(nil, sendCommand(9, 42, 1), nil, testMetadata(42), []byte("some payload"))
	if err != nil {
		t.Fatal(err)
	}
	// Flip one bit in every position the checksum covers, and in the
	// checksum itself; each must be caught as a checksum error, with the
	// command still decoded.
	cmdLen := int(binary.BigEndian.Uint32(frame[4:]))
	crcAt := 8 + cmdLen + 2
	for i := crcAt; i < len(frame); i++ {
		bad := bytes.Clone(frame)
		bad[i] ^= 0x10
		var cmd pb.BaseCommand
		p, err := NewFrameReader(bytes.NewReader(bad), DefaultMaxFrameSize).ReadCommand(&cmd)
		if i >= crcAt+4 && i < crcAt+8 {
			// The metadata size: either the checksum or the structure
			// catches it.
			if err == nil {
				t.Fatalf("byte %d: corrupt metadata size accepted", i)
			}
			continue
		}
		var ce *ChecksumError
		if !errors.As(err, &ce) || !errors.Is(err, ErrChecksum) {
			t.Fatalf("byte %d: err = %v, want *ChecksumError", i, err)
		}
		if errors.Is(err, ErrFrame) || errors.Is(err, ErrPayload) {
			t.Fatalf("byte %d: checksum error also matches a structural class", i)
		}
		if cmd.GetSend().GetSequenceId() != 42 || cmd.GetSend().GetProducerId() != 9 {
			t.Fatalf("byte %d: command not decoded alongside the checksum error", i)
		}
		if ce.Want == ce.Got || p.Checksum != ce.Want {
			t.Fatalf("byte %d: %+v, payload checksum 0x%x", i, ce, p.Checksum)
		}
	}
}

func TestPayloadStructureErrors(t *testing.T) {
	good, _ := AppendPayloadCommand(nil, sendCommand(1, 1, 1), nil, testMetadata(1), []byte("x"))
	f, err := SplitFrame(good[4:])
	if err != nil {
		t.Fatal(err)
	}
	section := f.Payload
	cases := []struct {
		name string
		in   []byte
	}{
		{"empty", []byte{}},
		{"magic only", []byte{0x0e, 0x01}},
		{"short header", section[:9]},
		{"wrong magic", append([]byte{0x0e, 0x03}, section[2:]...)},
		{"no magic (old protocol)", section[6:]},
		{"metadata size past end", append(append(bytes.Clone(section[:6]), 0, 0, 1, 0), section[10:]...)},
		{"broker entry cut", []byte{0x0e, 0x02, 0, 0}},
		{"broker entry past end", append([]byte{0x0e, 0x02, 0, 0, 0, 99}, section...)},
		{"broker entry then nothing", []byte{0x0e, 0x02, 0, 0, 0, 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParsePayload(c.in)
			if !errors.Is(err, ErrPayload) || errors.Is(err, ErrChecksum) {
				t.Fatalf("err = %v, want ErrPayload only", err)
			}
			t.Log(err)
		})
	}
}

func TestMetadataChecks(t *testing.T) {
	var md pb.MessageMetadata
	// Required producer_name missing.
	b, _ := proto.MarshalOptions{AllowPartial: true}.Marshal(&pb.MessageMetadata{SequenceId: proto.Uint64(1), PublishTime: proto.Uint64(1)})
	if err := DecodeMessageMetadata(b, &md); !errors.Is(err, ErrPayload) {
		t.Fatalf("missing producer_name: %v", err)
	}
	// A compression number outside the enum.
	good, _ := proto.Marshal(testMetadata(1))
	withCodec := append(bytes.Clone(good), 0x40, 0x07) // field 8 varint = 7
	err := DecodeMessageMetadata(withCodec, &md)
	if !errors.Is(err, ErrPayload) {
		t.Fatalf("unknown compression: %v", err)
	}
	t.Log(err)
	negBatch := append(bytes.Clone(good), 0x58, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01) // field 11 = -1
	if err := DecodeMessageMetadata(negBatch, &md); !errors.Is(err, ErrPayload) {
		t.Fatalf("negative batch size: %v", err)
	}
	if err := DecodeMessageMetadata(good, &md); err != nil || IsBatch(&md) {
		t.Fatalf("good metadata: %v batch=%v", err, IsBatch(&md))
	}
}

// TestBrokerEntryMetadata sends a MESSAGE with the 0x0e02 prefix and reads
// it back, and checks that the prefix is outside the checksum.
func TestBrokerEntryMetadata(t *testing.T) {
	bem := NewBrokerEntryMetadata(1_700_000_000_123, 99)
	frame, err := AppendPayloadCommand(nil, messageCommand(5, 1, 2), bem, testMetadata(1), []byte("data"))
	if err != nil {
		t.Fatal(err)
	}
	var cmd pb.BaseCommand
	p, err := NewFrameReader(bytes.NewReader(frame), DefaultMaxFrameSize).ReadCommand(&cmd)
	if err != nil {
		t.Fatal(err)
	}
	var got pb.BrokerEntryMetadata
	ok, err := p.DecodeBrokerEntryMetadata(&got)
	if err != nil || !ok || !proto.Equal(&got, bem) {
		t.Fatalf("broker entry metadata %v ok=%v err=%v", &got, ok, err)
	}
	if string(p.Data) != "data" {
		t.Fatalf("data %q", p.Data)
	}
	// The same entry without the prefix has the same checksummed section.
	plain, _ := AppendPayloadCommand(nil, messageCommand(5, 1, 2), nil, testMetadata(1), []byte("data"))
	pf, _ := SplitFrame(plain[4:])
	pp, err := ParsePayload(pf.Payload)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(pp.Checksummed, p.Checksummed) {
		t.Fatal("broker entry metadata changed the checksummed section")
	}
	if ok, _ := pp.DecodeBrokerEntryMetadata(&got); ok {
		t.Fatal("prefix reported where there is none")
	}
}

// TestPassThrough stores the section of a SEND and sends it back in a
// MESSAGE without touching it, as a broker does on dispatch.
func TestPassThrough(t *testing.T) {
	send, _ := AppendPayloadCommand(nil, sendCommand(1, 10, 3), nil, testMetadata(10), []byte("stored bytes"))
	var cmd pb.BaseCommand
	p, err := NewFrameReader(bytes.NewReader(send), DefaultMaxFrameSize).ReadCommand(&cmd)
	if err != nil {
		t.Fatal(err)
	}
	stored := bytes.Clone(p.Checksummed)

	var out []byte
	for _, bem := range []*pb.BrokerEntryMetadata{nil, NewBrokerEntryMetadata(5, 6)} {
		out, err = AppendChecksummedPayloadCommand(out[:0], messageCommand(2, 7, 8), bem, stored)
		if err != nil {
			t.Fatal(err)
		}
		q, err := NewFrameReader(bytes.NewReader(out), DefaultMaxFrameSize).ReadCommand(&cmd)
		if err != nil {
			t.Fatal(err)
		}
		if cmd.GetMessage().GetMessageId().GetEntryId() != 8 || !bytes.Equal(q.Checksummed, stored) ||
			(bem != nil) != (q.BrokerEntryMetadata != nil) {
			t.Fatalf("pass-through changed the frame: %v", &cmd)
		}
	}
	// The raw form (no checksum header) gets one computed.
	raw := stored[6:]
	out, err = AppendRawPayloadCommand(nil, messageCommand(2, 7, 8), nil, raw)
	if err != nil {
		t.Fatal(err)
	}
	q, err := NewFrameReader(bytes.NewReader(out), DefaultMaxFrameSize).ReadCommand(&cmd)
	if err != nil || !bytes.Equal(q.Checksummed, stored) {
		t.Fatalf("raw payload: %v", err)
	}
}

// TestStartFinish builds a batch straight into the frame buffer.
func TestStartFinish(t *testing.T) {
	batch, want := buildBatch(t, 5, 33)
	md := testMetadata(1)
	md.NumMessagesInBatch = proto.Int32(5)
	md.UncompressedSize = proto.Uint32(uint32(len(batch)))
	buf := []byte("previous frame")
	buf, mark, err := StartPayloadCommand(buf, sendCommand(1, 1, 5), nil, md)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range want {
		if buf, err = AppendBatchMessage(buf, m.Metadata, m.Payload); err != nil {
			t.Fatal(err)
		}
	}
	if buf, err = FinishPayloadCommand(buf, mark); err != nil {
		t.Fatal(err)
	}
	one, _ := AppendPayloadCommand(nil, sendCommand(1, 1, 5), nil, md, batch)
	if !bytes.Equal(buf[len("previous frame"):], one) || string(buf[:14]) != "previous frame" {
		t.Fatal("Start/Finish and AppendPayloadCommand disagree")
	}
}

// TestCompressedBatchFrames sends a batch under every codec through a frame
// and back.
func TestCompressedBatchFrames(t *testing.T) {
	c := mustCodec(t)
	batch, want := buildBatch(t, 20, 200)
	for _, ct := range []pb.CompressionType{pb.CompressionType_NONE, pb.CompressionType_LZ4,
		pb.CompressionType_ZLIB, pb.CompressionType_ZSTD, pb.CompressionType_SNAPPY} {
		t.Run(ct.String(), func(t *testing.T) {
			md := testMetadata(1)
			md.NumMessagesInBatch = proto.Int32(int32(len(want)))
			md.Compression = ct.Enum()
			md.UncompressedSize = proto.Uint32(uint32(len(batch)))
			buf, mark, err := StartPayloadCommand(nil, sendCommand(1, 1, int32(len(want))), nil, md)
			if err != nil {
				t.Fatal(err)
			}
			if buf, err = c.Compress(buf, ct, batch); err != nil {
				t.Fatal(err)
			}
			if buf, err = FinishPayloadCommand(buf, mark); err != nil {
				t.Fatal(err)
			}

			var cmd pb.BaseCommand
			p, err := NewFrameReader(bytes.NewReader(buf), DefaultMaxFrameSize).ReadCommand(&cmd)
			if err != nil {
				t.Fatal(err)
			}
			var gotMD pb.MessageMetadata
			if err := p.DecodeMetadata(&gotMD); err != nil {
				t.Fatal(err)
			}
			if ct != pb.CompressionType_NONE && len(p.Data) >= len(batch) {
				t.Fatalf("%s did not compress: %d -> %d bytes", ct, len(batch), len(p.Data))
			}
			plain, err := c.DecompressPayload(nil, &gotMD, p.Data)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseBatch(plain, int(gotMD.GetNumMessagesInBatch()))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("%d messages, want %d", len(got), len(want))
			}
			for i := range want {
				if !proto.Equal(got[i].Metadata, want[i].Metadata) || !bytes.Equal(got[i].Payload, want[i].Payload) {
					t.Fatalf("message %d differs", i)
				}
			}
		})
	}
}

func TestPayloadIsZero(t *testing.T) {
	if !(Payload{}).IsZero() {
		t.Fatal("zero payload not zero")
	}
	frame, _ := AppendPayloadCommand(nil, sendCommand(1, 1, 1), nil, testMetadata(1), nil)
	var cmd pb.BaseCommand
	p, err := NewFrameReader(bytes.NewReader(frame), DefaultMaxFrameSize).ReadCommand(&cmd)
	if err != nil || p.IsZero() || len(p.Data) != 0 {
		t.Fatalf("empty payload: %v %v", err, p)
	}
}
