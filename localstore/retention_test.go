package localstore

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ternmq/tern/protocols"
)

type fakeClock struct{ ms atomic.Int64 }

func (c *fakeClock) now() time.Time          { return time.UnixMilli(c.ms.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

// openClocked opens a store whose clock starts at ms (Unix ms) and moves
// only when the test advances it, with a non-partitioned topic name.
func openClocked(t *testing.T, ms int64, name string) (*Store, PartitionID, *fakeClock) {
	t.Helper()
	clk := &fakeClock{}
	clk.ms.Store(ms)
	s, pid := openTopic(t, Config{Now: clk.now}, name)
	return s, pid, clk
}

func TestRetentionByAgeAndSize(t *testing.T) {
	s, pid, clk := openClocked(t, 1_000_000, "ret")
	ctx := context.Background()
	var sizes []int
	for i := 0; i < 10; i++ {
		e := makeEntry(t, "r", 2, 100, clk.ms.Load())
		sizes = append(sizes, len(e))
		if _, err := s.Append(ctx, pid, AppendRequest{Entry: e}); err != nil {
			t.Fatal(err)
		}
		clk.advance(time.Minute)
	}
	// Entries were appended at minutes 0..9; now is minute 10. Keeping 5.5
	// minutes removes the entries of minutes 0-4.
	n, err := s.EnforceRetention(pid, Retention{MaxAge: 5*time.Minute + 30*time.Second})
	if err != nil || n != 5 {
		t.Fatalf("age retention removed %d (%v), want 5", n, err)
	}
	start, hw, _ := s.Offsets(pid)
	if start != 10 || hw != 20 {
		t.Fatalf("after age retention start=%d hw=%d, want 10 20", start, hw)
	}
	var oor *protocols.OffsetOutOfRangeError
	if _, err := s.Read(pid, 9, 1<<20); !errors.As(err, &oor) || oor.Start != 10 {
		t.Fatalf("read below start: %v", err)
	}
	if es, err := s.Read(pid, 10, 1); err != nil || len(es) != 1 || es[0].BaseOffset != 10 {
		t.Fatalf("read at start: %+v %v", es, err)
	}
	// Size: keep at most three entries' worth.
	n, err = s.EnforceRetention(pid, Retention{MaxBytes: int64(3 * sizes[0])})
	if err != nil || n != 2 {
		t.Fatalf("size retention removed %d (%v), want 2", n, err)
	}
	st, _ := s.PartitionStats(pid)
	if st.Start != 14 || st.Entries != 3 || st.Bytes != int64(3*sizes[0]) {
		t.Fatalf("after size retention: %+v", st)
	}
	// Offsets continue after retention; retention survives reopen.
	r, err := s.Append(ctx, pid, AppendRequest{Entry: makeEntry(t, "r", 1, 1, 0)})
	if err != nil || r.BaseOffset != 20 {
		t.Fatalf("append after retention at %d (%v)", r.BaseOffset, err)
	}
	// Everything old: the log empties but keeps its offsets.
	clk.advance(time.Hour)
	if _, err := s.EnforceRetention(pid, Retention{MaxAge: time.Minute}); err != nil {
		t.Fatal(err)
	}
	start, hw, _ = s.Offsets(pid)
	if start != 21 || hw != 21 {
		t.Fatalf("after full retention start=%d hw=%d, want 21 21", start, hw)
	}
	if r, _ := s.Append(ctx, pid, AppendRequest{Entry: makeEntry(t, "r", 1, 1, 0)}); r.BaseOffset != 21 {
		t.Fatalf("append after emptying at %d, want 21", r.BaseOffset)
	}
}

func TestTruncateBeforeInsideAnEntry(t *testing.T) {
	s := openTest(t, Config{})
	tm, _ := s.CreateTopic("tr", 0, nil)
	pid := tm.PIDs[0]
	for i := 0; i < 3; i++ {
		if _, err := s.Append(context.Background(), pid, AppendRequest{Entry: makeEntry(t, "t", 4, 1, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.TruncateBefore(pid, 6)
	if err != nil || got != 6 {
		t.Fatalf("truncate: %d %v", got, err)
	}
	// Offset 6 is inside the entry [4,8): that entry stays, reads from 6 work.
	es, err := s.Read(pid, 6, 1)
	if err != nil || len(es) != 1 || es[0].BaseOffset != 4 {
		t.Fatalf("read at new start: %+v %v", es, err)
	}
	if _, err := s.Read(pid, 5, 1); err == nil {
		t.Fatal("read below the truncation point succeeded")
	}
	st, _ := s.PartitionStats(pid)
	if st.Entries != 2 {
		t.Fatalf("entries after truncate %d, want 2", st.Entries)
	}
	if _, err := s.TruncateBefore(pid, 13); err == nil {
		t.Fatal("truncate past hw accepted")
	}
}

func TestLookupTime(t *testing.T) {
	s, pid, clk := openClocked(t, 5_000, "lt")
	// Event times: entry k holds two records at 100k and 100k+1, except
	// entry 2 which is late (timestamps 50, 51): the running max keeps the
	// index monotonic.
	evs := []int64{0, 100, 50, 300, 400}
	for _, ev := range evs {
		if _, err := s.Append(context.Background(), pid, AppendRequest{Entry: makeEntry(t, "l", 2, 1, ev)}); err != nil {
			t.Fatal(err)
		}
		clk.advance(time.Second)
	}
	cases := []struct {
		ts    int64
		kind  TimeKind
		want  int64
		found bool
	}{
		{-1, EventTime, 0, true},
		{1, EventTime, 0, true},
		{2, EventTime, 2, true},
		{101, EventTime, 2, true},
		{102, EventTime, 6, true},
		{401, EventTime, 8, true},
		{402, EventTime, 10, false},
		{5_000, AppendTime, 0, true},
		{6_000, AppendTime, 2, true},
		{7_500, AppendTime, 6, true},
		{9_001, AppendTime, 10, false},
	}
	for _, c := range cases {
		got, found, err := s.LookupTime(pid, c.ts, c.kind)
		if err != nil || got != c.want || found != c.found {
			t.Errorf("LookupTime(%d, %v) = %d %v %v, want %d %v", c.ts, c.kind, got, found, err, c.want, c.found)
		}
	}
}

func TestCursorShapeAndBounds(t *testing.T) {
	var c Cursor
	c.Ack(5, 6)
	c.Ack(7, 9)
	c.Ack(6, 7)
	if c.MarkDelete != 0 || len(c.Acked) != 1 || c.Acked[0] != (Range{5, 9}) {
		t.Fatalf("merged: %+v", c)
	}
	c.Ack(0, 5)
	if c.MarkDelete != 9 || len(c.Acked) != 0 {
		t.Fatalf("folded into mark-delete: %+v", c)
	}
	c.Ack(12, 13)
	if !c.IsAcked(8) || c.IsAcked(9) || !c.IsAcked(12) || c.IsAcked(13) {
		t.Fatalf("IsAcked wrong for %+v", c)
	}
	c.Props = map[string]string{"type": "Shared"}
	back, err := decodeCursor(c.encode())
	if err != nil || back.MarkDelete != 9 || len(back.Acked) != 1 || back.Acked[0] != (Range{12, 13}) || back.Props["type"] != "Shared" {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	for i := 0; i < len(c.encode()); i++ {
		if _, err := decodeCursor(c.encode()[:i]); err == nil {
			t.Fatalf("truncated cursor of %d bytes decoded", i)
		}
	}

	s := openTest(t, Config{})
	tm, _ := s.CreateTopic("cur", 0, nil)
	pid := tm.PIDs[0]
	_, _ = s.Append(context.Background(), pid, AppendRequest{Entry: makeEntry(t, "c", 10, 1, 0)})
	if err := s.SaveCursor(pid, "s", Cursor{MarkDelete: 11}); !errors.Is(err, ErrCursorPastLog) {
		t.Fatalf("cursor past log: %v", err)
	}
	if err := s.SaveCursor(pid, "s", Cursor{MarkDelete: 3, Acked: []Range{{5, 10}}}); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.LoadCursor(pid, "s")
	if err != nil || !ok || got.MarkDelete != 3 || got.Acked[0] != (Range{5, 10}) {
		t.Fatalf("load: %+v %v %v", got, ok, err)
	}
	all, _ := s.Cursors(pid)
	if len(all) != 1 {
		t.Fatalf("cursors: %+v", all)
	}
}

func FuzzDecodeCursor(f *testing.F) {
	c := Cursor{MarkDelete: 3, Acked: []Range{{5, 9}}, Props: map[string]string{"a": "b"}}
	f.Add(c.encode())
	f.Add([]byte{1})
	f.Add([]byte{1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeCursor(b)
		if err != nil {
			return
		}
		if _, err := decodeCursor(c.encode()); err != nil {
			t.Fatalf("re-encoded cursor does not decode: %v", err)
		}
	})
}

// TestAppendTimeAt checks the append time of the entry holding each offset,
// as the index gives it and as the entry's envelope holds it, and that
// offsets outside the log have none.
func TestAppendTimeAt(t *testing.T) {
	s, pid, clk := openClocked(t, 5_000, "at")
	// Entries of 3, 1 and 2 messages, a second apart: offsets 0-2, 3, 4-5.
	for _, n := range []int{3, 1, 2} {
		if _, err := s.Append(context.Background(), pid, AppendRequest{Entry: makeEntry(t, "a", n, 1, 0)}); err != nil {
			t.Fatal(err)
		}
		clk.advance(time.Second)
	}
	want := []int64{5_000, 5_000, 5_000, 6_000, 7_000, 7_000}
	for off, w := range want {
		got, ok, err := s.AppendTimeAt(pid, int64(off))
		if err != nil || !ok || got != w {
			t.Errorf("AppendTimeAt(%d) = %d %v %v, want %d", off, got, ok, err, w)
		}
		es, err := s.Read(pid, int64(off), 1)
		if err != nil || len(es) != 1 {
			t.Fatalf("Read(%d): %d entries, %v", off, len(es), err)
		}
		env, err := protocols.DecodeEnvelope(es[0].Value)
		if err != nil || env.AppendTime != w {
			t.Errorf("the envelope of the entry holding %d says %d (%v); the index %d", off, env.AppendTime, err, w)
		}
	}
	for _, off := range []int64{-1, 6, 100} {
		if got, ok, err := s.AppendTimeAt(pid, off); err != nil || ok {
			t.Errorf("AppendTimeAt(%d) outside the log = %d %v %v; want none", off, got, ok, err)
		}
	}
	// The log starting inside the last entry: the offsets before are gone.
	if _, err := s.TruncateBefore(pid, 5); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := s.AppendTimeAt(pid, 3); err != nil || ok {
		t.Errorf("AppendTimeAt(3) below the log start = %d %v %v; want none", got, ok, err)
	}
	if got, ok, err := s.AppendTimeAt(pid, 5); err != nil || !ok || got != 7_000 {
		t.Errorf("AppendTimeAt(5) at the log start = %d %v %v; want 7000", got, ok, err)
	}
}
