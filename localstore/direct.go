package localstore

import (
	"slices"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Reads of segment bytes whose pages were dropped (segFile.cold) bypass
// the page cache: the disk writes them straight into the reader's buffer.
// Read through the cache, each of those pages would be a new page the
// kernel hands out, fills and, since they are old data, soon drops again;
// on the machine we measure on that took 1.4-1.9 ms of CPU per MiB read
// (a consumer a backlog behind spent most of the node's CPU in pread),
// against 0.07-0.24 ms read past the cache. Newer bytes, which the cache
// holds and tailing consumers read, are read through it as before.

// directMin is the smallest read that bypasses the cache: a smaller one
// (a single small entry) goes through it and its readahead, since one
// small read at a time past the cache waits for the disk each time.
const directMin = 64 << 10

// readsDirect says whether the n bytes at off are read past the cache.
func (f *segFile) readsDirect(off int64, n int) bool {
	return n >= directMin && off+int64(n) <= f.cold.Load() && f.direct.Load() >= 0
}

// slack is the room beyond n bytes that reading them at off of segment
// seg takes in the reader's buffer: a read past the cache covers whole
// pages into a page-aligned place.
func (sg *segments) slack(seg, off, n uint32) int {
	sg.rmu.RLock()
	defer sg.rmu.RUnlock()
	if f := sg.files[seg]; f != nil && f.readsDirect(int64(off), int(n)) {
		return int(3 * pageSize)
	}
	return 0
}

// readDirect appends the n bytes at off of f to buf, read past the page
// cache, and returns buf and where they start in it; ok is false when it
// could not (no descriptor for it here, or the read failed), and the
// caller reads through the cache instead, which reports a real error. The
// bytes before the returned start, up to the previous length, are not
// part of the read: whole pages are read into an aligned place.
func (sg *segments) readDirect(f *segFile, off int64, n int, buf []byte) (_ []byte, at int, ok bool) {
	fd := sg.directFd(f)
	if fd < 0 {
		return buf, 0, false
	}
	lo, hi := off&^(pageSize-1), alignUp(off+int64(n), pageSize)
	prev := len(buf)
	buf = slices.Grow(buf, int(hi-lo)+int(pageSize))
	free := buf[prev:cap(buf)]
	pad := int(-uintptr(unsafe.Pointer(unsafe.SliceData(free))) & uintptr(pageSize-1))
	got, err := preadDirect(fd, free[pad:pad+int(hi-lo)], lo)
	if err != nil || got < int(off-lo)+n {
		return buf[:prev], 0, false
	}
	at = prev + pad + int(off-lo)
	sg.directBytes.Add(int64(n))
	return buf[:at+n], at, true
}

// directFd returns f's descriptor for direct reads, opening it at the
// first; -1 when there is none (an in-memory file system, or one without
// O_DIRECT). rmu is held for reading, so f is not being removed.
func (sg *segments) directFd(f *segFile) int {
	for {
		switch v := f.direct.Load(); {
		case v > 0:
			return int(v - 1)
		case v < 0:
			return -1
		}
		fd, v := -1, int64(-1)
		if f.f.Fd() != vfs.InvalidFd {
			if fd = openDirect(sg.fs.PathJoin(sg.dir, segName(f.n))); fd >= 0 {
				v = int64(fd) + 1
			}
		}
		if !f.direct.CompareAndSwap(0, v) && fd >= 0 {
			closeFd(fd) // another reader opened it first
		}
	}
}

// closeDirect closes f's direct descriptor, if it has one; f is out of
// segments.files and no read is in progress on it.
func closeDirect(f *segFile) {
	if v := f.direct.Swap(-1); v > 0 {
		closeFd(int(v - 1))
	}
}
