package perf

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// fdatasync makes f's data durable without its timestamps.
func fdatasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }

// startWriteOut starts writing f's bytes [at, at+n) to disk without waiting
// (pebble's BytesPerSync does the same for the files a flush writes).
func startWriteOut(f *os.File, at, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), at, n, unix.SYNC_FILE_RANGE_WRITE)
}

// freeBytes is the space an unprivileged writer has left in dir.
func freeBytes(dir string) (int64, bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true
}

// allocateFile allocates n bytes for f and sets its size (fallocate).
func allocateFile(f *os.File, n int64) error { return unix.Fallocate(int(f.Fd()), 0, 0, n) }

// dropPages drops f's pages in [off, off+n) from the page cache (n 0: to
// the end); the probe calls it on synced bytes only, which are clean.
func dropPages(f *os.File, off, n int64) { _ = unix.Fadvise(int(f.Fd()), off, n, unix.FADV_DONTNEED) }

// threadCPU is the CPU time the calling thread has used (user and system).
func threadCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
