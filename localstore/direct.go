package localstore

import (
	"encoding/binary"
	"hash/crc32"
	"slices"
	"sync/atomic"
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

// directRead is preadDirect; tests make it fail.
var directRead = preadDirect

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
	prev := len(buf)
	buf, pages, lo, at := directPlace(buf, off, n)
	got, err := directRead(fd, pages, lo)
	if err != nil || got < int(off-lo)+n {
		return buf[:prev], 0, false
	}
	sg.directBytes.Add(int64(n))
	return buf[:at+n], at, true
}

// directPlace makes room in buf for the whole pages holding the n bytes at
// off and returns buf, those pages' place in it (page-aligned in memory,
// as a read past the cache needs), the file offset of the first page, and
// where in buf the byte at off will be.
func directPlace(buf []byte, off int64, n int) (_, pages []byte, lo int64, at int) {
	lo, hi := off&^(pageSize-1), alignUp(off+int64(n), pageSize)
	prev := len(buf)
	buf = slices.Grow(buf, int(hi-lo)+int(pageSize))
	free := buf[prev:cap(buf)]
	pad := int(-uintptr(unsafe.Pointer(unsafe.SliceData(free))) & uintptr(pageSize-1))
	return buf, free[pad : pad+int(hi-lo)], lo, prev + pad + int(off-lo)
}

// pieceSize is how much of a long read past the cache is read at a time
// (a multiple of pageSize). The bytes the disk writes into memory are in
// none of the CPU's caches, so checking a record's CRC runs at the
// memory's speed: on the machine we measure on 5.6 GB/s, against the
// disk's 2.2 GB/s, so checking a MiB after reading it made the read 40 %
// longer. Read in pieces, each piece's records are checked while the disk
// fills the next, and only the last piece's check follows the read.
var pieceSize = 256 << 10

// pieceReaders is how many pieces of a long read past the cache are read
// at once: each reader reads every pieceReaders-th piece, so the disk has
// that many reads to work on. A virtual disk may serve one read at a time
// at half the rate it serves two: on one KVM guest's virtio disk, 256 KiB
// reads past the cache gave 531-548 MB/s one at a time and 844-1053 MB/s
// two at a time (fio), and a consumer of a backlog, three quarters of it
// read from the disk, was bound by it.
var pieceReaders = 2

// readRunPieces reads run's records past the cache, pieceReaders pieces
// at a time, appends them to buf and checks each as checkRecord does while
// the next pieces are read. It returns buf, where the run's first byte is
// in it, and a bad record's index and its error. ok is false, with buf's
// bytes as they were, when the run is not read this way (held in the
// cache, one piece or shorter, no descriptor for it) or the read failed:
// the caller then reads as readSpan does, which reports a real error.
func (sg *segments) readRunPieces(run *segRun, buf []byte) (_ []byte, at, bad int, ok bool, err error) {
	off, n := int64(run.off), int(run.end-run.off)
	if n <= pieceSize {
		return buf, 0, 0, false, nil
	}
	sg.rmu.RLock()
	defer sg.rmu.RUnlock()
	f := sg.files[run.seg]
	if f == nil || !f.readsDirect(off, n) {
		return buf, 0, 0, false, nil
	}
	fd := sg.directFd(f)
	if fd < 0 {
		return buf, 0, 0, false, nil
	}
	sg.spanReads.Add(1)
	sg.pieceReads.Add(1)
	prev := len(buf)
	buf, pages, lo, at := directPlace(buf, off, n)
	first, need := int(off-lo), int(off-lo)+n
	// Reader j reads pieces j, j+k, j+2k... and sends on read[j] how much
	// of pages is read once each is; it closes read[j] when it stops,
	// after a failed piece at once, or before its next piece once stop is
	// set (a bad record: the rest of the run is not wanted). The pieces
	// are taken in order, the i-th from read[i%k].
	pieces := (need + pieceSize - 1) / pieceSize
	k := max(1, min(pieceReaders, pieces))
	read := make([]chan int, k)
	var stop atomic.Bool
	for j := range read {
		read[j] = make(chan int, (pieces+k-1)/k)
		go func(ch chan<- int) {
			defer close(ch)
			for p := j * pieceSize; p < need && !stop.Load(); p += k * pieceSize {
				end := min(p+pieceSize, len(pages))
				got, err := directRead(fd, pages[p:end], lo+int64(p))
				if err != nil || p+got < min(end, need) {
					return
				}
				ch <- min(p+got, need)
			}
		}(read[j])
	}
	defer func() {
		stop.Store(true)
		for _, ch := range read {
			for range ch { // a reader writes into buf until it stops
			}
		}
	}()
	have, next := 0, 0
	wait := func(upto int) bool {
		for have < upto {
			v, more := <-read[next%k]
			if !more {
				return false
			}
			have = v
			next++
		}
		return true
	}
	for i, r := range run.items {
		s := first + int(r.ptr.Off-run.off)
		if !wait(s + segRecordHeader) {
			return buf[:prev], 0, 0, false, nil
		}
		if binary.BigEndian.Uint32(pages[s:]) != r.ptr.Len {
			return buf[:prev], 0, i, true, badRecord(r.ptr)
		}
		var sum uint32
		for pos, end := s+segRecordHeader, s+segRecordHeader+int(r.ptr.Len); pos < end; {
			if !wait(pos + 1) {
				return buf[:prev], 0, 0, false, nil
			}
			upto := min(have, end)
			sum = crc32.Update(sum, castagnoli, pages[pos:upto])
			pos = upto
		}
		if sum != binary.BigEndian.Uint32(pages[s+4:]) {
			return buf[:prev], 0, i, true, badRecord(r.ptr)
		}
	}
	if !wait(need) {
		return buf[:prev], 0, 0, false, nil
	}
	sg.directBytes.Add(int64(n))
	return buf[:at+n], at, 0, true, nil
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
