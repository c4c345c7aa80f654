package replicator

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"
)

func sampleFrames() []frame {
	return []frame{
		helloFrame{MinVersion: 1, MaxVersion: 3, Node: "node-a", Region: "us-east", MaxFrame: 4 << 20, Incarnation: math.MaxUint64, Features: 0},
		openFrame{Req: OpenRequest{Topic: "persistent://public/default/orders", Partition: 3, PartitionCount: 8, DestRegion: "eu", StartOffset: 1 << 40, Extra: []byte{1, 2, 3}}},
		openFrame{Req: OpenRequest{Topic: "t", Partition: 0, PartitionCount: 0, DestRegion: "eu", StartOffset: 0}},
		entriesFrame{Entries: []Entry{{Offset: 0, Count: 1, Value: []byte("a")}, {Offset: 1, Count: 5, Value: []byte{}}, {Offset: 100, Count: math.MaxInt32, Value: bytes.Repeat([]byte{7}, 300)}}, Bytes: 301},
		ackFrame{Next: math.MaxInt64},
		ackFrame{Next: 0},
		creditFrame{Credit: Credit{Bytes: 8 << 20, Entries: 16384}},
		errorFrame{Code: CodePartitionCountMismatch, Message: "topic has 8 partitions here, 4 there"},
		errorFrame{Code: math.MaxUint32, Message: ""},
		pingFrame{Nonce: 0},
		pongFrame{Nonce: math.MaxUint64},
	}
}

// canon normalises empty slices so frames compare with reflect.DeepEqual.
func canonFrame(f frame) frame {
	switch f := f.(type) {
	case openFrame:
		if len(f.Req.Extra) == 0 {
			f.Req.Extra = nil
		}
		return f
	case entriesFrame:
		es := make([]Entry, len(f.Entries))
		for i, e := range f.Entries {
			if len(e.Value) == 0 {
				e.Value = nil
			}
			es[i] = e
		}
		f.Entries = es
		return f
	}
	return f
}

func TestFrameRoundTrip(t *testing.T) {
	var stream []byte
	for _, f := range sampleFrames() {
		stream = appendFrame(stream, f)
	}
	fr := newFrameReader(bytes.NewReader(stream), 4<<20)
	total := 0
	for i, want := range sampleFrames() {
		got, n, err := fr.next()
		if err != nil {
			t.Fatalf("frame %d (%s): %v", i, want.frameType(), err)
		}
		total += n
		if !reflect.DeepEqual(canonFrame(got), canonFrame(want)) {
			t.Fatalf("frame %d: got %+v, want %+v", i, got, want)
		}
	}
	if _, _, err := fr.next(); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
	if total != len(stream) {
		t.Fatalf("reported %d wire bytes, stream has %d", total, len(stream))
	}
}

func TestAppendEntriesMatchesFrame(t *testing.T) {
	es := entriesOf(5, 10, 33)
	a := appendEntries(nil, es)
	b := appendFrame(nil, entriesFrame{Entries: es})
	if !bytes.Equal(a, b) {
		t.Fatal("appendEntries and appendFrame disagree")
	}
	size := entriesOverhead
	for _, e := range es {
		size += entryWireSize(e)
	}
	if len(a) > size {
		t.Fatalf("frame is %d bytes, the send path's bound says %d", len(a), size)
	}
}

func header(typ frameType, n uint32) []byte {
	b := []byte{byte(typ), 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], n)
	return b
}

func rawFrame(typ frameType, payload ...[]byte) []byte {
	p := bytes.Join(payload, nil)
	return append(header(typ, uint32(len(p))), p...)
}

func uv(v uint64) []byte { return binary.AppendUvarint(nil, v) }

func str(s string) []byte { return append(uv(uint64(len(s))), s...) }

// badFrames are corner cases every decoder path must refuse with a clear error.
var badFrames = []struct {
	name, want string
	b          []byte
}{
	{"unknown type", "unknown frame type", rawFrame(99, uv(1))},
	{"type zero", "unknown frame type", rawFrame(0)},
	{"entries over limit", "too large", header(frameEntries, 64<<10+1)},
	{"control over limit", "too large", header(frameAck, maxControlPayload+1)},
	{"length 4GiB", "too large", header(frameEntries, math.MaxUint32)},
	{"truncated header", "inside a frame header", []byte{byte(frameAck), 0, 0}},
	{"truncated payload", "inside a ACK frame", append(header(frameAck, 10), 1, 2)},
	{"empty ack", "bad varint", rawFrame(frameAck)},
	{"overlong varint", "bad varint", rawFrame(frameAck, bytes.Repeat([]byte{0xff}, 11))},
	{"ack beyond int64", "int64 range", rawFrame(frameAck, uv(math.MaxUint64))},
	{"trailing bytes", "trailing bytes", rawFrame(frameAck, uv(5), []byte{0})},
	{"zero entries", "entry count 0", rawFrame(frameEntries, uv(0))},
	{"entry count lies", "entry count 1000", rawFrame(frameEntries, uv(1000), uv(1), uv(1), uv(0))},
	{"entry count huge", "entry count", rawFrame(frameEntries, uv(math.MaxUint64), bytes.Repeat([]byte{0}, 30))},
	{"entry count zero messages", "at least one message", rawFrame(frameEntries, uv(1), uv(5), uv(0), uv(0))},
	{"entry count beyond int32", "int32 range", rawFrame(frameEntries, uv(1), uv(5), uv(math.MaxInt32+1), uv(0))},
	{"entry value past end", "bytes but", rawFrame(frameEntries, uv(1), uv(5), uv(1), uv(100), []byte("short"))},
	{"entries overlap", "overlaps", rawFrame(frameEntries, uv(2), uv(10), uv(5), uv(0), uv(12), uv(1), uv(0))},
	{"entry offset overflow", "overflows", rawFrame(frameEntries, uv(1), uv(math.MaxInt64), uv(2), uv(0))},
	{"hello empty versions", "version range", rawFrame(frameHello, uv(2), uv(1), str("n"), str("r"), uv(1<<20), uv(0), uv(0))},
	{"hello version zero", "version range", rawFrame(frameHello, uv(0), uv(0), str("n"), str("r"), uv(1<<20), uv(0), uv(0))},
	{"hello no name", "empty node", rawFrame(frameHello, uv(1), uv(1), str(""), str("r"), uv(1<<20), uv(0), uv(0))},
	{"hello tiny frames", "max frame", rawFrame(frameHello, uv(1), uv(1), str("n"), str("r"), uv(10), uv(0), uv(0))},
	{"hello long name", "exceeds 255", rawFrame(frameHello, uv(1), uv(1), str(strings.Repeat("n", 256)), str("r"), uv(1<<20), uv(0), uv(0))},
	{"open partition out of range", "not below partition count", rawFrame(frameOpen, str("t"), uv(4), uv(4), str("eu"), uv(0), uv(0))},
	{"open no topic", "topic must be", rawFrame(frameOpen, str(""), uv(0), uv(1), str("eu"), uv(0), uv(0))},
	{"open no region", "destination region", rawFrame(frameOpen, str("t"), uv(0), uv(1), str(""), uv(0), uv(0))},
	{"open extra too long", "exceeds 4096", rawFrame(frameOpen, str("t"), uv(0), uv(1), str("eu"), uv(0), uv(5000))},
	{"error code beyond 32 bits", "32 bits", rawFrame(frameError, uv(1<<32), str("x"))},
	{"error message too long", "exceeds 4096", rawFrame(frameError, uv(1), str(strings.Repeat("m", 4097)))},
}

func TestDecodeRejectsBadFrames(t *testing.T) {
	for _, tc := range badFrames {
		t.Run(tc.name, func(t *testing.T) {
			fr := newFrameReader(bytes.NewReader(tc.b), 64<<10)
			f, _, err := fr.next()
			if err == nil {
				t.Fatalf("decoded %+v", f)
			}
			if !errors.Is(err, ErrMalformedFrame) && !errors.Is(err, ErrFrameTooLarge) {
				t.Fatalf("error %v is neither malformed nor too large", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

// checkFrameStream decodes frames until an error and checks that each decoded frame
// re-encodes to bytes that decode to the same frame.
func checkFrameStream(t *testing.T, data []byte, maxFrame int) {
	fr := newFrameReader(bytes.NewReader(data), maxFrame)
	consumed := 0
	for {
		f, n, err := fr.next()
		consumed += n
		if consumed > len(data) {
			t.Fatalf("reported %d bytes consumed of %d", consumed, len(data))
		}
		if err != nil {
			if err != io.EOF && !errors.Is(err, ErrMalformedFrame) && !errors.Is(err, ErrFrameTooLarge) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		b1 := appendFrame(nil, f)
		f2, _, err := newFrameReader(bytes.NewReader(b1), maxFrameBytes).next()
		if err != nil {
			t.Fatalf("re-encoded %s does not decode: %v", f.frameType(), err)
		}
		if b2 := appendFrame(nil, f2); !bytes.Equal(b1, b2) {
			t.Fatalf("%s does not round-trip", f.frameType())
		}
		if e, ok := f.(entriesFrame); ok {
			var sum int64
			for _, x := range e.Entries {
				sum += int64(len(x.Value))
			}
			if sum != e.Bytes {
				t.Fatalf("ENTRIES Bytes %d, values sum to %d", e.Bytes, sum)
			}
		}
	}
}

func FuzzReadFrame(f *testing.F) {
	for _, fr := range sampleFrames() {
		f.Add(appendFrame(nil, fr))
	}
	var all []byte
	for _, fr := range sampleFrames() {
		all = appendFrame(all, fr)
	}
	f.Add(all)
	for _, tc := range badFrames {
		f.Add(tc.b)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFrameStream(t, data, 64<<10)
	})
}

func FuzzDecodePayload(f *testing.F) {
	for _, fr := range sampleFrames() {
		b := appendFrame(nil, fr)
		f.Add(b[0], b[frameHeaderLen:])
	}
	for _, tc := range badFrames {
		if len(tc.b) >= frameHeaderLen {
			f.Add(tc.b[0], tc.b[frameHeaderLen:])
		}
	}
	f.Fuzz(func(t *testing.T, typ byte, payload []byte) {
		fr, err := decodePayload(frameType(typ), payload)
		if err != nil {
			if !errors.Is(err, ErrMalformedFrame) {
				t.Fatalf("error is not ErrMalformedFrame: %v", err)
			}
			return
		}
		if fr.frameType() != frameType(typ) {
			t.Fatalf("decoded %s from type %d", fr.frameType(), typ)
		}
		checkFrameStream(t, appendFrame(nil, fr), maxFrameBytes)
	})
}

// FuzzEntriesRoundTrip builds entries from fuzz input and checks the send-path encoder against
// the decoder.
func FuzzEntriesRoundTrip(f *testing.F) {
	f.Add(uint64(0), []byte("abc"), uint8(3), uint8(1))
	f.Add(uint64(math.MaxInt64-100), []byte{}, uint8(10), uint8(7))
	f.Fuzz(func(t *testing.T, start uint64, value []byte, n, count uint8) {
		if n == 0 || count == 0 {
			return
		}
		off := int64(start >> 1)
		var es []Entry
		for i := 0; i < int(n); i++ {
			if off > math.MaxInt64-int64(count) {
				break
			}
			es = append(es, Entry{Offset: off, Count: int32(count), Value: value[:i%(len(value)+1)]})
			off += int64(count) + int64(i%3)
		}
		if len(es) == 0 {
			return
		}
		b := appendEntries(nil, es)
		fr, _, err := newFrameReader(bytes.NewReader(b), maxFrameBytes).next()
		if err != nil {
			t.Fatalf("encoded entries do not decode: %v", err)
		}
		got := canonFrame(fr).(entriesFrame)
		want := canonFrame(entriesFrame{Entries: es}).(entriesFrame)
		if len(got.Entries) != len(want.Entries) {
			t.Fatalf("%d entries back, want %d", len(got.Entries), len(want.Entries))
		}
		for i := range want.Entries {
			if !reflect.DeepEqual(got.Entries[i], want.Entries[i]) {
				t.Fatalf("entry %d: got %+v want %+v", i, got.Entries[i], want.Entries[i])
			}
		}
	})
}
