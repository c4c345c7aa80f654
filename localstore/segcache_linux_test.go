package localstore

import (
	"fmt"
	"os"
	"path/filepath"
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

// writtenSegments fills a store with cache bytes of page cache with
// entries across several 1 MiB segments and returns it, its directory and
// the entries.
func writtenSegments(t *testing.T, cache int64) (*Store, string, PartitionID, [][]byte) {
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type == unix.TMPFS_MAGIC {
		t.Skip("the test directory is on tmpfs, whose pages are its data and are never dropped")
	}
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

// Entries that do not end on folio boundaries still have every page
// behind the bound dropped: the kernel drops only folios a range covers
// whole, so ranges that started where the last one ended left a folio
// across each boundary cached (68 of segment 1's 256 pages here).
func TestOddEntriesDropWholeFolios(t *testing.T) {
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type == unix.TMPFS_MAGIC {
		t.Skip("the test directory is on tmpfs, whose pages are its data and are never dropped")
	}
	s, pid := openTopic(t, Config{Dir: dir, SegmentSize: 1 << 20, SegmentCache: 256 << 10}, "odd")
	for i := range 48 {
		appendStamped(t, s, pid, makeEntry(t, fmt.Sprintf("o%d", i), 1+i%5, (3+i*7919%61)<<10+i*13, 1000), DurabilitySync)
	}
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
