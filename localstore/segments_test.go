package localstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ternmq/tern/internal/logbuf"
	"github.com/ternmq/tern/protocols"
)

// appendStamped appends e and returns it as stored (stamped with its base
// offset and append time).
func appendStamped(t *testing.T, s *Store, pid PartitionID, e []byte, d Durability) []byte {
	t.Helper()
	r, err := s.Append(context.Background(), pid, AppendRequest{Entry: e, Durability: d})
	if err != nil {
		t.Fatal(err)
	}
	if err := protocols.StampEntry(e, r.BaseOffset, r.AppendTime); err != nil {
		t.Fatal(err)
	}
	return e
}

// readAll reads a partition's whole log.
func readAll(t *testing.T, s *Store, pid PartitionID) [][]byte {
	t.Helper()
	start, hw, err := s.Offsets(pid)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for next := start; next < hw; {
		es, err := s.Read(pid, next, 256<<10)
		if err != nil {
			t.Fatalf("read at %d: %v", next, err)
		}
		for _, e := range es {
			out = append(out, bytes.Clone(e.Value))
			next = e.BaseOffset + e.Count
		}
	}
	return out
}

func sameEntries(t *testing.T, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("read %d entries, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("entry %d: %d bytes differ from the %d appended", i, len(got[i]), len(want[i]))
		}
	}
}

// storedInSegment says whether the entry at base is a pointer in pebble.
func storedInSegment(t testing.TB, s *Store, pid PartitionID, base int64) bool {
	t.Helper()
	_, seg := decodeSegPointer(entryValue(t, s, pid, base))
	return seg
}

// entryValue is what pebble holds under the key of the entry at base.
func entryValue(t testing.TB, s *Store, pid PartitionID, base int64) []byte {
	t.Helper()
	v, ok, err := s.Get(logKey(kindEntry, pid, base))
	if err != nil || !ok {
		t.Fatalf("entry %d: %v, found %v", base, err, ok)
	}
	return v
}

// walkSegments reads the records in files, each from its start to its
// first zero header: the bytes of entry records and of batch records
// (headers included), and how many batch records there are.
func walkSegments(t *testing.T, files []string) (entryBytes, batchBytes int64, batches int) {
	t.Helper()
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for pos := 0; pos+segRecordHeader <= len(b); {
			word := binary.BigEndian.Uint32(b[pos:])
			n := int(word &^ segBatchFlag)
			if n == 0 {
				break
			}
			if pos+segRecordHeader+n > len(b) {
				t.Fatalf("%s: a %d-byte record at %d runs past the file's %d bytes", name, n, pos, len(b))
			}
			if word&segBatchFlag != 0 {
				batchBytes += int64(segRecordHeader + n)
				batches++
			} else {
				entryBytes += int64(segRecordHeader + n)
			}
			pos += segRecordHeader + n
		}
	}
	return entryBytes, batchBytes, batches
}

// segPointerOf is the pointer to the segment record of the entry at base.
func segPointerOf(t testing.TB, s *Store, pid PartitionID, base int64) segPointer {
	t.Helper()
	p, seg := decodeSegPointer(entryValue(t, s, pid, base))
	if !seg {
		t.Fatalf("entry %d is not in a segment", base)
	}
	return p
}

func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, segmentsDir, "*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// Sync appends go to segment files, one after another across partitions,
// a new file once one is full (an entry larger than a file takes one of
// its own); they read back byte for byte, before and after a reopen, and
// after a reopen writing starts in a new file.
func TestSyncAppendsAreWrittenOnceToSegments(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Dir: dir, SegmentSize: 1 << 20}
	s := openTest(t, cfg)
	tm, err := s.CreateTopic("seg", 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[PartitionID][][]byte{}
	sizes := []int{100, 300 << 10, 10, 700 << 10, 1500 << 10, 5, 200 << 10}
	for i, size := range sizes {
		pid := tm.PIDs[i%2]
		want[pid] = append(want[pid], appendStamped(t, s, pid, makeEntry(t, fmt.Sprintf("s%d", i), 1, size, 1000), DurabilitySync))
	}
	for _, pid := range tm.PIDs {
		sameEntries(t, readAll(t, s, pid), want[pid])
		for base := range int64(len(want[pid])) {
			if !storedInSegment(t, s, pid, base) {
				t.Errorf("partition %d entry %d is in pebble, want a pointer to a segment", pid, base)
			}
		}
	}
	// In 1 MiB files: the first four entries (1000 KiB), the 1500 KiB
	// one alone, the last two; and the next file, made ahead.
	files := segmentFiles(t, dir)
	if len(files) != 4 {
		t.Errorf("%d segment files, want 3 and the next one", len(files))
	}
	total := 0
	for _, es := range want {
		for _, e := range es {
			total += segRecordHeader + len(e)
		}
	}
	// Each entry's record once, and behind it its append's batch record.
	entryBytes, batchBytes, batches := walkSegments(t, files)
	if entryBytes != int64(total) || batches != len(sizes) {
		t.Errorf("segments hold %d bytes of entry records and %d batch records, want %d and %d", entryBytes, batches, total, len(sizes))
	}
	if m := s.Metrics(); m.Segments != len(files) || m.SegmentFsync.Count == 0 || m.SegmentBytesWritten != int64(total)+batchBytes {
		t.Errorf("metrics: %d segments (%d files), %d fsyncs, %d bytes written, want %d", m.Segments, len(files), m.SegmentFsync.Count, m.SegmentBytesWritten, int64(total)+batchBytes)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTest(t, cfg)
	for _, pid := range tm.PIDs {
		sameEntries(t, readAll(t, s, pid), want[pid])
	}
	pid := tm.PIDs[0]
	want[pid] = append(want[pid], appendStamped(t, s, pid, makeEntry(t, "after", 1, 10, 1000), DurabilitySync))
	sameEntries(t, readAll(t, s, pid), want[pid])
	// Writing goes on in the file the last run made ahead, and the next
	// is made ahead.
	if got := segmentFiles(t, dir); len(got) != len(files)+1 {
		t.Errorf("%d segment files after a reopen and an append, want one more than the %d", len(got), len(files))
	}
	_, hw, _ := s.Offsets(pid)
	v, _, err := s.Get(logKey(kindEntry, pid, hw-1))
	if p, ok := decodeSegPointer(v); err != nil || !ok || p.Seg != 4 || p.Off != 0 {
		t.Errorf("the append after the reopen is at %+v (%v), want the start of segment 4, made ahead before", p, err)
	}
}

// Appends go to segments, async ones too; a store opened with
// InlineEntries or compression keeps its entries in pebble. A log may hold
// both kinds and reads them in order, whichever way the store was opened.
func TestEntriesInPebbleAndSegmentsReadTogether(t *testing.T) {
	dir := t.TempDir()
	s, pid := openTopic(t, Config{Dir: dir, SegmentSize: 1 << 20}, "mixed")
	var want [][]byte
	for i, d := range []Durability{DurabilitySync, DurabilityAsync, DurabilitySync} {
		want = append(want, appendStamped(t, s, pid, makeEntry(t, fmt.Sprintf("m%d", i), 2, 1000, 1000), d))
	}
	for i, seg := range []bool{true, true, true} {
		if got := storedInSegment(t, s, pid, int64(2*i)); got != seg {
			t.Errorf("entry %d in a segment: %v, want %v", i, got, seg)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []Config{
		{Dir: dir, InlineEntries: true},
		{Dir: dir, Compression: CompressionZstd},
	} {
		s = openTest(t, cfg)
		_, base, err := s.Offsets(pid)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, appendStamped(t, s, pid, makeEntry(t, "inline", 1, 1000, 1000), DurabilitySync))
		if storedInSegment(t, s, pid, base) {
			t.Errorf("with %+v a sync append went to a segment", cfg)
		}
		sameEntries(t, readAll(t, s, pid), want)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// Segments are removed once no partition's retained entries are in them:
// a partition that keeps its entries keeps the segments it shares.
func TestRetentionAndDeletionRemoveSegments(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, Config{Dir: dir, SegmentSize: 1 << 20})
	a, err := s.CreateTopic("a", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.CreateTopic("b", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	pa, pb := a.PIDs[0], b.PIDs[0]
	var keptB [][]byte
	for i := range 24 { // 24 x 250 KiB: 6 MiB in 1 MiB files
		pid := pa
		if i%2 == 1 {
			pid = pb
		}
		e := appendStamped(t, s, pid, makeEntry(t, fmt.Sprintf("r%d", i), 1, 250<<10, 1000), DurabilitySync)
		if pid == pb && i >= 12 {
			keptB = append(keptB, e)
		}
	}
	all := len(segmentFiles(t, dir))
	if all < 6 {
		t.Fatalf("%d segment files for 6 MiB", all)
	}
	// a is emptied, b keeps everything: nothing can go.
	if _, err := s.TruncateBefore(pa, 12); err != nil {
		t.Fatal(err)
	}
	if err := s.collectSegments(); err != nil {
		t.Fatal(err)
	}
	if got := len(segmentFiles(t, dir)); got != all {
		t.Errorf("%d of %d segment files left while b still holds entries in all of them", got, all)
	}
	// b drops its first half: the segments before its first kept entry
	// go, removed in the background after the truncation.
	if _, err := s.TruncateBefore(pb, 6); err != nil {
		t.Fatal(err)
	}
	waitFiles := func(what string, ok func(n int) bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			n := len(segmentFiles(t, dir))
			if ok(n) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d of %d segment files still there after 10s", what, n, all)
			}
		}
	}
	waitFiles("after both partitions dropped their first half", func(n int) bool { return n <= all/2+1 })
	sameEntries(t, readAll(t, s, pb), keptB)
	if err := s.DeleteTopic("b"); err != nil {
		t.Fatal(err)
	}
	// Only the file being written and the next one stay.
	waitFiles("after deleting the topic holding the last entries", func(n int) bool { return n == 2 })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, Config{Dir: dir})
	sameEntries(t, readAll(t, s, pa), nil)
}

// A record that does not hold what its pointer says (damaged, cut short,
// or in a missing file) reads as ErrCorrupt, never as other bytes.
func TestDamagedSegmentIsCorrupt(t *testing.T) {
	for _, damage := range []struct {
		name string
		do   func(t *testing.T, file string)
	}{
		{"flipped byte", func(t *testing.T, file string) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0x40
			if err := os.WriteFile(file, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"cut short", func(t *testing.T, file string) {
			if err := os.Truncate(file, 100); err != nil {
				t.Fatal(err)
			}
		}},
		{"missing", func(t *testing.T, file string) {
			if err := os.Remove(file); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(damage.name, func(t *testing.T) {
			dir := t.TempDir()
			s, pid := openTopic(t, Config{Dir: dir}, "damaged")
			appendStamped(t, s, pid, makeEntry(t, "d", 3, 4000, 1000), DurabilitySync)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			// The first file holds the entry; the second is made ahead.
			files := segmentFiles(t, dir)
			if len(files) != 2 || filepath.Base(files[0]) != segName(1) {
				t.Fatalf("segment files %v", files)
			}
			// The entry's record is all the file holds that was written.
			if damage.name != "missing" {
				if err := os.Truncate(files[0], segRecordHeader+int64(len(makeEntry(t, "d", 3, 4000, 1000)))); err != nil {
					t.Fatal(err)
				}
			}
			damage.do(t, files[0])
			s = openTest(t, Config{Dir: dir})
			_, err := s.Read(pid, 0, 1<<20)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("read of a damaged record: %v, want ErrCorrupt", err)
			}
		})
	}
}

// A part of an entry kept in pebble may be 13 bytes long and read like a
// pointer to a far segment; segment removal must not take it for one (and
// so remove the segments the entries after it are in).
func TestPointerLikePartIsNotAPointer(t *testing.T) {
	dir := t.TempDir()
	s, pid := openTopic(t, Config{Dir: dir, InlineEntries: true, SegmentSize: 1 << 20}, "parts")
	// An entry of entryPartSize+13 bytes whose byte at entryPartSize is
	// the pointer mark: its last part is 13 bytes starting with it.
	want := entryPartSize + segPointerSize
	var e []byte
	for v := want - 200; v < want && len(e) != want; v++ {
		val := make([]byte, v)
		msgs := []protocols.Message{{Timestamp: 1000, Value: val}}
		batch, err := protocols.AppendBatch(nil, protocols.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, msgs, nil)
		if err != nil {
			t.Fatal(err)
		}
		e, err = protocols.AppendEntry(nil, &protocols.Envelope{}, batch)
		if err != nil {
			t.Fatal(err)
		}
		if len(e) == want {
			// The value ends the record but for the headers count (one
			// byte): its last bytes end the entry.
			at := len(val) - (len(e) - entryPartSize) + 1
			val[at] = segPointerMark
			copy(val[at+1:], []byte{0x7f, 0xff, 0xff, 0xff}) // segment 2^31-1
			batch, _ = protocols.AppendBatch(nil, protocols.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, msgs, nil)
			e, _ = protocols.AppendEntry(nil, &protocols.Envelope{}, batch)
		}
	}
	if len(e) != want || e[entryPartSize] != segPointerMark {
		t.Fatalf("could not build the entry: %d bytes, byte %d is %#x", len(e), entryPartSize, e[min(entryPartSize, len(e)-1)])
	}
	inline := appendStamped(t, s, pid, e, DurabilitySync)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, Config{Dir: dir, SegmentSize: 1 << 20})
	v, ok, err := s.Get(entryPartKey(pid, 0, 1))
	if err != nil || !ok || len(v) != segPointerSize || v[0] != segPointerMark {
		t.Fatalf("the last part is %x (%v, %v), want 13 bytes starting with the mark", v, ok, err)
	}
	wantAll := [][]byte{inline}
	for i := range 8 { // 2 MiB in 1 MiB segments, after the inline entry
		wantAll = append(wantAll, appendStamped(t, s, pid, makeEntry(t, fmt.Sprintf("p%d", i), 1, 256<<10, 1000), DurabilitySync))
	}
	before := len(segmentFiles(t, dir))
	if err := s.collectSegments(); err != nil {
		t.Fatal(err)
	}
	if got := len(segmentFiles(t, dir)); got != before {
		t.Errorf("%d of %d segment files left; every one holds retained entries", got, before)
	}
	sameEntries(t, readAll(t, s, pid), wantAll)
}

// After a reopen, writing goes on in the segment the last run made ahead
// only if nothing was written to it: a last segment holding records (the
// run ended before it made the next one) is never written over.
func TestReopenNeverWritesOverRecords(t *testing.T) {
	dir := t.TempDir()
	s, pid := openTopic(t, Config{Dir: dir}, "over")
	want := [][]byte{appendStamped(t, s, pid, makeEntry(t, "first", 2, 500, 1000), DurabilitySync)}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	files := segmentFiles(t, dir)
	if len(files) != 2 {
		t.Fatalf("segment files %v, want the written one and the one made ahead", files)
	}
	if err := os.Remove(files[1]); err != nil { // as if the run ended before making it
		t.Fatal(err)
	}
	s = openTest(t, Config{Dir: dir})
	want = append(want, appendStamped(t, s, pid, makeEntry(t, "second", 1, 500, 1000), DurabilitySync))
	sameEntries(t, readAll(t, s, pid), want)
}

// Removed segments are kept and written again as new ones: writing then
// makes no new file while any is kept, and old records in them are never
// read. One unused for poolIdle goes at the next removal.
func TestRemovedSegmentsAreWrittenAgain(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Dir: dir, SegmentSize: 1 << 20}
	s, pid := openTopic(t, cfg, "again")
	glob := func(pattern string) int {
		names, err := filepath.Glob(filepath.Join(dir, segmentsDir, pattern))
		if err != nil {
			t.Fatal(err)
		}
		return len(names)
	}
	pool := func() int { return glob("*.recycle") }
	fill := func(tag string, n int) (out [][]byte) {
		for i := range n {
			out = append(out, appendStamped(t, s, pid, makeEntry(t, fmt.Sprintf("%s%d", tag, i), 1, 250<<10, 1000), DurabilitySync))
		}
		// The next segment is made ahead in the background, from the
		// pool if it can: wait for it, so the counts below are settled.
		s.segs.mu.Lock()
		for s.segs.preparing {
			s.segs.prepared.Wait()
		}
		s.segs.mu.Unlock()
		return out
	}
	dropAllButLast := func() int {
		t.Helper()
		before := len(segmentFiles(t, dir))
		_, hw, _ := s.Offsets(pid)
		if _, err := s.TruncateBefore(pid, hw-1); err != nil {
			t.Fatal(err)
		}
		if err := s.collectSegments(); err != nil {
			t.Fatal(err)
		}
		return before - len(segmentFiles(t, dir))
	}
	fill("old", 24) // 6 MiB in 1 MiB segments
	removed := dropAllButLast()
	if removed < 4 {
		t.Fatalf("%d segments removed, want 4 or more", removed)
	}
	if got := pool(); got != removed {
		t.Fatalf("%d removed segments kept, want all %d", got, removed)
	}
	if m := s.Metrics(); m.SegmentPoolBytes != uint64(removed)<<20 || m.DiskBytes < m.SegmentPoolBytes {
		t.Errorf("metrics: %d bytes kept for reuse of %d on disk; want %d MiB", m.SegmentPoolBytes, m.DiskBytes, removed)
	}
	files := glob("*")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, cfg)
	want := [][]byte{readAll(t, s, pid)[0]}
	want = append(want, fill("new", 8)...) // 2 MiB: two or three more segments
	if got := glob("*"); got > files {
		t.Errorf("%d files in the segment directory, from %d: new segments were made while removed ones were kept", got, files)
	}
	left := pool()
	if left >= removed || left < removed-3 {
		t.Errorf("%d removed segments kept after two or three new ones were needed, from %d", left, removed)
	}
	sameEntries(t, readAll(t, s, pid), want)

	// Kept long enough unused: the next removal keeps what it removes
	// itself, and removes the idle ones beyond poolMin in all.
	s.segs.poolMu.Lock()
	for i := range s.segs.pool {
		s.segs.pool[i].at = time.Now().Add(-poolIdle - time.Minute)
	}
	s.segs.poolMu.Unlock()
	again := dropAllButLast()
	if got, want := pool(), max(poolMin, again); got != want {
		t.Errorf("%d removed segments kept; want %d: the %d just removed, and of the %d idle ones what makes %d", got, want, again, left, poolMin)
	}
}

// Segments are written in the order of their numbers, which removal and
// each partition's first segment rely on, even when a move to the next
// segment comes while that segment is still being made.
func TestSegmentsAreWrittenInNumberOrder(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { prepareHook = nil }) // after the store's close
	prepareHook = func(n uint32) {
		if n == 3 {
			<-release // segment 3 takes its time to be made
		}
	}
	s, pid := openTopic(t, Config{Dir: t.TempDir(), SegmentSize: 1 << 20}, "order")
	released := false
	t.Cleanup(func() { // before the store's close, which waits for segment 3
		if !released {
			close(release)
		}
	})
	big := func(tag string) []byte { return makeEntry(t, tag, 1, 1500<<10, 1000) }
	appendStamped(t, s, pid, big("a"), DurabilitySync)                       // segment 1, alone
	appendStamped(t, s, pid, makeEntry(t, "b", 1, 10, 1000), DurabilitySync) // segment 2; 3 is being made
	done := make(chan struct{})
	go func() {
		defer close(done)
		appendStamped(t, s, pid, big("c"), DurabilitySync) // needs segment 3
	}()
	select {
	case <-done:
		t.Fatal("an append needing the next segment went on while it was being made: it wrote to a later one")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	released = true
	<-done
	for i := range 3 {
		appendStamped(t, s, pid, big(fmt.Sprintf("d%d", i)), DurabilitySync)
	}
	_, hw, err := s.Offsets(pid)
	if err != nil {
		t.Fatal(err)
	}
	last := uint32(0)
	for off := range hw {
		v, _, err := s.Get(logKey(kindEntry, pid, off))
		p, ok := decodeSegPointer(v)
		if err != nil || !ok {
			t.Fatalf("entry %d: no segment pointer (%v)", off, err)
		}
		if p.Seg != last+1 {
			t.Errorf("entry %d is in segment %d after segment %d; want each in the next", off, p.Seg, last)
		}
		last = p.Seg
	}
}

// TestReadTakesARunInOneRead: the records of entries written one after
// another are read with one read of the segment, while a read of entries
// whose records another partition's interleave takes one per entry; both
// return every entry intact, also from inside the first entry, and a
// damaged record in a run reads as ErrCorrupt.
func TestReadTakesARunInOneRead(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, Config{Dir: dir})
	tm, err := s.CreateTopic("runs", 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	pa, pb := tm.PIDs[0], tm.PIDs[1]
	var wantA, wantB [][]byte
	for i := range 50 {
		wantA = append(wantA, appendStamped(t, s, pa, makeEntry(t, fmt.Sprint("a", i), 2, 300, 1000), DurabilitySync))
	}
	for i := range 20 {
		wantA = append(wantA, appendStamped(t, s, pa, makeEntry(t, fmt.Sprint("a", 50+i), 2, 300, 1000), DurabilitySync))
		wantB = append(wantB, appendStamped(t, s, pb, makeEntry(t, fmt.Sprint("b", i), 2, 300, 1000), DurabilitySync))
	}
	read := func(pid PartitionID, from int64, max int) ([]Entry, int64) {
		t.Helper()
		before := s.segs.spanReads.Load()
		es, _, err := s.ReadInto(pid, from, max, make([]byte, 0, 1<<20))
		if err != nil {
			t.Fatal(err)
		}
		return es, s.segs.spanReads.Load() - before
	}
	check := func(es []Entry, want [][]byte) {
		t.Helper()
		if len(es) != len(want) {
			t.Fatalf("read %d entries, want %d", len(es), len(want))
		}
		for i := range es {
			if !bytes.Equal(es[i].Value, want[i]) {
				t.Fatalf("entry %d differs", i)
			}
		}
	}
	// a's first 51 records are one run (b's first comes after a's 51st);
	// the 19 after it alternate with b's.
	es, n := read(pa, 0, 1<<20)
	check(es, wantA)
	if n != 1+19 {
		t.Errorf("read of 70 entries, 51 of them in a row: %d reads of the segment, want 20", n)
	}
	es, n = read(pb, 0, 1<<20)
	check(es, wantB)
	if n != 20 {
		t.Errorf("read of 20 interleaved entries: %d reads, want 20", n)
	}
	// From inside the first entry (offset 1 of its 2): it comes first,
	// read alone to see where it ends, then the rest of the run at once.
	es, n = read(pa, 1, 1<<20)
	check(es, wantA)
	if n != 1+1+19 {
		t.Errorf("read from inside the first entry: %d reads, want 21", n)
	}
	// From the second entry on: the first is not returned.
	es, _ = read(pa, 2, 1<<20)
	check(es, wantA[1:])
	// A limit stops the run where it would pass it, after one entry at least.
	es, n = read(pa, 0, 1)
	check(es, wantA[:1])
	if n != 1 {
		t.Errorf("read of one entry: %d reads", n)
	}
	es, _ = read(pa, 0, 3*len(wantA[0])+1)
	check(es, wantA[:3])

	// Damage the 30th record of the run: the read fails as corrupt.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	files := segmentFiles(t, dir)
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	at := 29*(segRecordHeader+len(wantA[0])) + segRecordHeader + len(wantA[0])/2
	b[at] ^= 0x40
	if err := os.WriteFile(files[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, Config{Dir: dir})
	if es, err := s.Read(pa, 0, 1<<20); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read of a run with a damaged record: %d entries, %v; want ErrCorrupt", len(es), err)
	}
}

// failCreateFS refuses to create segment files while fail is set, as a
// full disk or a removed data directory does.
type failCreateFS struct {
	vfs.FS
	fail *atomic.Bool
}

func (fs failCreateFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if fs.fail.Load() && strings.HasSuffix(name, ".seg") {
		return nil, errors.New("no space left on device")
	}
	return fs.FS.Create(name, c)
}

// Appends that need a new segment file fail, saying why, while none can
// be made, and the node says so in its log once rather than per append;
// they succeed again once files can be made.
func TestAppendsFailAndLogWhileSegmentsCannotBeMade(t *testing.T) {
	var fail atomic.Bool
	var logs logbuf.Buffer
	cfg := memConfig(failCreateFS{FS: vfs.NewMem(), fail: &fail})
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	s, pid := openTopic(t, cfg, "full")
	entry := func(i int) []byte { return makeEntry(t, fmt.Sprint("e", i), 1, 100<<10, int64(i)) }
	for i := range 5 {
		appendStamped(t, s, pid, entry(i), DurabilitySync)
	}
	fail.Store(true)
	var failed int
	var last error
	for i := 5; i < 60; i++ {
		if _, err := s.Append(context.Background(), pid, AppendRequest{Entry: entry(i)}); err != nil {
			failed++
			last = err
		}
	}
	// 1 MiB segments hold nine of these; the one made ahead of need
	// takes a few more.
	if failed < 30 || !strings.Contains(last.Error(), "new segment") || !strings.Contains(last.Error(), "no space left") {
		t.Fatalf("%d of 55 appends failed while no segment could be made, the last with %v", failed, last)
	}
	if n := strings.Count(logs.String(), "appends are failing: cannot make a new segment file"); n != 1 {
		t.Fatalf("%d failed appends logged %d lines, want 1:\n%s", failed, n, logs.String())
	}
	fail.Store(false)
	if _, err := s.Append(context.Background(), pid, AppendRequest{Entry: entry(60)}); err != nil {
		t.Fatalf("an append once segments can be made again: %v", err)
	}
}
