package pulsar

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/ternmq/tern/protocols/pulsar/pb"
)

// unhex reads annotated hex: on each line, the leading run of hex tokens
// counts and the first other token starts a comment.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	var out []byte
	for _, line := range strings.Split(s, "\n") {
		for _, tok := range strings.Fields(line) {
			b, err := hex.DecodeString(tok)
			if err != nil {
				break
			}
			out = append(out, b...)
		}
	}
	return out
}

// The golden frames are worked out by hand from the protobuf encoding rules
// (tag = field<<3 | wire type, varints little-endian base 128), not produced
// by this package.
const goldenPing = `
	00000009   total size 9
	00000005   command size 5
	08 12      type (1, varint) = 18 PING
	9201 00    ping (18, length-delimited: tag 0x92 0x01), empty`

func TestGoldenPing(t *testing.T) {
	want := unhex(t, goldenPing)
	got, err := AppendCommand(nil, NewCommand(&pb.CommandPing{}))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("PING frame\n got % x\nwant % x", got, want)
	}
	var cmd pb.BaseCommand
	if _, err := NewFrameReader(bytes.NewReader(want), DefaultMaxFrameSize).ReadCommand(&cmd); err != nil {
		t.Fatal(err)
	}
	if cmd.GetType() != pb.BaseCommand_PING || cmd.Ping == nil {
		t.Fatalf("decoded %v", &cmd)
	}
}

// goldenConnect is the CONNECT frame pulsar-client-go v0.19.0 sends without
// authentication: client_version, protocol_version 20, an empty
// auth_method_name (the disabled provider's name) and feature flags for auth
// refresh and broker entry metadata, in field-number order.
const goldenConnect = `
	00000025   total size 37
	00000021   command size 33
	08 02      type (1) = 2 CONNECT
	12 1d      connect (2), 29 bytes
	0a 11 50756c7361722d476f2d76302e31392e30   client_version (1) "Pulsar-Go-v0.19.0"
	20 14      protocol_version (4) = 20
	2a 00      auth_method_name (5) = ""
	52 04      feature_flags (10), 4 bytes
	08 01      supports_auth_refresh (1) = true
	10 01      supports_broker_entry_metadata (2) = true`

func goClientConnect() *pb.CommandConnect {
	return &pb.CommandConnect{
		ClientVersion:   proto.String("Pulsar-Go-v0.19.0"),
		ProtocolVersion: proto.Int32(20),
		AuthMethodName:  proto.String(""),
		FeatureFlags: &pb.FeatureFlags{
			SupportsAuthRefresh:         proto.Bool(true),
			SupportsBrokerEntryMetadata: proto.Bool(true),
		},
	}
}

// connectFrameFor lays out goldenConnect by hand for another client
// version string (shorter than 128 bytes, so every length is one byte).
func connectFrameFor(version string) []byte {
	body := append([]byte{0x0a, byte(len(version))}, version...)
	body = append(body, 0x20, 0x14, 0x2a, 0x00, 0x52, 0x04, 0x08, 0x01, 0x10, 0x01)
	cmd := append([]byte{0x08, 0x02, 0x12, byte(len(body))}, body...)
	return append(append(u32(uint32(4+len(cmd))), u32(uint32(len(cmd)))...), cmd...)
}

func TestGoldenConnect(t *testing.T) {
	want := unhex(t, goldenConnect)
	if !bytes.Equal(connectFrameFor("Pulsar-Go-v0.19.0"), want) {
		t.Fatal("connectFrameFor disagrees with the golden frame")
	}
	got, err := AppendCommand(nil, NewCommand(goClientConnect()))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("CONNECT frame\n got % x\nwant % x", got, want)
	}
	var cmd pb.BaseCommand
	if _, err := NewFrameReader(bytes.NewReader(want), DefaultMaxFrameSize).ReadCommand(&cmd); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(cmd.GetConnect(), goClientConnect()) {
		t.Fatalf("decoded %v", cmd.GetConnect())
	}
}

// TestEveryCommandRoundTrip encodes a fully populated body of every command
// this package defines and reads it back through a FrameReader.
func TestEveryCommandRoundTrip(t *testing.T) {
	bodies := allCommandBodies()
	if len(bodies) < 45 {
		t.Fatalf("only %d command bodies; BaseCommand lost fields", len(bodies))
	}
	var stream []byte
	var want []*pb.BaseCommand
	md := testMetadata(7)
	for _, body := range bodies {
		cmd := NewCommand(body)
		var err error
		if HasPayload(cmd.GetType()) {
			stream, err = AppendPayloadCommand(stream, cmd, nil, md, []byte("payload of "+cmd.GetType().String()))
		} else {
			stream, err = AppendCommand(stream, cmd)
		}
		if err != nil {
			t.Fatalf("%s: %v", cmd.GetType(), err)
		}
		want = append(want, cmd)
	}
	fr := NewFrameReader(bytes.NewReader(stream), DefaultMaxFrameSize)
	var got pb.BaseCommand
	var gotMD pb.MessageMetadata
	for _, w := range want {
		p, err := fr.ReadCommand(&got)
		if err != nil {
			t.Fatalf("%s: %v", w.GetType(), err)
		}
		if !proto.Equal(&got, w) {
			t.Fatalf("%s: round trip changed the command\n got %v\nwant %v", w.GetType(), &got, w)
		}
		if CommandBody(&got) == nil || !proto.Equal(CommandBody(&got), CommandBody(w)) {
			t.Fatalf("%s: CommandBody disagrees", w.GetType())
		}
		if HasPayload(w.GetType()) {
			if err := p.DecodeMetadata(&gotMD); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(&gotMD, md) || string(p.Data) != "payload of "+w.GetType().String() {
				t.Fatalf("%s: payload changed: %v %q", w.GetType(), &gotMD, p.Data)
			}
		} else if !p.IsZero() {
			t.Fatalf("%s: unexpected payload", w.GetType())
		}
	}
	if _, err := fr.ReadFrame(); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

func TestNewCommandRejectsNonCommands(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("NewCommand accepted a MessageMetadata")
		}
	}()
	NewCommand(&pb.MessageMetadata{})
}

func frameOf(b ...[]byte) []byte {
	body := bytes.Join(b, nil)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

func TestFrameSizeLimits(t *testing.T) {
	ping, _ := AppendCommand(nil, NewCommand(&pb.CommandPing{}))
	cases := []struct {
		name    string
		in      []byte
		max     int
		tooBig  bool
		wantErr error
	}{
		{"huge prefix", u32(0xffffffff), DefaultMaxFrameSize, true, ErrTooLarge},
		{"one over", append(u32(DefaultMaxFrameSize+1), make([]byte, 16)...), DefaultMaxFrameSize, true, ErrTooLarge},
		{"over small limit", ping, 8, true, ErrTooLarge},
		{"zero", u32(0), DefaultMaxFrameSize, false, ErrFrame},
		{"five", append(u32(5), 0, 0, 0, 1, 8), DefaultMaxFrameSize, false, ErrFrame},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fr := NewFrameReader(bytes.NewReader(c.in), c.max)
			_, err := fr.ReadFrame()
			var fse *FrameSizeError
			if !errors.As(err, &fse) || !errors.Is(err, c.wantErr) || !errors.Is(err, ErrFrame) {
				t.Fatalf("err = %v, want a *FrameSizeError matching %v", err, c.wantErr)
			}
			if errors.Is(err, ErrTooLarge) != c.tooBig {
				t.Fatalf("ErrTooLarge match = %v", !c.tooBig)
			}
			if cap(fr.buf) != 0 {
				t.Fatalf("reader reserved %d bytes for a rejected frame", cap(fr.buf))
			}
		})
	}
	// Exactly at the limit is fine.
	fr := NewFrameReader(bytes.NewReader(ping), len(ping)-4)
	if _, err := fr.ReadFrame(); err != nil {
		t.Fatalf("frame at the limit: %v", err)
	}
}

func TestFrameStructureErrors(t *testing.T) {
	cmd := unhex(t, "0812920100") // PING
	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"command size past frame", frameOf(u32(6), cmd), ErrFrame},
		{"command size huge", frameOf(u32(0xfffffff0), cmd), ErrFrame},
		{"command size zero", frameOf(u32(0), cmd), ErrFrame},
		{"command size one", frameOf(u32(1), cmd), ErrFrame},
		{"cut in size", []byte{0, 0}, ErrFrame},
		{"cut in body", append(u32(20), 0, 0, 0, 5), ErrFrame},
		{"garbage command", frameOf(u32(4), []byte{0xff, 0xff, 0xff, 0xff}), ErrCommand},
		{"no type", frameOf(u32(3), []byte{0x92, 0x01, 0x00}), ErrCommand},
		{"cut protobuf", frameOf(u32(2), []byte{0x92, 0x01}), ErrCommand},
		{"type without body", frameOf(u32(2), []byte{0x08, 0x06}), ErrCommand},
		{"missing required field", frameOf(u32(6), []byte{0x08, 0x0b, 0x5a, 0x02, 0x08, 0x01}), ErrCommand},
		{"payload on a simple command", frameOf(u32(5), cmd, []byte{1, 2, 3}), ErrCommand},
		{"send without payload", frameOf(mustCmd(t, sendCommand(1, 2, 1))), ErrPayload},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got pb.BaseCommand
			_, err := NewFrameReader(bytes.NewReader(c.in), DefaultMaxFrameSize).ReadCommand(&got)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if errors.Is(err, ErrChecksum) {
				t.Fatal("structural error reported as a checksum error")
			}
			t.Log(err)
		})
	}
	// A cut-off frame also says io.ErrUnexpectedEOF.
	_, err := NewFrameReader(bytes.NewReader(append(u32(20), 0, 0, 0, 5)), 100).ReadFrame()
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("cut frame: %v", err)
	}
}

// mustCmd returns [cmdSize][cmd] for cmd.
func mustCmd(t testing.TB, cmd *pb.BaseCommand) []byte {
	b, err := proto.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return append(u32(uint32(len(b))), b...)
}

func TestUnsupportedCommands(t *testing.T) {
	// CONSUMER_STATS (25) has a type number but no body in this package;
	// 99 is not a type at all.
	for _, typ := range []int32{1, 25, 27, 64, 68, 99, -5} {
		b := protowire.AppendTag(nil, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(typ))
		if typ > 0 {
			b = protowire.AppendTag(b, protowire.Number(typ), protowire.BytesType)
			b = protowire.AppendBytes(b, []byte{0x08, 0x01})
		}
		var cmd pb.BaseCommand
		err := DecodeCommand(b, &cmd)
		var uce *UnsupportedCommandError
		if !errors.As(err, &uce) || uce.Type != typ || !errors.Is(err, ErrUnsupportedCommand) {
			t.Fatalf("type %d: err = %v", typ, err)
		}
		t.Log(err)
	}
}

func TestPingWithoutBody(t *testing.T) {
	// Type alone, no empty ping field: still a PING.
	var cmd pb.BaseCommand
	if err := DecodeCommand([]byte{0x08, 18}, &cmd); err != nil {
		t.Fatal(err)
	}
	if cmd.GetPing() == nil {
		t.Fatal("PING without body not normalised")
	}
}

func TestEncodeErrors(t *testing.T) {
	// A required field unset is the caller's bug and must not reach the wire.
	bad := NewCommand(&pb.CommandFlow{ConsumerId: proto.Uint64(1)})
	dst := []byte("keep")
	out, err := AppendCommand(dst, bad)
	if !errors.Is(err, ErrEncode) || string(out) != "keep" {
		t.Fatalf("AppendCommand with a missing field: %v, %q", err, out)
	}
	if _, err := AppendCommand(nil, sendCommand(1, 1, 1)); !errors.Is(err, ErrEncode) {
		t.Fatalf("SEND through AppendCommand: %v", err)
	}
	if _, err := AppendPayloadCommand(nil, NewCommand(&pb.CommandPing{}), nil, testMetadata(1), nil); !errors.Is(err, ErrEncode) {
		t.Fatalf("PING with a payload: %v", err)
	}
	out, err = AppendPayloadCommand(dst, sendCommand(1, 1, 1), nil, &pb.MessageMetadata{}, nil)
	if !errors.Is(err, ErrEncode) || string(out) != "keep" {
		t.Fatalf("metadata without required fields: %v, %q", err, out)
	}
	if _, err := AppendChecksummedPayloadCommand(nil, sendCommand(1, 1, 1), nil, []byte{0x0e, 0x02, 0, 0, 0, 0, 0, 0, 0, 0}); !errors.Is(err, ErrEncode) {
		t.Fatalf("section without checksum magic: %v", err)
	}
	if _, err := AppendRawPayloadCommand(nil, sendCommand(1, 1, 1), nil, []byte{0, 0, 0, 9, 1}); !errors.Is(err, ErrEncode) {
		t.Fatalf("raw section with a bad metadata size: %v", err)
	}
	if _, err := FinishPayloadCommand([]byte{1, 2, 3}, PayloadMark{}); !errors.Is(err, ErrEncode) {
		t.Fatalf("finish with a zero mark: %v", err)
	}
}

// TestReaderBuffers checks that small frames come straight from the bufio
// buffer, mid-size frames reuse one buffer and big frames are not retained.
func TestReaderBuffers(t *testing.T) {
	var stream []byte
	sizes := []int{10, 100 << 10, 50 << 10, 2 << 20, 10}
	for i, n := range sizes {
		var err error
		stream, err = AppendPayloadCommand(stream, sendCommand(1, uint64(i), 1), nil, testMetadata(uint64(i)),
			bytes.Repeat([]byte{byte(i)}, n))
		if err != nil {
			t.Fatal(err)
		}
	}
	fr := NewFrameReader(bufio.NewReaderSize(bytes.NewReader(stream), 4096), 4<<20)
	var cmd pb.BaseCommand
	for i, n := range sizes {
		p, err := fr.ReadCommand(&cmd)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Data) != n || cmd.GetSend().GetSequenceId() != uint64(i) {
			t.Fatalf("frame %d: %d bytes, seq %d", i, len(p.Data), cmd.GetSend().GetSequenceId())
		}
		if c := cap(fr.buf); c > frameBufferRetain {
			t.Fatalf("frame %d: reader retains %d bytes", i, c)
		}
	}
	if cap(fr.buf) < 100<<10 {
		t.Fatalf("mid-size buffer not retained: cap %d", cap(fr.buf))
	}
}

func TestSetMaxFrameSize(t *testing.T) {
	ping, _ := AppendCommand(nil, NewCommand(&pb.CommandPing{}))
	fr := NewFrameReader(bytes.NewReader(append(append([]byte{}, ping...), ping...)), 100)
	if _, err := fr.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	fr.SetMaxFrameSize(6)
	if _, err := fr.ReadFrame(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("after lowering the limit: %v", err)
	}
}
