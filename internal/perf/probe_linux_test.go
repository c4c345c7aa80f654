package perf

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// notTmpfs is a test directory, the test skipped (saying why) when it is
// on tmpfs.
func notTmpfs(t *testing.T, why string) string {
	t.Helper()
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type == unix.TMPFS_MAGIC {
		t.Skip("the test directory is on tmpfs, " + why)
	}
	return dir
}

// TestPIDProbeCountsDiskReads probes this process while it reads a file
// whose pages were dropped from the page cache: the probe's disk reads
// grow by at least the file's size, and its RSS and CPU time are there.
func TestPIDProbeCountsDiskReads(t *testing.T) {
	dir := notTmpfs(t, "whose reads never reach a disk")
	probe := PIDProbe(os.Getpid())
	before, err := probe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if before.DiskRead < 0 {
		t.Skip("this kernel does not let the process read its /proc/pid/io")
	}
	if before.RSS <= 0 || before.CPUSeconds < 0 {
		t.Fatalf("probe of this process: RSS %d, CPU %v s", before.RSS, before.CPUSeconds)
	}
	const size = 8 << 20
	path := filepath.Join(dir, "cold")
	if err := os.WriteFile(path, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, size)
	if _, err := f.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	after, err := probe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := after.DiskRead - before.DiskRead; got < size {
		t.Errorf("disk reads grew by %d bytes while reading a %d-byte file out of the page cache", got, size)
	}
}

// TestDiskProbeDropsPagesBehindTheWriter writes 20 MiB through the probe's
// writer bookkeeping with a 4 MiB cache: the pages of all but the newest
// bytes are dropped, dropChunk at a time, and with no cache none are.
func TestDiskProbeDropsPagesBehindTheWriter(t *testing.T) {
	dir := notTmpfs(t, "whose pages are its data and are never dropped")
	const step, total = 1 << 20, 20 << 20
	for _, tc := range []struct {
		cache    int64
		firstIn  int64 // the first byte whose page should stay cached
		describe string
	}{
		// Drops happen once 8 MiB are over the cache: at 12 MiB and at
		// 20 MiB, leaving the newest 4.
		{4 << 20, 16 << 20, "4 MiB cache"},
		{0, 0, "no cache"},
	} {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("log-%d", tc.cache)))
		if err != nil {
			t.Fatal(err)
		}
		r := &diskRun{cfg: DiskConfig{Cache: tc.cache}}
		buf := make([]byte, step)
		for off := int64(0); off < total; off += step {
			if _, err := f.WriteAt(buf, off); err != nil {
				t.Fatal(err)
			}
			if err := fdatasync(f); err != nil {
				t.Fatal(err)
			}
			r.keep(f, off, step)
		}
		m, err := unix.Mmap(int(f.Fd()), 0, total, unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		vec := make([]byte, total/os.Getpagesize())
		if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
			t.Fatal(e)
		}
		_ = unix.Munmap(m)
		_ = f.Close()
		first := tc.firstIn / int64(os.Getpagesize())
		var wrongOut, wrongIn int
		for i, v := range vec {
			switch in := v&1 != 0; {
			case int64(i) < first && in:
				wrongIn++
			case int64(i) >= first && !in:
				wrongOut++
			}
		}
		if wrongIn > 0 || wrongOut > 0 {
			t.Errorf("%s: %d pages before byte %d still cached, %d from it dropped", tc.describe, wrongIn, tc.firstIn, wrongOut)
		}
		if want := total - tc.firstIn; tc.cache > 0 && r.keptBytes != want {
			t.Errorf("%s: %d bytes kept, want %d", tc.describe, r.keptBytes, want)
		}
	}
}

// TestPIDProbeAnonymousMemory probes this process before and after it
// touches 32 MiB it allocated: the anonymous part of its resident set is
// given, within RSS, and grows by about what was touched.
func TestPIDProbeAnonymousMemory(t *testing.T) {
	probe := PIDProbe(os.Getpid())
	before, err := probe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if before.Anon <= 0 || before.Anon > before.RSS {
		t.Fatalf("anonymous memory %d bytes of an RSS of %d; want some, within it", before.Anon, before.RSS)
	}
	const size = 32 << 20
	b := make([]byte, size)
	for i := 0; i < size; i += 4096 {
		b[i] = 1
	}
	after, err := probe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := after.Anon - before.Anon; got < size/2 {
		t.Errorf("anonymous memory grew by %d bytes while touching %d", got, size)
	}
	if after.Anon > after.RSS {
		t.Errorf("anonymous memory %d bytes over an RSS of %d", after.Anon, after.RSS)
	}
	_ = b[size-1]
}
