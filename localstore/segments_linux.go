package localstore

import (
	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// allocate reserves size bytes for a new segment and sets its length, so
// an fdatasync after an append has no file size to commit: the segment's
// appends then cost the disk about what a reused file's do. Best effort:
// a filesystem without fallocate, or an in-memory one, grows the file.
func allocate(f vfs.File, size int64) {
	if fd := f.Fd(); fd != vfs.InvalidFd {
		_ = unix.Fallocate(int(fd), 0, 0, size)
	}
}
