package pulsar

import (
	"errors"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/ternmq/tern/protocols/pulsar/pb"
)

func TestMessageIDBase64(t *testing.T) {
	// The example from the WebSocket API documentation.
	id, err := ParseMessageID("CAAQAw==")
	if err != nil {
		t.Fatal(err)
	}
	if id.GetLedgerId() != 0 || id.GetEntryId() != 3 || id.Partition != nil || id.GetBatchIndex() != -1 {
		t.Fatalf("CAAQAw== decoded to %v", id)
	}
	s, err := FormatMessageID(&pb.MessageIdData{LedgerId: proto.Uint64(0), EntryId: proto.Uint64(3)})
	if err != nil || s != "CAAQAw==" {
		t.Fatalf("FormatMessageID = %q, %v", s, err)
	}

	full := &pb.MessageIdData{
		LedgerId: proto.Uint64(123456789), EntryId: proto.Uint64(42), Partition: proto.Int32(3),
		BatchIndex: proto.Int32(7), BatchSize: proto.Int32(10), AckSet: []int64{-1, 5},
	}
	s, err = FormatMessageID(full)
	if err != nil {
		t.Fatal(err)
	}
	// The same id through the URL-safe alphabet, without padding, and with
	// '+' turned into a space by query-string decoding.
	variants := []string{
		s,
		strings.NewReplacer("+", "-", "/", "_").Replace(s),
		strings.TrimRight(s, "="),
		strings.ReplaceAll(s, "+", " "),
	}
	for _, v := range variants {
		got, err := ParseMessageID(v)
		if err != nil || !proto.Equal(got, full) {
			t.Fatalf("ParseMessageID(%q) = %v, %v", v, got, err)
		}
	}
}

func TestMessageIDErrors(t *testing.T) {
	for _, s := range []string{"", "!!!", "CAAQ", "EAM=", strings.Repeat("A", MaxMessageIDText+1), "CAAQAw==CAAQ"} {
		if _, err := ParseMessageID(s); !errors.Is(err, ErrMessageID) {
			t.Fatalf("ParseMessageID(%.20q) = %v", s, err)
		} else {
			t.Log(err)
		}
	}
	if _, err := FormatMessageID(&pb.MessageIdData{}); !errors.Is(err, ErrEncode) {
		t.Fatalf("FormatMessageID without required fields: %v", err)
	}
}

func TestSentinelMessageIDs(t *testing.T) {
	e, l := EarliestMessageID(), LatestMessageID()
	if !IsEarliestMessageID(e) || IsLatestMessageID(e) || !IsLatestMessageID(l) || IsEarliestMessageID(l) {
		t.Fatal("sentinels not recognised")
	}
	// Clients write -1 as a signed number converted to uint64.
	minusOne := int64(-1)
	if e.GetLedgerId() != uint64(minusOne) || l.GetEntryId() != math.MaxInt64 {
		t.Fatalf("sentinel values %v %v", e, l)
	}
	// Round trip through the wire keeps them recognisable.
	for _, id := range []*pb.MessageIdData{e, l} {
		s, err := FormatMessageID(id)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseMessageID(s)
		if err != nil || !proto.Equal(back, id) {
			t.Fatalf("%v -> %q -> %v, %v", id, s, back, err)
		}
	}
	if IsEarliestMessageID(&pb.MessageIdData{LedgerId: proto.Uint64(0), EntryId: proto.Uint64(0)}) {
		t.Fatal("(0,0) taken for earliest")
	}
}
