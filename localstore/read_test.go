package localstore

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/ternmq/tern/protocols"
)

// TestReadFindsTheEntryHoldingAnyOffset reads from every offset of a log
// of entries of 1, 5 and 3 offsets: at an entry's base (the forward seek),
// inside an entry (the step back), and inside the last entry (no entry
// after it), each read starts with the entry holding the offset.
func TestReadFindsTheEntryHoldingAnyOffset(t *testing.T) {
	s := openTest(t, Config{})
	tm, err := s.CreateTopic("read", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	pid := tm.PIDs[0]
	for i, n := range []int{1, 5, 3} {
		if _, err := s.Append(context.Background(), pid, AppendRequest{Entry: makeEntry(t, fmt.Sprintf("e%d", i), n, 10, 1000)}); err != nil {
			t.Fatal(err)
		}
	}
	holder := []int64{0, 1, 1, 1, 1, 1, 6, 6, 6}
	for off, want := range holder {
		es, err := s.Read(pid, int64(off), 1<<20)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if len(es) == 0 || es[0].BaseOffset != want {
			t.Errorf("read at %d starts with %v, want the entry at %d", off, es, want)
			continue
		}
		if last := es[len(es)-1]; last.BaseOffset != 6 {
			t.Errorf("read at %d ends at entry %d, want 6", off, last.BaseOffset)
		}
	}
}

// TestReadIntoChunks: a read fills the caller's buffer first and puts what
// does not fit into new buffers without moving what was read; every value
// is its own entry's bytes, capped so appending to one cannot overwrite
// the next; the largest buffer comes back for reuse, and a second read
// into it allocates nothing. Entries in segments are read with their
// record header before them in the buffer.
func TestReadIntoChunks(t *testing.T) {
	t.Run("segments", func(t *testing.T) { readIntoChunks(t, false) })
	t.Run("inline", func(t *testing.T) { readIntoChunks(t, true) })
}

func readIntoChunks(t *testing.T, inline bool) {
	s, pid := openTopic(t, Config{InlineEntries: inline}, "chunks")
	gap := segRecordHeader
	if inline {
		gap = 0
	}
	// A small entry first, then larger ones: sized from the first entry
	// alone, the buffer would have to grow.
	var (
		want  [][]byte
		bases []int64
	)
	for i, n := range []int{1, 40, 40, 40, 3} {
		e := makeEntry(t, fmt.Sprintf("c%d", i), n, 1000, 1000)
		r, err := s.Append(context.Background(), pid, AppendRequest{Entry: e})
		if err != nil {
			t.Fatal(err)
		}
		_ = protocols.StampEntry(e, r.BaseOffset, r.AppendTime)
		want = append(want, e)
		bases = append(bases, r.BaseOffset)
	}
	check := func(es []Entry) {
		t.Helper()
		if len(es) != len(want) {
			t.Fatalf("read %d entries, want %d", len(es), len(want))
		}
		for i, e := range es {
			if !bytes.Equal(e.Value, want[i]) || cap(e.Value) != len(e.Value) {
				t.Fatalf("entry %d: %d bytes (cap %d), want its %d bytes", i, len(e.Value), cap(e.Value), len(want[i]))
			}
		}
	}
	small := make([]byte, 0, 2000)
	es, keep, err := s.ReadInto(pid, 0, 1<<20, small)
	if err != nil {
		t.Fatal(err)
	}
	check(es)
	if &es[0].Value[0] != &small[:gap+1][gap] {
		t.Error("the first entry is not in the caller's buffer")
	}
	if cap(keep) <= cap(small) {
		t.Errorf("returned a %d-byte buffer, want the larger one the read allocated", cap(keep))
	}
	total := 0
	for _, w := range want {
		total += gap + len(w)
	}
	if !inline {
		// The records are read as one span, with the batch record each
		// append writes behind its entry (replay.go) between them.
		first, last := segPointerOf(t, s, pid, bases[0]), segPointerOf(t, s, pid, bases[len(bases)-1])
		total = int(last.Off+segRecordHeader+last.Len) - int(first.Off)
	}
	big := make([]byte, 0, total)
	allocs := testing.AllocsPerRun(5, func() {
		es, keep, err = s.ReadInto(pid, 0, 1<<20, big)
	})
	if err != nil {
		t.Fatal(err)
	}
	check(es)
	if &keep[:1][0] != &big[:1][0] {
		t.Error("a read that fits did not return the caller's buffer")
	}
	// The iterator and the entry list allocate; no value buffer does.
	// (8 when written); a 40-record entry copied into its own buffer would
	// add more than that.
	if allocs > 12 && !raceEnabled {
		t.Errorf("%v allocations for a read that fits the caller's buffer", allocs)
	}
}

// TestReadIntoKeepsALargeReadWhole: a read of more than readBufSize (a
// consumer fetching 10 MiB per partition), repeated with the buffer each
// read returns, soon fits that buffer whole and allocates no value buffer
// at all: before, each new chunk was sized for the rest of the read and
// capped at readBufSize, none grew to hold a whole read, and every such
// read allocated, and the runtime cleared, megabytes.
func TestReadIntoKeepsALargeReadWhole(t *testing.T) {
	t.Run("segments", func(t *testing.T) { readIntoKeepsALargeReadWhole(t, false) })
	t.Run("inline", func(t *testing.T) { readIntoKeepsALargeReadWhole(t, true) })
}

func readIntoKeepsALargeReadWhole(t *testing.T, inline bool) {
	s, pid := openTopic(t, Config{InlineEntries: inline}, "large")
	other, err := s.CreateTopic("other", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	const perEntry = 100 // ~100 KiB entries, 12 MiB in all
	var want int64
	for i := range 120 {
		r, err := s.Append(context.Background(), pid, AppendRequest{Entry: makeEntry(t, fmt.Sprintf("l%d", i), perEntry, 1000, 1000)})
		if err != nil {
			t.Fatal(err)
		}
		want = r.BaseOffset + perEntry
		// Another partition's entries between this one's, as a node
		// with several busy partitions writes them: the read cannot
		// take the records in one run.
		if _, err := s.Append(context.Background(), other.PIDs[0], AppendRequest{Entry: makeEntry(t, "o", 1, 100, 1000)}); err != nil {
			t.Fatal(err)
		}
	}
	const maxBytes = 10 << 20
	if maxBytes <= readBufSize {
		t.Fatal("the read must be larger than readBufSize")
	}
	var buf []byte
	read := func() {
		t.Helper()
		es, keep, err := s.ReadInto(pid, 0, maxBytes, buf)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range es {
			n += len(e.Value)
		}
		if n < maxBytes-200<<10 || es[0].BaseOffset != 0 || es[len(es)-1].BaseOffset+perEntry > want {
			t.Fatalf("read %d entries, %d bytes from %d; want at least %d bytes from 0", len(es), n, es[0].BaseOffset, maxBytes-200<<10)
		}
		buf = keep
	}
	for range 4 {
		read()
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 4 {
		read()
	}
	runtime.ReadMemStats(&after)
	// Race builds turn on pebble's invariant checks, whose BufMangler
	// clones every value an iterator hands out: inline entries then
	// allocate in pebble, not here, so those builds do not count them.
	if perRead := (after.TotalAlloc - before.TotalAlloc) / 4; perRead > 1<<20 && !(inline && raceEnabled) {
		t.Errorf("a %d-byte read into the buffer the last one returned (%d bytes) allocates %d bytes", maxBytes, cap(buf), perRead)
	}
}

// TestPendingAppendReady: an append under sync durability becomes ready
// once the committer has answered it, without Wait being called; inline
// entries (pebble commits them itself) say ready once waited for.
func TestPendingAppendReady(t *testing.T) {
	for _, inline := range []bool{false, true} {
		s, pid := openTopic(t, Config{InlineEntries: inline}, "ready")
		pa, err := s.StartAppend(context.Background(), pid, AppendRequest{Entry: makeEntry(t, "r", 3, 100, 1000)})
		if err != nil {
			t.Fatal(err)
		}
		if !inline {
			deadline := time.Now().Add(10 * time.Second)
			for !pa.Ready() {
				if time.Now().After(deadline) {
					t.Fatal("an append to the segments never became ready")
				}
				time.Sleep(time.Millisecond)
			}
		}
		if _, err := pa.Wait(); err != nil {
			t.Fatal(err)
		}
		if !pa.Ready() {
			t.Errorf("inline %v: not ready after Wait", inline)
		}
	}
}
