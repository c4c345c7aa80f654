package perf

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPIDProbeCountsDiskReads probes this process while it reads a file
// whose pages were dropped from the page cache: the probe's disk reads
// grow by at least the file's size, and its RSS and CPU time are there.
func TestPIDProbeCountsDiskReads(t *testing.T) {
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type == unix.TMPFS_MAGIC {
		t.Skip("the test directory is on tmpfs, whose reads never reach a disk")
	}
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
