package localstore

import (
	"bytes"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// writeCountFS counts the writes to the files it makes, and fails them
// while fail is set.
type writeCountFS struct {
	vfs.FS
	writes atomic.Int64
	fail   atomic.Bool
}

type writeCountFile struct {
	vfs.File
	fs *writeCountFS
}

var errInjected = errors.New("injected write error")

func (f writeCountFile) WriteAt(b []byte, off int64) (int, error) {
	if f.fs.fail.Load() {
		return 0, errInjected
	}
	f.fs.writes.Add(1)
	return f.File.WriteAt(b, off)
}

func (fs *writeCountFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	if err != nil {
		return nil, err
	}
	return writeCountFile{f, fs}, nil
}

func openCountedSegments(t *testing.T, size int64) (*segments, *writeCountFS) {
	t.Helper()
	fs := &writeCountFS{FS: vfs.NewMem()}
	if err := fs.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	sg, err := openSegments(fs, "/d", size, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sg.close() })
	return sg, fs
}

// recordOf returns n bytes that say which record they are.
func recordOf(i, n int) []byte {
	b := bytes.Repeat([]byte{byte(i)}, n)
	copy(b, fmt.Sprintf("record %d|", i))
	return b
}

// readBack reads each pointer's record and compares it with want.
func readBack(t *testing.T, sg *segments, ptrs []segPointer, want [][]byte) {
	t.Helper()
	for i, p := range ptrs {
		buf, at, err := sg.read(p, nil)
		if err != nil {
			t.Fatalf("record %d at %+v: %v", i, p, err)
		}
		if !bytes.Equal(buf[at:], want[i]) {
			t.Fatalf("record %d at %+v reads back different bytes", i, p)
		}
	}
}

// TestSmallRecordsReachTheFileTogether: small records are written to the
// segment in one write at the sync, a large one at once behind them, and
// records gathered when a segment fills are written to it before the next
// one starts; every record reads back after the sync.
func TestSmallRecordsReachTheFileTogether(t *testing.T) {
	sg, fs := openCountedSegments(t, 64<<10)
	var ptrs []segPointer
	var want [][]byte
	write := func(i, n int) {
		t.Helper()
		e := recordOf(i, n)
		// Written as two parts, split somewhere else each time, as an
		// envelope and the batch behind it are.
		k := (i * 37) % (len(e) + 1)
		p, err := sg.write(e[:k], e[k:])
		if err != nil {
			t.Fatal(err)
		}
		ptrs, want = append(ptrs, p), append(want, e)
	}
	for i := range 20 {
		write(i, 200)
	}
	if n := fs.writes.Load(); n != 0 {
		t.Fatalf("%d writes before the sync; want the 20 small records gathered", n)
	}
	if err := sg.sync(); err != nil {
		t.Fatal(err)
	}
	// The mem FS has no descriptor, so the records and the padding are
	// one WriteAt each instead of one pwritev.
	if n := fs.writes.Load(); n != 2 {
		t.Fatalf("%d writes for 20 small records; want the records and their padding", n)
	}
	readBack(t, sg, ptrs, want)

	write(20, 100)
	write(21, 20<<10) // larger than bufferedRecord: written at once, behind #20
	if n := fs.writes.Load(); n != 2+5 {
		t.Fatalf("%d writes after a large record; want 5 more (gathered, header, the entry's two parts, padding)", n-2)
	}
	// 80 records of 1000 bytes fill this 64 KiB segment and the next.
	for i := 22; i < 102; i++ {
		write(i, 1000)
	}
	if err := sg.sync(); err != nil {
		t.Fatal(err)
	}
	if ptrs[len(ptrs)-1].Seg == ptrs[0].Seg {
		t.Fatal("the records stayed in one segment; the test wants them to cross into the next")
	}
	readBack(t, sg, ptrs, want)
}

// TestFailedGatheredWriteFailsEverySync: a failed write of gathered
// records fails the sync that was to make them durable and every sync
// after it, since the records' writers were told they were written.
func TestFailedGatheredWriteFailsEverySync(t *testing.T) {
	sg, fs := openCountedSegments(t, 1<<20)
	for i := range 3 {
		if _, err := sg.write(recordOf(i, 100), nil); err != nil {
			t.Fatal(err)
		}
	}
	fs.fail.Store(true)
	if err := sg.sync(); !errors.Is(err, errInjected) {
		t.Fatalf("sync after a failed write: %v; want the write's error", err)
	}
	fs.fail.Store(false)
	if _, err := sg.write(recordOf(3, 100), nil); err != nil {
		t.Fatal(err)
	}
	if err := sg.sync(); !errors.Is(err, errInjected) {
		t.Fatalf("a later sync: %v; want the first failed write's error still", err)
	}
}
