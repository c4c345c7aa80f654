package localstore

import (
	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// allocate reserves size bytes for a new segment and sets its length, so
// an fdatasync after an append has no file size to commit. It still has
// the allocated blocks to mark written. `tern bench disk` once showed
// that costing far more than rewriting a file (commit p99 8-308 ms against
// 2.4-3.6 ms at 250 MiB/s), which is one reason removed segments are kept
// for reuse; but that probe kept every page it wrote, and on its machine
// a new page was the cost. Dropping pages as a node does, allocated and
// rewritten files measure alike (1.4-3.7 ms at 283 MB/s; bench/results,
// thirty-third run). Best effort: a filesystem without fallocate, or an
// in-memory one, grows the file.
func allocate(f vfs.File, size int64) {
	if fd := f.Fd(); fd != vfs.InvalidFd {
		_ = unix.Fallocate(int(fd), 0, 0, size)
	}
}

// writeRecord writes parts one after another at off in one pwritev
// (records, then the padding to the end of the last page), so the write
// covers its last page whole when it reaches the kernel (see
// segments.write).
func writeRecord(f vfs.File, off int64, parts ...[]byte) error {
	fd := f.Fd()
	if fd == vfs.InvalidFd {
		return writeRecordAt(f, off, parts...)
	}
	iov := parts
	for {
		n, err := unix.Pwritev(int(fd), iov, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		off += int64(n)
		for len(iov) > 0 && n >= len(iov[0]) {
			n -= len(iov[0])
			iov = iov[1:]
		}
		if len(iov) == 0 {
			return nil
		}
		// A short write (a signal, or a full disk about to say so):
		// write what is left, which reports the error if there is one.
		iov[0] = iov[0][n:]
		return writeRecordAt(f, off, iov...)
	}
}

// dropPages drops the cached pages of n bytes at off (n 0: to the end of
// the file). They are durable, so nothing is written.
func dropPages(f vfs.File, off, n int64) {
	if fd := f.Fd(); fd != vfs.InvalidFd {
		_ = unix.Fadvise(int(fd), off, n, unix.FADV_DONTNEED)
	}
}

// openDirect opens the file at path for reads past the page cache; -1
// when it cannot be (a file system without O_DIRECT says EINVAL).
func openDirect(path string) int {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
}

// preadDirect reads into b, page-aligned in memory, at off, page-aligned,
// until b is full or the file ends.
func preadDirect(fd int, b []byte, off int64) (int, error) {
	got := 0
	for got < len(b) {
		n, err := unix.Pread(fd, b[got:], off+int64(got))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return got, err
		}
		if n == 0 {
			break
		}
		got += n
	}
	return got, nil
}

func closeFd(fd int) { _ = unix.Close(fd) }
