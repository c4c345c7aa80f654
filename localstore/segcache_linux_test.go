package localstore

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// resident counts the pages of the file at path that are in the page
// cache, and its pages in all.
func resident(t *testing.T, path string) (in, all int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() == 0 {
		return 0, 0
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (fi.Size()+pageSize-1)/pageSize)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	for _, v := range vec {
		if v&1 != 0 {
			in++
		}
	}
	return in, len(vec)
}

// diskDir is a test directory on a file system that drops pages and reads
// past its cache; the test is skipped on tmpfs, which does neither.
func diskDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type == unix.TMPFS_MAGIC {
		t.Skip("the test directory is on tmpfs, whose pages are its data: never dropped, and no O_DIRECT")
	}
	return dir
}

// oddEntries fills a store with a 256 KiB page cache with 48 entries of
// 1-5 messages of 3-63 KiB and odd lengths, across about five 1 MiB
// segments, and returns it, its directory and the entries.
func oddEntries(t *testing.T) (*Store, string, PartitionID, [][]byte) {
	dir := diskDir(t)
	s, pid := openTopic(t, Config{Dir: dir, SegmentSize: 1 << 20, SegmentCache: 256 << 10}, "odd")
	var want [][]byte
	for i := range 48 {
		e := makeEntry(t, fmt.Sprintf("o%d", i), 1+i%5, (3+i*7919%61)<<10+i*13, 1000)
		want = append(want, appendStamped(t, s, pid, e, DurabilitySync))
	}
	return s, dir, pid, want
}

// writtenSegments fills a store with cache bytes of page cache with
// entries across several 1 MiB segments and returns it, its directory and
// the entries.
func writtenSegments(t *testing.T, cache int64) (*Store, string, PartitionID, [][]byte) {
	dir := diskDir(t)
	s, pid := openTopic(t, Config{Dir: dir, SegmentSize: 1 << 20, SegmentCache: cache}, "cache")
	var want [][]byte
	for i := range 40 { // 40 x 128 KiB: five segments
		want = append(want, appendStamped(t, s, pid, makeEntry(t, fmt.Sprintf("c%d", i), 1, 128<<10, 1000), DurabilitySync))
	}
	return s, dir, pid, want
}

// Pages of durable segment data more than SegmentCache behind the newest
// are dropped from the page cache; newer ones stay; and the dropped are
// read from the disk as they were written.
func TestSegmentCacheDropsOldPages(t *testing.T) {
	s, dir, pid, want := writtenSegments(t, 1<<20)
	first := filepath.Join(dir, segmentsDir, segName(1))
	var in, all int
	var m Metrics
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		// Dropping runs beside the committer, after its syncs.
		in, all = resident(t, first)
		m = s.Metrics()
		if in == 0 && m.SegmentBytesWritten-m.SegmentCacheDropped <= 2<<20 || time.Now().After(deadline) {
			break
		}
	}
	if in != 0 {
		t.Errorf("segment 1, about 4 MiB behind the newest data with a 1 MiB cache, has %d of its %d pages cached", in, all)
	}
	// The newest 1 MiB stays cached, and little more.
	total := 0
	for _, f := range segmentFiles(t, dir) {
		in, _ := resident(t, f)
		total += in
	}
	if min, max := int((1<<20)*3/4/pageSize), int((2<<20)/pageSize); total < min || total > max {
		t.Errorf("%d segment pages cached in all; want the newest 1 MiB's, %d to %d", total, min, max)
	}
	if behind := m.SegmentBytesWritten - m.SegmentCacheDropped; m.SegmentCacheDropped <= 0 || behind < 1<<20 || behind > 2<<20 {
		t.Errorf("metrics: %d of %d bytes written dropped; want all but the newest 1 MiB or so", m.SegmentCacheDropped, m.SegmentBytesWritten)
	}
	sameEntries(t, readAll(t, s, pid), want)
}

// With SegmentCache 0 nothing is dropped: the kernel decides.
func TestSegmentCacheZeroKeepsPages(t *testing.T) {
	_, dir, _, _ := writtenSegments(t, 0)
	time.Sleep(100 * time.Millisecond)
	first := filepath.Join(dir, segmentsDir, segName(1))
	if in, all := resident(t, first); in < all/2 {
		t.Errorf("segment 1 has %d of its %d pages cached with no cache bound; nothing should drop them", in, all)
	}
}

// cachedPages counts the segment pages in the page cache under dir.
func cachedPages(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	for _, f := range segmentFiles(t, dir) {
		in, _ := resident(t, f)
		n += in
	}
	return n
}

// droppedAll waits until every page of segment 1 is out of the cache.
func droppedAll(t *testing.T, dir string) {
	t.Helper()
	waitDropped(t, filepath.Join(dir, segmentsDir, segName(1)), "segment 1", nil)
}

// waitDropped waits up to five seconds until no page of the file at path
// is cached, calling meanwhile (if set) between looks; what names the
// file in the failure.
func waitDropped(t *testing.T, path, what string, meanwhile func()) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		in, all := resident(t, path)
		if in == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still has %d of its %d pages cached", what, in, all)
		}
		if meanwhile != nil {
			meanwhile()
		}
	}
}

// Bytes whose pages were dropped are read past the page cache: reading the
// whole log back returns every entry as written, counts the bytes read
// that way, and leaves the dropped segments' pages uncached (read through
// the cache, each would be a new page again).
func TestDroppedBytesReadPastTheCache(t *testing.T) {
	s, dir, pid, want := writtenSegments(t, 1<<20)
	droppedAll(t, dir)
	before := cachedPages(t, dir)
	sameEntries(t, readAll(t, s, pid), want)
	m := s.Metrics()
	if m.SegmentDirectReadBytes < 3<<20 {
		t.Errorf("%d bytes read past the cache; want the 4 MiB or so dropped", m.SegmentDirectReadBytes)
	}
	first := filepath.Join(dir, segmentsDir, segName(1))
	if in, all := resident(t, first); in != 0 {
		t.Errorf("reading segment 1 back put %d of its %d pages in the cache", in, all)
	}
	if after := cachedPages(t, dir); after > before+2 {
		t.Errorf("%d segment pages cached after reading the log, %d before: the dropped part was read through the cache", after, before)
	}
}

// A read past the cache starts and ends anywhere in a page: records of
// every length, read from each entry and from inside entries, with one
// entry or many at a time, are the ones written; so are single entries
// too small to bypass the cache.
func TestDirectReadsAtAnyOffset(t *testing.T) {
	t.Run("whole", readsAtAnyOffset)
	// Reads of more than a piece go in pieces, whose ends fall anywhere
	// in a record, read by several readers at once.
	defer func(n, k int) { pieceSize, pieceReaders = n, k }(pieceSize, pieceReaders)
	pieceSize = 3 * int(pageSize)
	t.Run("in pieces", readsAtAnyOffset)
	pieceReaders = 3
	t.Run("in pieces, three readers", readsAtAnyOffset)
	pieceReaders = 1
	t.Run("in pieces, one reader", readsAtAnyOffset)
}

func readsAtAnyOffset(t *testing.T) {
	s, dir, pid, want := oddEntries(t)
	droppedAll(t, dir)
	sameEntries(t, readAll(t, s, pid), want)
	start, hw, err := s.Offsets(pid)
	if err != nil {
		t.Fatal(err)
	}
	for from := start; from < hw; from += 2 {
		for _, limit := range []int{1, 200 << 10, 1 << 20} {
			es, err := s.Read(pid, from, limit)
			if err != nil {
				t.Fatalf("read at %d, at most %d bytes: %v", from, limit, err)
			}
			if len(es) == 0 || es[0].BaseOffset > from || from >= es[0].BaseOffset+es[0].Count {
				t.Fatalf("read at %d: the first entry returned does not hold it", from)
			}
			for _, e := range es {
				i := slices.IndexFunc(want, func(w []byte) bool { return bytes.Equal(w, e.Value) })
				if i < 0 {
					t.Fatalf("read at %d, at most %d bytes: entry at %d is not one appended", from, limit, e.BaseOffset)
				}
			}
		}
	}
	if m := s.Metrics(); m.SegmentDirectReadBytes == 0 {
		t.Error("no byte was read past the cache")
	}
	if n := s.segs.pieceReads.Load(); (n > 0) != (pieceSize < 1<<20) {
		t.Errorf("%d reads in pieces of %d bytes", n, pieceSize)
	}
}

// A read past the cache in pieces checks every record it returns, in the
// first piece or a later one, whole in a piece or across several: a byte
// flipped in any of them is ErrCorrupt, named by the entry's offset.
func TestReadsInPiecesCheckEveryRecord(t *testing.T) {
	defer func(n int) { pieceSize = n }(pieceSize)
	pieceSize = 4 * int(pageSize) // a 128 KiB entry's record spans 9 pieces
	for _, c := range []struct {
		name  string
		entry int // the entry damaged, of the 7 in segment 1
		at    func(n int) int
	}{
		{"first entry, first piece", 0, func(int) int { return 100 }},
		{"later entry, its last piece", 5, func(n int) int { return n - 3 }},
		{"later entry, a middle piece", 3, func(n int) int { return n / 2 }},
		{"last entry, its header", 6, func(int) int { return -segRecordHeader + 1 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, pid, want := damagedSegments(t, c.entry, c.at)
			// Segments of the run before a reopen are read past the cache.
			s := openTest(t, Config{Dir: dir, SegmentSize: 1 << 20, SegmentCache: 1 << 20})
			es, err := s.Read(pid, 0, 1<<20)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("offset %d:", c.entry)) {
				t.Fatalf("read of a damaged record: %d entries, %v; want ErrCorrupt at offset %d", len(es), err, c.entry)
			}
			if s.segs.pieceReads.Load() == 0 {
				t.Fatal("the damaged record was not read in pieces")
			}
			// The records after the damaged one read as written.
			es, err = s.Read(pid, int64(c.entry+1), 1<<20)
			if err != nil || len(es) == 0 || !bytes.Equal(es[0].Value, want[c.entry+1]) {
				t.Fatalf("read after the damaged record: %d entries, %v", len(es), err)
			}
		})
	}
}

// damagedSegments writes segments as writtenSegments does, closes the
// store and flips a bit of entry (of the 7 in segment 1) at at(its
// length) bytes into its value.
func damagedSegments(t *testing.T, entry int, at func(n int) int) (dir string, pid PartitionID, want [][]byte) {
	t.Helper()
	s, dir, pid, want := writtenSegments(t, 1<<20)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, segmentsDir, segName(1))
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, want[entry])
	if i < 0 {
		t.Fatalf("entry %d is not in segment 1", entry)
	}
	b[i+at(len(want[entry]))] ^= 0x10
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, pid, want
}

// A bad first record stops the readers: the pieces after it are not read.
// (Each read after the first is slowed, so that a reader which went on
// would read most of the run before the check is done.)
func TestBadRecordStopsTheReaders(t *testing.T) {
	defer func(n int, f func(int, []byte, int64) (int, error)) { pieceSize, directRead = n, f }(pieceSize, directRead)
	pieceSize = 4 * int(pageSize)
	dir, pid, _ := damagedSegments(t, 0, func(int) int { return 100 })
	var reads atomic.Int64
	directRead = func(fd int, b []byte, off int64) (int, error) {
		if reads.Add(1) > 1 {
			time.Sleep(20 * time.Millisecond)
		}
		return preadDirect(fd, b, off)
	}
	s := openTest(t, Config{Dir: dir, SegmentSize: 1 << 20, SegmentCache: 1 << 20})
	reads.Store(0) // opening read the segments' tails
	if _, err := s.Read(pid, 0, 1<<20); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read of a damaged record: %v; want ErrCorrupt", err)
	}
	if s.segs.pieceReads.Load() == 0 {
		t.Fatal("the damaged record was not read in pieces")
	}
	// The run is the 1 MiB segment, 64 pieces. The damaged record's check
	// needs the pieces up to its end (9 here); readers run a few pieces
	// ahead of the check. Without the stop they read all 64, however slow.
	most := (1 << 20) / pieceSize / 2
	if n := reads.Load(); n > int64(most) {
		t.Errorf("%d pieces read for a run whose first record is bad; want at most %d: the bad record's own and a few ahead", n, most)
	}
}

// After a reopen, the segments of the run before are read past the cache,
// and the new run's writes go on into the spare segment, which is not.
func TestReopenedSegmentsReadPastTheCache(t *testing.T) {
	s, dir, pid, want := writtenSegments(t, 1<<20)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, Config{Dir: dir, SegmentSize: 1 << 20, SegmentCache: 1 << 20})
	sameEntries(t, readAll(t, s, pid), want)
	old := s.Metrics().SegmentDirectReadBytes
	if old < 4<<20 {
		t.Errorf("%d bytes read past the cache after a reopen; want the whole 5 MiB log or so", old)
	}
	more := appendStamped(t, s, pid, makeEntry(t, "after", 1, 128<<10, 2000), DurabilitySync)
	sameEntries(t, readAll(t, s, pid), append(want, more))
	if got := s.Metrics().SegmentDirectReadBytes - old; got != old {
		t.Errorf("reading the log again took %d bytes past the cache, the first time %d: the entry written after the reopen should have been read through it", got, old)
	}
}

// Entries that do not end on folio boundaries still have every page
// behind the bound dropped: the kernel drops only folios a range covers
// whole, so ranges that started where the last one ended left a folio
// across each boundary cached (68 of segment 1's 256 pages here).
func TestOddEntriesDropWholeFolios(t *testing.T) {
	_, dir, _, _ := oddEntries(t)
	files := segmentFiles(t, dir)
	if len(files) < 5 {
		t.Fatalf("%d segments written; the test wants at least 5", len(files))
	}
	old := files[:len(files)-3] // the newest 256 KiB is in the last three at most
	var cached []int
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		cached = cached[:0]
		sum := 0
		for _, f := range old {
			in, _ := resident(t, f)
			cached = append(cached, in)
			sum += in
		}
		if sum == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pages still cached in the %d oldest segments, all more than 256 KiB behind the newest: %v", len(old), cached)
		}
	}
}

// A reader a little behind keeps what it has yet to read in the page
// cache, up to readerCacheFactor times SegmentCache behind the newest; a
// reader gone for two read windows keeps nothing.
func TestSegmentCacheKeepsWhatAReaderTrails(t *testing.T) {
	dir := diskDir(t)
	const cache = 1 << 20
	s, pid := openTopic(t, Config{Dir: dir, SegmentSize: 1 << 20, SegmentCache: cache}, "trail")
	first := filepath.Join(dir, segmentsDir, segName(1))
	start, _, err := s.Offsets(pid)
	if err != nil {
		t.Fatal(err)
	}
	// readFirst reads the log's first entry, in segment 1, as a consumer
	// that has not got further does.
	readFirst := func() {
		t.Helper()
		if es, err := s.Read(pid, start, 200<<10); err != nil || len(es) == 0 {
			t.Fatalf("read at %d: %d entries, %v", start, len(es), err)
		}
	}
	write := func(n, from int) {
		t.Helper()
		for i := range n {
			appendStamped(t, s, pid, makeEntry(t, fmt.Sprintf("t%d", from+i), 1, 128<<10, 1000), DurabilitySync)
			readFirst()
		}
	}
	write(24, 0) // 3 MiB: segment 1 is 2 MiB past the cache, within what a reader keeps
	time.Sleep(50 * time.Millisecond)
	if in, all := resident(t, first); in < all/2 {
		t.Errorf("segment 1, which a reader is reading 3 MiB behind the newest, has %d of its %d pages cached; want them kept", in, all)
	}
	write(24, 24) // 6 MiB: segment 1 is past readerCacheFactor times the cache
	waitDropped(t, first, "segment 1, 6 MiB behind the newest with a 1 MiB cache and a reader in it,", readFirst)
	// The reader stops. Once its reads are two windows old, the next sync
	// drops everything more than the cache behind the newest.
	second := filepath.Join(dir, segmentsDir, segName(3))
	if in, _ := resident(t, second); in == 0 {
		t.Fatal("segment 3, within 4 MiB of the newest with a reader behind it, has no page cached")
	}
	time.Sleep(2*readWindow + 100*time.Millisecond)
	appendStamped(t, s, pid, makeEntry(t, "last", 1, 128<<10, 1000), DurabilitySync)
	waitDropped(t, second, "segment 3, about 3 MiB behind the newest and no longer read,", nil)
}

// A read past the cache in pieces has pieceReaders pieces read at once:
// the first piece's read waits for a second one to start, which happens
// only if the two are read at the same time.
func TestReadsInPiecesOverlap(t *testing.T) {
	defer func(n int, f func(int, []byte, int64) (int, error)) { pieceSize, directRead = n, f }(pieceSize, directRead)
	pieceSize = 4 * int(pageSize)
	s, dir, pid, want := writtenSegments(t, 1<<20)
	droppedAll(t, dir)
	var (
		mu             sync.Mutex
		inflight, most int
		started        bool // the first read has started
		overlap        int
	)
	second := make(chan struct{})
	var once sync.Once
	directRead = func(fd int, b []byte, off int64) (int, error) {
		mu.Lock()
		inflight++
		most = max(most, inflight)
		first := !started
		if first {
			started = true
		} else {
			once.Do(func() { close(second) })
		}
		mu.Unlock()
		if first {
			select {
			case <-second:
				mu.Lock()
				overlap++
				mu.Unlock()
			case <-time.After(5 * time.Second):
			}
		}
		n, err := preadDirect(fd, b, off)
		mu.Lock()
		inflight--
		mu.Unlock()
		return n, err
	}
	before := s.segs.pieceReads.Load()
	sameEntries(t, readAll(t, s, pid), want)
	if s.segs.pieceReads.Load() == before {
		t.Fatal("nothing was read in pieces")
	}
	mu.Lock()
	defer mu.Unlock()
	if overlap != 1 || most < 2 {
		t.Errorf("pieces read one at a time: the first piece's read saw %d others start, at most %d reads at once", overlap, most)
	}
}

// A read past the cache that fails, or ends short, in any piece is read
// again through the cache: the reader gets the entries as written. (A
// real error, such as a missing file, is reported by that read.)
func TestFailedReadsInPiecesReadThroughTheCache(t *testing.T) {
	defer func(n int, f func(int, []byte, int64) (int, error)) { pieceSize, directRead = n, f }(pieceSize, directRead)
	pieceSize = 4 * int(pageSize)
	s, dir, pid, want := writtenSegments(t, 1<<20)
	droppedAll(t, dir)
	var calls atomic.Int64
	for _, fail := range []func(fd int, b []byte, off int64) (int, error){
		func(int, []byte, int64) (int, error) { return 0, unix.EIO },
		func(fd int, b []byte, off int64) (int, error) {
			// Short: what the buffer held before stays past the end.
			n, err := preadDirect(fd, b[:len(b)/2], off)
			for i := n; i < len(b); i++ {
				b[i] = 0xa5
			}
			return n, err
		},
	} {
		calls.Store(0)
		directRead = func(fd int, b []byte, off int64) (int, error) {
			if calls.Add(1)%3 == 0 { // every third piece
				return fail(fd, b, off)
			}
			return preadDirect(fd, b, off)
		}
		before := s.segs.pieceReads.Load()
		sameEntries(t, readAll(t, s, pid), want)
		if s.segs.pieceReads.Load() == before || calls.Load() < 3 {
			t.Fatalf("%d reads in pieces, %d pieces: no piece failed", s.segs.pieceReads.Load()-before, calls.Load())
		}
	}
}
