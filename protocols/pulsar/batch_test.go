package pulsar

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/ternmq/tern/protocols/pulsar/pb"
)

func TestBatchRoundTrip(t *testing.T) {
	data, want := buildBatch(t, 7, 50)
	// A null value and an empty payload are legal members.
	var err error
	data, err = AppendBatchMessage(data, pb.SingleMessageMetadata_builder{NullValue: proto.Bool(true)}.Build(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, BatchMessage{Metadata: pb.SingleMessageMetadata_builder{NullValue: proto.Bool(true), PayloadSize: proto.Int32(0)}.Build()})

	r := NewBatchReader(data, len(want))
	var md pb.SingleMessageMetadata
	for i, w := range want {
		p, err := r.Next(&md)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if !proto.Equal(&md, w.Metadata) || !bytes.Equal(p, w.Payload) {
			t.Fatalf("message %d: %v %q", i, &md, p)
		}
		if cap(p) != len(p) {
			t.Fatalf("message %d: payload capacity reaches into the next message", i)
		}
	}
	if _, err := r.Next(&md); err != io.EOF {
		t.Fatalf("after the last message: %v", err)
	}
}

func TestBatchErrors(t *testing.T) {
	data, _ := buildBatch(t, 3, 10)
	first := 4 + int(binary.BigEndian.Uint32(data))
	cases := []struct {
		name  string
		data  []byte
		count int
	}{
		{"fewer messages than announced", data, 4},
		{"more messages than announced", data, 2},
		{"negative count", data, -1},
		{"truncated payload", data[:len(data)-1], 3},
		{"truncated size", data[:2], 1},
		{"metadata size past end", append(u32(1000), data[4:]...), 3},
		{"garbage metadata", append(u32(3), 0xff, 0xff, 0xff), 1},
		{"missing payload_size", append(u32(2), 0x10, 0x01), 1},
		// properties {key: "k"} and payload_size 0: a KeyValue's value is
		// required too, and so is its key.
		{"property without value", append(u32(7), 0x0a, 0x03, 0x0a, 0x01, 'k', 0x18, 0x00), 1},
		{"property without key", append(u32(7), 0x0a, 0x03, 0x12, 0x01, 'v', 0x18, 0x00), 1},
		{"negative payload_size", append(u32(11), 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), 1},
		{"payload_size past end", append(u32(2), 0x18, 0x7f), 1},
		{"trailing bytes", append(bytes.Clone(data[:first+10]), 0), 1},
		{"zero count with data", data, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseBatch(c.data, c.count)
			if !errors.Is(err, ErrBatch) {
				t.Fatalf("err = %v, want ErrBatch", err)
			}
			t.Log(err)
		})
	}
	if msgs, err := ParseBatch(nil, 0); err != nil || len(msgs) != 0 {
		t.Fatalf("empty batch: %v %v", msgs, err)
	}
}

// TestBatchHugeCount checks that an absurd num_messages_in_batch does not
// size an allocation.
func TestBatchHugeCount(t *testing.T) {
	data, _ := buildBatch(t, 1, 1)
	allocs := testing.AllocsPerRun(10, func() {
		if _, err := ParseBatch(data, 1<<30); !errors.Is(err, ErrBatch) {
			t.Fatal(err)
		}
	})
	if allocs > 5 {
		t.Fatalf("%v allocations for a rejected count", allocs)
	}
}

// TestBatchReaderDoesNotAllocate holds decoding a batch whose messages carry
// only scalars (sequence id, payload size, event time: what a producer
// sends without keys or properties) to no allocation per message. The
// protocol's open Go API allocated each optional scalar it decoded, two to
// three per message.
func TestBatchReaderDoesNotAllocate(t *testing.T) {
	const n = 100
	var data []byte
	for i := range n {
		var err error
		data, err = AppendBatchMessage(data, pb.SingleMessageMetadata_builder{
			SequenceId: proto.Uint64(uint64(i)),
			EventTime:  proto.Uint64(1_700_000_000_000 + uint64(i)),
		}.Build(), []byte("payload"))
		if err != nil {
			t.Fatal(err)
		}
	}
	var md pb.SingleMessageMetadata
	read := func() {
		r := NewBatchReader(data, n)
		for i := 0; ; i++ {
			p, err := r.Next(&md)
			if err == io.EOF {
				if i != n {
					t.Fatalf("read %d messages, want %d", i, n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if md.GetSequenceId() != uint64(i) || md.GetEventTime() != 1_700_000_000_000+uint64(i) ||
				!md.HasSequenceId() || string(p) != "payload" {
				t.Fatalf("message %d: %v %q", i, &md, p)
			}
		}
	}
	read()
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	if allocs := testing.AllocsPerRun(10, read); allocs != 0 {
		t.Errorf("reading %d messages allocated %.0f times", n, allocs)
	}
}
