package dedup

import (
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/ternmq/tern/protocols"
)

// step is one batch offered to a partition's table and what must happen.
type step struct {
	name  string
	b     Batch
	base  int64 // offset the batch would get
	err   error // expected sentinel, nil for accepted or duplicate
	dup   bool
	dupAt int64 // original base offset of a duplicate
	abort bool  // the append fails after the check
}

func batch(pid int64, epoch int16, first, last int32) Batch {
	return Batch{ProducerID: pid, Epoch: epoch, FirstSeq: first, LastSeq: last, Count: int64(last-first) + 1}
}

func TestKafkaCheck(t *testing.T) {
	cases := []struct {
		name  string
		steps []step
	}{
		{"in order then resends", []step{
			{name: "first", b: batch(1, 0, 0, 4), base: 0},
			{name: "second", b: batch(1, 0, 5, 9), base: 5},
			{name: "resend first", b: batch(1, 0, 0, 4), base: 10, dup: true, dupAt: 0},
			{name: "resend second", b: batch(1, 0, 5, 9), base: 10, dup: true, dupAt: 5},
			{name: "third", b: batch(1, 0, 10, 10), base: 10},
		}},
		{"gap", []step{
			{name: "first", b: batch(1, 0, 0, 4), base: 0},
			{name: "gap", b: batch(1, 0, 6, 7), base: 5, err: protocols.ErrOutOfOrderSequence},
			{name: "overlap", b: batch(1, 0, 3, 7), base: 5, err: protocols.ErrOutOfOrderSequence},
			{name: "next", b: batch(1, 0, 5, 7), base: 5},
		}},
		{"only five batches are remembered", []step{
			{name: "b0", b: batch(1, 0, 0, 0), base: 0},
			{name: "b1", b: batch(1, 0, 1, 1), base: 1},
			{name: "b2", b: batch(1, 0, 2, 2), base: 2},
			{name: "b3", b: batch(1, 0, 3, 3), base: 3},
			{name: "b4", b: batch(1, 0, 4, 4), base: 4},
			{name: "b5", b: batch(1, 0, 5, 5), base: 5},
			{name: "resend b1", b: batch(1, 0, 1, 1), base: 6, dup: true, dupAt: 1},
			{name: "resend b0 is too old", b: batch(1, 0, 0, 0), base: 6, err: protocols.ErrOutOfOrderSequence},
		}},
		{"epochs", []step{
			{name: "first", b: batch(1, 0, 0, 4), base: 0},
			{name: "new epoch not at 0", b: batch(1, 1, 5, 6), base: 5, err: protocols.ErrOutOfOrderSequence},
			{name: "new epoch", b: batch(1, 1, 0, 1), base: 5},
			{name: "old epoch fenced", b: batch(1, 0, 5, 5), base: 7, err: protocols.ErrInvalidProducerEpoch},
			{name: "old epoch resend fenced", b: batch(1, 0, 0, 4), base: 7, err: protocols.ErrInvalidProducerEpoch},
		}},
		{"unknown producer starts anywhere", []step{
			{name: "mid-sequence", b: batch(7, 3, 100, 109), base: 0},
			{name: "next", b: batch(7, 3, 110, 110), base: 10},
			{name: "other producer", b: batch(8, 0, 0, 0), base: 11},
		}},
		{"sequence wraps", []step{
			{name: "to the top", b: batch(1, 0, math.MaxInt32-1, math.MaxInt32), base: 0},
			{name: "wrapped", b: batch(1, 0, 0, 2), base: 2},
		}},
		{"aborted append is forgotten", []step{
			{name: "first", b: batch(1, 0, 0, 4), base: 0},
			{name: "failed write", b: batch(1, 0, 5, 9), base: 5, abort: true},
			{name: "retry is new, not a duplicate", b: batch(1, 0, 5, 9), base: 5},
		}},
		{"aborted first batch of a producer", []step{
			{name: "failed write", b: batch(1, 0, 0, 4), base: 0, abort: true},
			{name: "retry", b: batch(1, 0, 0, 4), base: 0},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := NewKafka(nil, 0)
			for _, s := range c.steps {
				d, err := k.Check(s.b, s.base, 1000)
				if s.err != nil {
					if !errors.Is(err, s.err) {
						t.Fatalf("%s: err %v, want %v", s.name, err, s.err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", s.name, err)
				}
				if d.Duplicate != s.dup || (s.dup && (d.BaseOffset != s.dupAt || d.Count != s.b.Count)) {
					t.Fatalf("%s: decision %+v, want duplicate=%v at %d", s.name, d, s.dup, s.dupAt)
				}
				if s.abort {
					k.Abort(d)
				} else {
					k.Commit(d)
				}
			}
		})
	}
}

// TestKafkaPendingVisible: a batch whose append is in flight is already a
// duplicate for a resend arriving before the commit, and the committed
// state only moves on Commit.
func TestKafkaPendingVisible(t *testing.T) {
	k := NewKafka(nil, 0)
	d1, err := k.Check(batch(1, 0, 0, 4), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	d2, err := k.Check(batch(1, 0, 0, 4), 5, 2)
	if err != nil || !d2.Duplicate || d2.BaseOffset != 0 {
		t.Fatalf("resend while pending: %+v %v", d2, err)
	}
	d3, err := k.Check(batch(1, 0, 5, 6), 5, 3)
	if err != nil {
		t.Fatalf("next while pending: %v", err)
	}
	if _, ok := k.committed[1]; ok {
		t.Fatal("state committed before any Commit")
	}
	// Commits may arrive out of order; the latest state wins.
	k.Commit(d3)
	k.Commit(d1)
	st, _ := k.State(1)
	if got := st.Batches[len(st.Batches)-1]; got.FirstSeq != 5 || got.BaseOffset != 5 {
		t.Fatalf("state after commits: %+v", st)
	}
	if len(k.pending) != 0 {
		t.Fatalf("pending state left: %+v", k.pending)
	}
}

func TestStateEncoding(t *testing.T) {
	s := State{Epoch: 3, Updated: 123456, Batches: []BatchMeta{{0, 4, 10, 5}, {5, 5, 15, 1}}}
	got, err := DecodeState(EncodeState(s))
	if err != nil || !reflect.DeepEqual(got, s) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	// Golden bytes: changing them is a storage format change.
	want := []byte{1, 0, 3, 0, 0, 0, 0, 0, 1, 0xe2, 0x40, 1, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 5}
	if b := EncodeState(State{Epoch: 3, Updated: 123456, Batches: []BatchMeta{{0, 4, 10, 5}}}); !reflect.DeepEqual(b, want) {
		t.Fatalf("encoding %v, want %v", b, want)
	}
	if id, err := ParseProducerKey(ProducerKey(0x0102030405060708)); err != nil || id != 0x0102030405060708 {
		t.Fatalf("producer key: %x %v", id, err)
	}
	for _, bad := range [][]byte{nil, {2}, want[:20], append(append([]byte{}, want...), 0)} {
		if _, err := DecodeState(bad); !errors.Is(err, ErrCorruptState) {
			t.Errorf("DecodeState(%v): %v, want ErrCorruptState", bad, err)
		}
	}
}

func TestBatchOf(t *testing.T) {
	h := protocols.BatchHeader{ProducerID: 9, ProducerEpoch: 2, BaseSequence: 10, LastOffsetDelta: 4}
	b, ok := BatchOf(&h)
	if !ok || b != (Batch{ProducerID: 9, Epoch: 2, FirstSeq: 10, LastSeq: 14, Count: 5}) {
		t.Fatalf("BatchOf: %+v %v", b, ok)
	}
	if _, ok := BatchOf(&protocols.BatchHeader{ProducerID: -1, BaseSequence: -1}); ok {
		t.Fatal("a batch without producer id is not idempotent")
	}
}

func FuzzDecodeState(f *testing.F) {
	f.Add(EncodeState(State{Epoch: 1, Batches: []BatchMeta{{0, 0, 0, 1}}}))
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeState(b)
		if err != nil {
			return
		}
		if got, err := DecodeState(EncodeState(s)); err != nil || !reflect.DeepEqual(got, s) {
			t.Fatalf("re-encoding changed the state: %+v -> %+v (%v)", s, got, err)
		}
	})
}

// TestKafkaExpiry: a producer idle past the expiry is listed for deletion
// by a later append (at most once a minute), dropped once that append
// commits, and then treated as unknown.
func TestKafkaExpiry(t *testing.T) {
	hour := time.Hour.Milliseconds()
	k := NewKafka(nil, time.Hour)
	d, _ := k.Check(batch(1, 0, 0, 0), 0, 0)
	k.Commit(d)
	d, _ = k.Check(batch(2, 0, 0, 0), 1, 30*1000)
	if len(d.Expired) != 0 {
		t.Fatalf("expired too early: %v", d.Expired)
	}
	k.Commit(d)
	d, _ = k.Check(batch(2, 0, 1, 1), 2, hour+60*1000)
	if len(d.Expired) != 1 || d.Expired[0] != 1 {
		t.Fatalf("expired %v, want producer 1", d.Expired)
	}
	if _, ok := k.State(1); !ok {
		t.Fatal("expired state dropped before the append committed")
	}
	k.Commit(d)
	if _, ok := k.State(1); ok {
		t.Fatal("expired state kept after the append committed")
	}
	// Producer 1 is now unknown: any sequence is accepted.
	if _, err := k.Check(batch(1, 0, 50, 50), 3, hour+61*1000); err != nil {
		t.Fatalf("expired producer coming back: %v", err)
	}
}
