package localstore

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
)

// Entries appended under sync durability are written once, to segment
// files, and pebble keeps a pointer to each under the entry's key. Kept in
// pebble, every entry was written twice (WAL, then the memtable flush),
// and the flush's writes, landing between the WAL's fdatasyncs, made those
// wait: on a virtual disk the group-commit p99 at 130 MiB/s was 3 ms for
// one write stream and 40-80 ms with a flush beside it (tern bench disk).
//
// A segment is a file of records, each [u32 length][u32 CRC-32C][entry],
// appended in the order appends arrive, across partitions: one write
// stream, made durable by one fdatasync per group commit. Behind each
// entry's record is its append's batch record (the length's top bit set;
// see replay.go), which makes the append durable without pebble's WAL. A
// pointer is applied to pebble only after its record's fdatasync, so a
// crash never leaves pebble pointing at bytes that were not written.
// After a restart writing starts in a new segment.
//
// A segment is removed once every partition's first retained entry is in
// a later one. A partition whose data ages slowly therefore keeps the
// segments it shares with faster ones; that space is the price of one
// write stream.

const (
	segmentsDir     = "segments"
	segRecordHeader = 8
	// segPointerSize is a pointer's size: a marker byte (never an entry's
	// envelope version), segment number, offset and entry length.
	segPointerSize = 1 + 4 + 4 + 4
	segPointerMark = 0xFE
	// segBatchFlag, set in a record's length, marks a batch record; an
	// entry record's length is below it.
	segBatchFlag = 1 << 31
	// batchRecordHead is a batch record's fixed part: its own segment and
	// offset, the append's partition, base and next offsets, and its entry
	// record's pointer (segment, offset, length).
	batchRecordHead = 4 + 4 + 4 + 8 + 8 + 4 + 4 + 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// pageSize is the page cache's page size; zeroPage pads a record's write
// to the end of its last page.
var (
	pageSize = int64(os.Getpagesize())
	zeroPage = make([]byte, pageSize)
)

// alignUp rounds x up to a multiple of a, a power of two.
func alignUp(x, a int64) int64 { return (x + a - 1) &^ (a - 1) }

// writeRecordAt is writeRecord's portable form: one WriteAt per part.
func writeRecordAt(f vfs.File, off int64, parts ...[]byte) error {
	for _, b := range parts {
		if _, err := f.WriteAt(b, off); err != nil {
			return err
		}
		off += int64(len(b))
	}
	return nil
}

// segPointer says where an entry's record is.
type segPointer struct {
	Seg, Off, Len uint32
}

// encode gives the pointer's bytes in an array, so an append allocates
// nothing for it (the batch copies them).
func (p segPointer) encode() (b [segPointerSize]byte) {
	b[0] = segPointerMark
	binary.BigEndian.PutUint32(b[1:], p.Seg)
	binary.BigEndian.PutUint32(b[5:], p.Off)
	binary.BigEndian.PutUint32(b[9:], p.Len)
	return b
}

// decodeSegPointer reads a pointer; ok is false for an entry stored whole
// (or in parts) in pebble.
func decodeSegPointer(v []byte) (p segPointer, ok bool) {
	if len(v) != segPointerSize || v[0] != segPointerMark {
		return p, false
	}
	return segPointer{
		Seg: binary.BigEndian.Uint32(v[1:]),
		Off: binary.BigEndian.Uint32(v[5:]),
		Len: binary.BigEndian.Uint32(v[9:]),
	}, true
}

// segFile is one open segment.
type segFile struct {
	n     uint32
	f     vfs.File
	dirty bool // written since its last fdatasync; under segments.mu
	// cold is the offset below which the page cache no longer holds the
	// file's bytes: dropOld dropped them, or (math.MaxInt64) the file is
	// from before open. Reads below it bypass the page cache (readDirect).
	cold atomic.Int64
	// direct is the file opened again for those reads: 0 until the first,
	// -1 where it cannot be, else its descriptor plus one.
	direct atomic.Int64
	// base is the write-stream position of the file's offset 0 plus one,
	// once it is written since open (0 before), so a read of it can say
	// where in the stream its reader is (segments.noteRead).
	base atomic.Int64
}

// segments is the set of segment files.
type segments struct {
	// spanReads counts the reads of segment files, pieceReads those read
	// past the cache in pieces; for tests.
	spanReads, pieceReads atomic.Int64

	fs   vfs.FS
	dir  string
	size int64 // a segment is closed once a record would take it past this

	// log says when new segments cannot be made (nil: not said).
	log *slog.Logger

	mu     sync.Mutex // guards what follows, and orders writes
	active *segFile
	pos    int64 // next record's offset in active
	// createFails counts the failed segment creations since createLogged,
	// when one was last logged.
	createFails  int
	createLogged time.Time
	// wbuf holds the small records written to active since the last
	// flush, which start at wbase: they reach the file in one write, at
	// the next sync, at a larger record, or when wbuf fills, not in one
	// system call each. werr is the first failed flush's error; every
	// sync from then on returns it, since records written before it were
	// acknowledged to their callers as written.
	wbuf     []byte
	wbase    int64
	werr     error
	dirty    []*segFile
	inflight map[uint32]int // segment -> records written, not yet in pebble
	next     uint32         // the next segment number to use
	spare    *segFile       // the next segment, made ahead; nil while none is
	// preparing is set while the next segment is being made, and
	// prepared is signalled when it is done; closed stops making more,
	// and pwg waits for the one being made.
	preparing, closed bool
	prepared          *sync.Cond
	pwg               sync.WaitGroup
	// files are the segments readers may open, by number. Removal takes
	// rmu for writing, so no read is in progress on a removed file.
	rmu   sync.RWMutex
	files map[uint32]*segFile

	// pool holds removed segments kept to be written again (renamed to
	// recycleName), with when each was kept: appending into blocks
	// written before costs the disk and the page cache less than new
	// ones, and removing many files at once stalls the disk. Up to
	// poolMaxBytes are kept (at least poolMin segments); one unused for
	// poolIdle is removed at the next removal.
	poolMu sync.Mutex
	pool   []pooled

	// The page cache (Config.SegmentCache): once a sync has made them
	// durable, the pages of bytes more than cache behind the newest are
	// dropped. spans are the segments written since open, oldest first,
	// whose pages are not all dropped yet; positions are in the write
	// stream, counted as written counts. Under mu; 0 cache keeps all.
	cache    int64
	spans    []segSpan
	synced   int64 // stream position the last sync made durable
	dropped  int64 // stream position below which pages were dropped
	dropKick chan struct{}
	// Readers a little behind keep what they have yet to read cached:
	// readLows holds the lowest stream position read through the page
	// cache in each of the last two readWindows (by the window's number),
	// and dropOld keeps the pages from there on, up to readerCacheFactor
	// times cache behind the newest.
	readMu   sync.Mutex
	readLows [2]struct{ window, low int64 }

	written     atomic.Int64         // bytes written since open
	directBytes atomic.Int64         // bytes read past the page cache since open
	fsync       prometheus.Histogram // each sync's latency, in seconds
}

// segSpan is where a segment's bytes are in the write stream: from its
// file's base to end.
type segSpan struct {
	f   *segFile
	end int64 // the stream position of its end
}

func segName(n uint32) string { return fmt.Sprintf("%010d.seg", n) }

// recycleName is a removed segment's name while it waits in the pool.
func recycleName(n uint32) string { return fmt.Sprintf("%010d.recycle", n) }

// pooled is a removed segment kept for reuse.
type pooled struct {
	name string
	at   time.Time
}

// What the pool keeps: segments removed in one retention pass are needed
// again before the next (every minute by default), so in a steady state
// every one is reused; when writing slows down, they go after poolIdle.
const (
	poolMin      = 2
	poolMaxBytes = 4 << 30
	poolIdle     = 5 * time.Minute
)

// poolMax is how many segments the pool keeps at most.
func (sg *segments) poolMax() int { return max(poolMin, int(poolMaxBytes/sg.size)) }

// openSegments opens the segments under dir. Writing starts in a new
// segment after the highest present one. Pages more than cache bytes
// behind the newest written are dropped from the page cache (0 keeps
// them).
func openSegments(fs vfs.FS, dir string, size, cache int64) (*segments, error) {
	sd := fs.PathJoin(dir, segmentsDir)
	if _, err := fs.Stat(sd); err != nil {
		// New: make the directory, and its name in dir durable.
		if err := fs.MkdirAll(sd, 0o755); err != nil {
			return nil, fmt.Errorf("localstore: segments: %w", err)
		}
		if err := syncDir(fs, dir); err != nil {
			return nil, fmt.Errorf("localstore: segments: %w", err)
		}
	}
	names, err := fs.List(sd)
	if err != nil {
		return nil, fmt.Errorf("localstore: segments: %w", err)
	}
	sg := &segments{
		fs: fs, dir: sd, size: size, cache: cache, next: 1, inflight: map[uint32]int{}, files: map[uint32]*segFile{},
		fsync: newLatencyHistogram(),
	}
	sg.prepared = sync.NewCond(&sg.mu)
	for _, name := range names {
		if strings.HasSuffix(name, ".recycle") {
			if len(sg.pool) < sg.poolMax() {
				sg.pool = append(sg.pool, pooled{name: name, at: time.Now()})
			} else if err := fs.Remove(fs.PathJoin(sd, name)); err != nil {
				sg.close()
				return nil, fmt.Errorf("localstore: segments: %w", err)
			}
			continue
		}
		num, ok := strings.CutSuffix(name, ".seg")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(num, 10, 32)
		if err != nil || segName(uint32(n)) != name {
			return nil, fmt.Errorf("%w: unexpected file %s in %s", ErrCorrupt, name, sd)
		}
		f, err := fs.Open(fs.PathJoin(sd, name))
		if err != nil {
			sg.close()
			return nil, fmt.Errorf("localstore: segments: %w", err)
		}
		sg.files[uint32(n)] = &segFile{n: uint32(n), f: f}
		sg.next = max(sg.next, uint32(n)+1)
	}
	// The highest segment, if nothing was written to it, is the one the
	// last run made ahead: it becomes this run's next segment instead of
	// lying unused until removal passes it. No pointer refers to a
	// segment whose first record header is zeros: records are written
	// from the start, and a pointer is applied after its segment's
	// fdatasync, which covers every record before it.
	if top := sg.files[sg.next-1]; top != nil && unwritten(top.f) {
		rw, err := fs.OpenReadWrite(fs.PathJoin(sd, segName(top.n)), vfs.WriteCategoryUnspecified)
		if err == nil {
			_ = top.f.Close()
			top.f = rw
			sg.spare = top
		}
	}
	if cache > 0 {
		// What the last run wrote is read past the page cache: its pages
		// are gone after a reboot, and the last run dropped most of the
		// rest. The spare is this run's to write.
		for _, f := range sg.files {
			if f != sg.spare {
				f.cold.Store(math.MaxInt64)
			}
		}
		sg.dropKick = make(chan struct{}, 1)
		sg.pwg.Add(1)
		go sg.dropLoop()
	}
	return sg, nil
}

// unwritten says whether f holds no record: it is empty, or its first
// record header is zeros (allocated, never written).
func unwritten(f vfs.File) bool {
	var h [segRecordHeader]byte
	n, err := f.ReadAt(h[:], 0)
	if n == 0 && errors.Is(err, io.EOF) {
		return true
	}
	return n == len(h) && h == [segRecordHeader]byte{}
}

// prepareHook, when set (by tests), runs before the next segment is made
// ahead, with its number.
var prepareHook func(n uint32)

// reserve takes the next segment number. sg.mu is held.
func (sg *segments) reserve() uint32 {
	n := sg.next
	sg.next++
	return n
}

// prepareLocked makes the next segment in the background, so that moving
// to it does not hold appends up for a file creation, its allocation and
// a directory fsync. sg.mu is held.
func (sg *segments) prepareLocked() {
	if sg.preparing || sg.spare != nil || sg.closed {
		return
	}
	sg.preparing = true
	n := sg.reserve()
	sg.pwg.Add(1)
	go func() {
		defer sg.pwg.Done()
		if prepareHook != nil {
			prepareHook(n)
		}
		f, err := sg.create(n)
		sg.mu.Lock()
		defer sg.mu.Unlock()
		sg.preparing = false
		sg.prepared.Broadcast()
		if err == nil {
			sg.spare = f // made durable; an append may point into it
		}
		// On an error the next move makes its segment itself, and
		// reports the error if it recurs.
	}()
}

// create makes segment n and makes its directory entry durable, so a
// pointer into it never outlives the file in a crash. It takes only rmu:
// a move to a new segment calls it under sg.mu, prepareLocked without.
func (sg *segments) create(n uint32) (*segFile, error) {
	name := sg.fs.PathJoin(sg.dir, segName(n))
	var f vfs.File
	sg.poolMu.Lock()
	if k := len(sg.pool); k > 0 {
		// Its old records stay behind the new ones; no pointer reaches
		// them, and a read checks each record it is pointed at.
		old := sg.pool[k-1].name
		sg.pool = sg.pool[:k-1]
		var err error
		if f, err = sg.fs.ReuseForWrite(sg.fs.PathJoin(sg.dir, old), name, vfs.WriteCategoryUnspecified); err != nil {
			f = nil
			_ = sg.fs.Remove(sg.fs.PathJoin(sg.dir, old))
		} else {
			// Its old pages, where the page cache still holds them,
			// go first. Appends into reused files whose pages were
			// cached had a far worse tail than into fresh ones, though
			// the disk wrote no more (e2e at 257k msg/s, 20 written
			// files in the pool: publish p99 48-262 ms; 36-84 with
			// this; 15 with the whole page cache dropped first; 28-32
			// on a fresh node). Why is not known; the old pages are of
			// no use either way.
			dropPages(f, 0, 0)
		}
	}
	sg.poolMu.Unlock()
	if f == nil {
		var err error
		if f, err = sg.fs.Create(name, vfs.WriteCategoryUnspecified); err != nil {
			return nil, err
		}
		allocate(f, sg.size)
	}
	if err := syncDir(sg.fs, sg.dir); err != nil {
		_ = f.Close()
		return nil, err
	}
	s := &segFile{n: n, f: f}
	sg.rmu.Lock()
	sg.files[n] = s
	sg.rmu.Unlock()
	return s, nil
}

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// Records of up to bufferedRecord bytes are gathered in segments.wbuf, up
// to writeBuffer bytes, and written together; larger ones are written at
// once, behind what is gathered. A syscall per small record cost more
// than the copy (a WebSocket producer's 1 KiB messages, one entry each,
// spent about 4 us of the node's CPU in each record's pwritev).
const (
	bufferedRecord = 16 << 10
	writeBuffer    = 256 << 10
)

// write appends the entry head followed by body (either may be empty) as
// one record and returns where it is. The record counts as in flight
// until committed is called for its pointer. It is durable once a sync
// that starts after write returns has returned; it may not be in the file
// before (see wbuf), which is why records are read only through pointers
// committed after such a sync.
func (sg *segments) write(head, body []byte) (segPointer, error) {
	return sg.writeSum(head, body, crc32.Update(crc32.Checksum(head, castagnoli), castagnoli, body))
}

// writeSum is write given the record's CRC-32C, sum, of head then body.
func (sg *segments) writeSum(head, body []byte, sum uint32) (segPointer, error) {
	n := int64(len(head)) + int64(len(body))
	if n >= segBatchFlag {
		return segPointer{}, fmt.Errorf("localstore: a %d-byte entry is too large for a segment (at most %d bytes)", n, segBatchFlag-1)
	}
	var h [segRecordHeader]byte
	binary.BigEndian.PutUint32(h[:], uint32(n))
	binary.BigEndian.PutUint32(h[4:], sum)
	sg.mu.Lock()
	defer sg.mu.Unlock()
	if err := sg.roomLocked(segRecordHeader+n, false); err != nil {
		return segPointer{}, err
	}
	p := segPointer{Seg: sg.active.n, Off: uint32(sg.pos), Len: uint32(n)}
	if err := sg.putLocked(h, head, body); err != nil {
		return segPointer{}, err
	}
	sg.inflight[p.Seg]++
	return p, nil
}

// writeBatch writes the pebble batch of an append whose entry record ptr
// points at, as a batch record (see replay.go): the append's partition and
// offsets [base, next), ptr, and the batch's representation. It counts as
// durable as write's records do.
func (sg *segments) writeBatch(pid PartitionID, base, next int64, ptr segPointer, repr []byte) error {
	n := int64(batchRecordHead) + int64(len(repr))
	if n >= segBatchFlag {
		return fmt.Errorf("localstore: a %d-byte batch is too large for a segment", len(repr))
	}
	sg.mu.Lock()
	defer sg.mu.Unlock()
	// A batch record stays with its entry's, in the same segment, even
	// past the segment's size: a move here would leave the next segment
	// holding one small record when the entry filled the last.
	if err := sg.roomLocked(segRecordHeader+n, true); err != nil {
		return err
	}
	var head [batchRecordHead]byte
	binary.BigEndian.PutUint32(head[0:], sg.active.n)
	binary.BigEndian.PutUint32(head[4:], uint32(sg.pos))
	binary.BigEndian.PutUint32(head[8:], uint32(pid))
	binary.BigEndian.PutUint64(head[12:], uint64(base))
	binary.BigEndian.PutUint64(head[20:], uint64(next))
	binary.BigEndian.PutUint32(head[28:], ptr.Seg)
	binary.BigEndian.PutUint32(head[32:], ptr.Off)
	binary.BigEndian.PutUint32(head[36:], ptr.Len)
	var h [segRecordHeader]byte
	binary.BigEndian.PutUint32(h[:], uint32(n)|segBatchFlag)
	binary.BigEndian.PutUint32(h[4:], crc32.Update(crc32.Checksum(head[:], castagnoli), castagnoli, repr))
	return sg.putLocked(h, head[:], repr)
}

// roomLocked makes the active segment one with room for a record of need
// bytes; with past, one it may take past the segment size. sg.mu is held.
func (sg *segments) roomLocked(need int64, past bool) error {
	for sg.active == nil || (!past && sg.pos > 0 && sg.pos+need > sg.size) || sg.pos+need > 1<<32-1 {
		// Segments are written in the order of their numbers: removal
		// and each partition's first segment rely on it. So a move waits
		// for the next segment being made rather than make a later one
		// (the one being made would then be written after it), and looks
		// again: another write may have moved meanwhile.
		if err := sg.flushLocked(); err != nil {
			return err
		}
		if sg.preparing {
			sg.prepared.Wait()
			continue
		}
		f := sg.spare
		sg.spare = nil
		if f == nil {
			var err error
			if f, err = sg.create(sg.reserve()); err != nil {
				err = fmt.Errorf("localstore: new segment: %w", err)
				sg.createFailedLocked(err)
				return err
			}
		}
		sg.active, sg.pos = f, 0
		sg.prepareLocked()
		if sg.cache > 0 {
			f.base.Store(sg.written.Load() + 1)
			sg.spans = append(sg.spans, segSpan{f: f})
		}
	}
	return nil
}

// createFailedLocked logs a failed segment creation, which fails the
// append that needed the segment (and every one after it until one can be
// made: a full disk, a directory gone): the first, then at most one line
// every ten seconds, with how many failed meanwhile. Unlogged, a producer
// whose client retries each failed append hundreds of times a second left
// no trace of why on the node. sg.mu is held.
func (sg *segments) createFailedLocked(err error) {
	sg.createFails++
	if sg.log == nil || time.Since(sg.createLogged) < 10*time.Second {
		return
	}
	sg.log.Error("appends are failing: cannot make a new segment file", "err", err, "failed", sg.createFails)
	sg.createFails, sg.createLogged = 0, time.Now()
}

// putLocked writes the record of header h, head then body at the active
// segment's end, which roomLocked made room for. sg.mu is held.
func (sg *segments) putLocked(h [segRecordHeader]byte, head, body []byte) error {
	if len(sg.wbuf) == 0 {
		sg.wbase = sg.pos
	}
	need := segRecordHeader + int64(len(head)) + int64(len(body))
	end := sg.pos + need
	if need <= bufferedRecord {
		sg.wbuf = append(append(append(sg.wbuf, h[:]...), head...), body...)
		if len(sg.wbuf) >= writeBuffer {
			if err := sg.flushLocked(); err != nil {
				return err
			}
		}
	} else {
		if err := writeRecord(sg.active.f, sg.wbase, sg.wbuf, h[:], head, body, sg.padding(end)); err != nil {
			sg.wbuf = sg.wbuf[:0]
			sg.werr = cmp.Or(sg.werr, err)
			return err
		}
		sg.wbuf = sg.wbuf[:0]
	}
	sg.pos = end
	sg.written.Add(need)
	if sg.cache > 0 {
		sg.spans[len(sg.spans)-1].end = sg.written.Load()
	}
	if !sg.active.dirty {
		sg.active.dirty = true
		sg.dirty = append(sg.dirty, sg.active)
	}
	return nil
}

// padding returns the zeros a write ending at end runs on with: to the end
// of its last page (until the next record), so a write never starts a page
// it covers only in part. Such a page, in a reused segment whose old pages
// are not cached, would have to be read from the disk before the write
// could go on.
func (sg *segments) padding(end int64) []byte {
	return zeroPage[:min(alignUp(end, pageSize)-end, max(sg.size-end, 0))]
}

// flushLocked writes the gathered records to the active segment. sg.mu
// is held.
func (sg *segments) flushLocked() error {
	if len(sg.wbuf) == 0 {
		return nil
	}
	err := writeRecord(sg.active.f, sg.wbase, sg.wbuf, sg.padding(sg.wbase+int64(len(sg.wbuf))))
	if cap(sg.wbuf) > 2*writeBuffer {
		sg.wbuf = nil
	}
	sg.wbuf = sg.wbuf[:0]
	if err != nil {
		sg.werr = cmp.Or(sg.werr, err)
	}
	return err
}

// committed ends p's record's time in flight: its pointer is in pebble
// (or its append failed).
func (sg *segments) committed(p segPointer) {
	sg.mu.Lock()
	if sg.inflight[p.Seg]--; sg.inflight[p.Seg] <= 0 {
		delete(sg.inflight, p.Seg)
	}
	sg.mu.Unlock()
}

// sync fdatasyncs every segment written since the last sync. A record
// written before the call is durable when it returns.
func (sg *segments) sync() error {
	sg.mu.Lock()
	_ = sg.flushLocked() // its error is werr
	if err := sg.werr; err != nil {
		sg.mu.Unlock()
		return fmt.Errorf("localstore: writing segment records: %w", err)
	}
	dirty := sg.dirty
	sg.dirty = nil
	for _, f := range dirty {
		f.dirty = false
	}
	to := sg.written.Load()
	sg.mu.Unlock()
	if len(dirty) == 0 {
		return nil
	}
	start := time.Now()
	var errs []error
	for _, f := range dirty {
		errs = append(errs, f.f.SyncData())
	}
	sg.fsync.Observe(time.Since(start).Seconds())
	err := errors.Join(errs...)
	if err == nil && sg.cache > 0 {
		sg.mu.Lock()
		sg.synced = max(sg.synced, to)
		if !sg.closed {
			select {
			case sg.dropKick <- struct{}{}:
			default:
			}
		}
		sg.mu.Unlock()
	}
	return err
}

// dropLoop drops old pages from the page cache after syncs, off the
// committer's path; kicks while it works coalesce.
func (sg *segments) dropLoop() {
	defer sg.pwg.Done()
	for range sg.dropKick {
		sg.dropOld()
	}
}

// droppedBytes is how many of the bytes written since open have had their
// pages dropped.
func (sg *segments) droppedBytes() int64 {
	sg.mu.Lock()
	defer sg.mu.Unlock()
	return sg.dropped
}

// dropAlign is the largest folio the page cache makes (a PMD, 2 MiB on
// x86-64 and arm64 with 4 KiB pages).
const dropAlign = 2 << 20

// dropRange is a run of a segment's bytes whose pages are to be dropped.
type dropRange struct {
	f      *segFile
	off, n int64 // n 0: to the end of the file
}

// readerCacheFactor bounds what readers keep cached: at most this many
// times Config.SegmentCache behind the newest byte. A consumer that falls
// behind by more than the cache (a start, a stall of its own) otherwise
// reads from the disk what it would have read from memory, and reading
// from the disk is slower than the producers write: it never caught up.
// (e2e at 270k msgs/s of 1 KiB, 256 MiB cache: the consumer began more
// than a second behind, and the node read 844 MB from the disk.)
const readerCacheFactor = 4

// readWindow is how long a read keeps its reader's place cached after it
// (one window or two). It is short because the lowest place read in a
// window is where a reader that keeps up stood at the window's start: a
// window keeps that many seconds of writes cached behind such a reader.
// At a second and 277 MB/s that was more than the cache, so the drop
// bound stood still for a second and then jumped by a second's writes:
// 260 MB dropped in one pass of 10-44 ms, every second.
const readWindow = 100 * time.Millisecond

// dropChunk is the most dropOld drops in one go: readers and the making
// of new segments wait for it (rmu) meanwhile. A multiple of dropAlign.
const dropChunk = 8 << 20

// noteRead records a read through the page cache of f at off.
func (sg *segments) noteRead(f *segFile, off int64) {
	b := f.base.Load()
	if sg.cache <= 0 || b == 0 || off < f.cold.Load() {
		return // not a reader the page cache serves
	}
	pos := b - 1 + off
	w := time.Now().UnixNano() / int64(readWindow)
	sg.readMu.Lock()
	if r := &sg.readLows[w%2]; r.window != w {
		r.window, r.low = w, pos
	} else {
		r.low = min(r.low, pos)
	}
	sg.readMu.Unlock()
}

// dropLimit is the stream position below which dropOld drops pages: cache
// behind synced, or further back where a reader read in this readWindow
// or the last, but no more than readerCacheFactor times cache.
func (sg *segments) dropLimit(now time.Time) int64 {
	w := now.UnixNano() / int64(readWindow)
	low := int64(math.MaxInt64)
	sg.readMu.Lock()
	for _, r := range sg.readLows {
		if r.window >= w-1 {
			low = min(low, r.low)
		}
	}
	sg.readMu.Unlock()
	limit := sg.synced - sg.cache
	if low < limit {
		limit = max(low, sg.synced-readerCacheFactor*sg.cache)
	}
	return limit
}

// dropOld drops the pages of the durable bytes more than cache behind the
// newest, or behind a reader (dropLimit). A page a range covers in part is
// kept, and dropped with the next range, which starts at its page. The
// kernel caches a file in folios of up to 2 MiB and drops only the folios
// a range covers whole, so a range starts at the 2 MiB boundary at or
// before the last one's end: started at its page, a folio across the
// boundary was never dropped, and in a test writing 100 KiB entries a
// third of the pages behind the bound stayed cached.
func (sg *segments) dropOld() {
	now := time.Now()
	sg.mu.Lock()
	limit := sg.dropLimit(now)
	var work []dropRange
	for len(sg.spans) > 0 && sg.dropped < limit {
		sp := sg.spans[0]
		base := sp.f.base.Load() - 1
		lo, hi := max(sg.dropped, base), min(limit, sp.end)
		// done: sealed, and all of it behind the limit; its last pages
		// are dropped to the end of the file.
		done := sp.f != sg.active && sp.end <= limit
		if hi > lo || done {
			off := (min(lo, sp.end) - base) &^ (dropAlign - 1)
			r := dropRange{f: sp.f, off: off, n: hi - base - off}
			if done {
				r.n = 0
			}
			work = append(work, r)
		}
		if !done {
			break
		}
		sg.spans = sg.spans[1:]
	}
	sg.dropped = max(sg.dropped, limit)
	sg.mu.Unlock()
	if len(work) == 0 {
		return
	}
	for _, r := range work {
		// In chunks from the range's start, which is on a folio
		// boundary, so each chunk's folios are whole; the last goes to
		// the range's end (n 0: the file's).
		for off := r.off; ; off += dropChunk {
			n := int64(dropChunk)
			last := r.n > 0 && off+n >= r.off+r.n || r.n == 0 && off+n >= sg.size
			if last && r.n > 0 {
				n = r.off + r.n - off
			} else if last {
				n = 0
			}
			if !sg.dropSome(r.f, off, n) || last {
				break
			}
		}
	}
}

// dropSome drops the pages of n bytes of f from off (n 0: to its end) and
// marks them cold; false if f was removed meanwhile.
func (sg *segments) dropSome(f *segFile, off, n int64) bool {
	sg.rmu.RLock()
	defer sg.rmu.RUnlock()
	if sg.files[f.n] != f {
		return false
	}
	dropPages(f.f, off, n)
	// Only the drop loop moves cold after open.
	end := int64(math.MaxInt64)
	if n > 0 {
		end = off + n
	}
	f.cold.Store(max(f.cold.Load(), end))
	return true
}

// read appends p's record to buf, checks its length and CRC, and returns
// buf and where in it the entry starts (the record's header stays in buf
// before it, so one read fills both without moving the entry).
func (sg *segments) read(p segPointer, buf []byte) ([]byte, int, error) {
	buf, at, err := sg.readSpan(p.Seg, p.Off, segRecordHeader+p.Len, buf)
	if err != nil {
		return buf, 0, err
	}
	if err := checkRecord(buf[at:], p); err != nil {
		return buf[:at], 0, err
	}
	return buf, at + segRecordHeader, nil
}

// readSpan appends n bytes of segment seg from off to buf in one read and
// returns where they start: the records of a run of entries written one
// after another.
func (sg *segments) readSpan(seg, off, n uint32, buf []byte) ([]byte, int, error) {
	sg.rmu.RLock()
	defer sg.rmu.RUnlock()
	sg.spanReads.Add(1)
	f := sg.files[seg]
	if f == nil {
		return buf, 0, fmt.Errorf("%w: segment %d of an entry is missing", ErrCorrupt, seg)
	}
	if f.readsDirect(int64(off), int(n)) {
		if b, at, ok := sg.readDirect(f, int64(off), int(n), buf); ok {
			return b, at, nil
		}
	}
	sg.noteRead(f, int64(off))
	at := len(buf)
	buf = slices.Grow(buf, int(n))[:at+int(n)]
	if _, err := f.f.ReadAt(buf[at:], int64(off)); err != nil {
		return buf[:at], 0, fmt.Errorf("%w: segment %d offset %d: %v", ErrCorrupt, seg, off, err)
	}
	return buf, at, nil
}

// checkRecord verifies that rec, read where p points, is p's record: its
// header gives p's length and its entry's checksum.
func checkRecord(rec []byte, p segPointer) error {
	if len(rec) < segRecordHeader+int(p.Len) || binary.BigEndian.Uint32(rec) != p.Len ||
		crc32.Checksum(rec[segRecordHeader:segRecordHeader+int(p.Len)], castagnoli) != binary.BigEndian.Uint32(rec[4:]) {
		return badRecord(p)
	}
	return nil
}

// badRecord is the error for a record that is not the one p points to.
func badRecord(p segPointer) error {
	return fmt.Errorf("%w: segment %d offset %d does not hold the %d-byte entry its pointer gives", ErrCorrupt, p.Seg, p.Off, p.Len)
}

// readRun appends run's records to buf in one read and checks each as
// checkRecord does. It returns buf, where the run's first byte is in it,
// and on error the index of the record the error is about (0 for one
// about the read).
func (sg *segments) readRun(run *segRun, buf []byte) ([]byte, int, int, error) {
	if buf, at, bad, ok, err := sg.readRunPieces(run, buf); ok {
		return buf, at, bad, err
	}
	buf, at, err := sg.readSpan(run.seg, run.off, run.end-run.off, buf)
	if err != nil {
		return buf, 0, 0, err
	}
	for i, r := range run.items {
		if err := checkRecord(buf[at+int(r.ptr.Off-run.off):], r.ptr); err != nil {
			return buf, at, i, err
		}
	}
	return buf, at, 0, nil
}

// lowestUncommitted is the lowest segment a record not yet committed may
// be in: the lowest with records in flight, else the one being written
// (MaxUint32 before the first write).
func (sg *segments) lowestUncommitted() uint32 {
	sg.mu.Lock()
	defer sg.mu.Unlock()
	n := uint32(math.MaxUint32)
	if sg.active != nil {
		n = sg.active.n
	}
	for m := range sg.inflight {
		n = min(n, m)
	}
	return n
}

// removeBelow removes the segments numbered below keep, never the one
// being written, and returns how many it removed.
func (sg *segments) removeBelow(keep uint32) (int, error) {
	sg.mu.Lock()
	if sg.active != nil {
		keep = min(keep, sg.active.n)
	}
	var gone []*segFile
	sg.rmu.Lock()
	for n, f := range sg.files {
		if n < keep {
			gone = append(gone, f)
			delete(sg.files, n)
		}
	}
	sg.rmu.Unlock()
	sg.dirty = slices.DeleteFunc(sg.dirty, func(f *segFile) bool { return f.n < keep })
	sg.mu.Unlock()
	// The files are closed, renamed and removed outside poolMu, which the
	// making of the next segment takes.
	var errs []error
	now := time.Now()
	var kept []pooled
	for _, f := range gone {
		closeDirect(f)
		errs = append(errs, f.f.Close())
		name := sg.fs.PathJoin(sg.dir, segName(f.n))
		if sg.fs.Rename(name, sg.fs.PathJoin(sg.dir, recycleName(f.n))) == nil {
			// Not made durable: after a crash it is a segment again,
			// which nothing points into, and is removed in turn.
			kept = append(kept, pooled{name: recycleName(f.n), at: now})
			continue
		}
		errs = append(errs, sg.fs.Remove(name))
	}
	sg.poolMu.Lock()
	sg.pool = append(sg.pool, kept...)
	// The oldest go first: over poolMax, or unused for poolIdle beyond the
	// poolMin kept whatever their age.
	var drop []string
	for len(sg.pool) > sg.poolMax() || len(sg.pool) > poolMin && now.Sub(sg.pool[0].at) > poolIdle {
		drop = append(drop, sg.pool[0].name)
		sg.pool = sg.pool[1:]
	}
	sg.poolMu.Unlock()
	for _, name := range drop {
		errs = append(errs, sg.fs.Remove(sg.fs.PathJoin(sg.dir, name)))
	}
	return len(gone), errors.Join(errs...)
}

// diskBytes is the segment files' size on disk (a new segment's whole
// size is allocated when it is made), and pool the part of it that removed
// segments kept for reuse take.
func (sg *segments) diskBytes() (n, pool uint64) {
	sg.rmu.RLock()
	for _, f := range sg.files {
		if fi, err := f.f.Stat(); err == nil {
			n += uint64(fi.Size())
		}
	}
	sg.rmu.RUnlock()
	sg.poolMu.Lock()
	defer sg.poolMu.Unlock()
	for _, p := range sg.pool {
		if fi, err := sg.fs.Stat(sg.fs.PathJoin(sg.dir, p.name)); err == nil {
			pool += uint64(fi.Size())
		}
	}
	return n + pool, pool
}

// count is the number of segment files.
func (sg *segments) count() int {
	sg.rmu.RLock()
	defer sg.rmu.RUnlock()
	return len(sg.files)
}

func (sg *segments) close() error {
	sg.mu.Lock()
	if !sg.closed && sg.dropKick != nil {
		close(sg.dropKick)
	}
	sg.closed = true
	// Records no sync covered were never acknowledged; they are written
	// anyway, as they were before records were gathered.
	_ = sg.flushLocked()
	sg.mu.Unlock()
	sg.pwg.Wait()
	sg.rmu.Lock()
	defer sg.rmu.Unlock()
	var errs []error
	for n, f := range sg.files {
		closeDirect(f)
		errs = append(errs, f.f.Close())
		delete(sg.files, n)
	}
	return errors.Join(errs...)
}

// collectSegments removes the segments no retained entry is in: those
// below every partition's first entry in a segment.
func (s *Store) collectSegments() error {
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	if s.segs.count() <= 1 {
		return nil
	}
	// Taken before the scan: an entry the scan cannot see yet (written,
	// not yet in pebble) is in this segment or a later one.
	keep := s.segs.lowestUncommitted()
	s.mu.RLock()
	pids := make([]PartitionID, 0, len(s.mu.partitions))
	for pid := range s.mu.partitions {
		pids = append(pids, pid)
	}
	s.mu.RUnlock()
	for _, pid := range pids {
		n, ok, err := s.firstSegment(pid)
		if err != nil {
			return err
		}
		if ok {
			keep = min(keep, n)
		}
	}
	// Appends made durable by their segments may not be durable in
	// pebble yet, and replay cannot bring back what a removed segment
	// held. Segments below keep hold only entries retention or deletion
	// dropped, whose own WAL fsyncs made the appends before them durable;
	// this fsync (one a pass) makes sure without relying on that: every
	// append committed before keep was taken is applied, so it is then
	// durable in pebble.
	if err := s.db.LogData(nil, pebble.Sync); err != nil {
		return err
	}
	removed, err := s.segs.removeBelow(keep)
	if removed > 0 {
		s.log.Debug("removed segments", "count", removed, "first kept", keep)
	}
	return err
}

// kickCollection asks the collector to run; kicks while it runs coalesce.
func (s *Store) kickCollection() {
	select {
	case s.gcKick <- struct{}{}:
	default:
	}
}

// collectLoop removes unreferenced segments after retention or a topic
// deletion asked for it, once however many partitions did.
func (s *Store) collectLoop() {
	defer s.wg.Done()
	for {
		select {
		case <-s.stop:
			return
		case <-s.gcKick:
			if err := s.collectSegments(); err != nil {
				s.log.Warn("removing segments failed; retried after the next retention", "err", err)
			}
		}
	}
}

// firstSegment is the segment of a partition's first entry stored in one.
// Entries stored in pebble are stepped over by their length, unread; an
// entry's first bytes are its envelope version, never the pointer mark.
func (s *Store) firstSegment(pid PartitionID) (uint32, bool, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: pidPrefix(kindEntry, pid),
		UpperBound: pidEnd(kindEntry, pid),
	})
	if err != nil {
		return 0, false, err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if _, _, part := decodeEntryPartKey(it.Key()); part {
			continue // a part of an entry in pebble, whatever its bytes
		}
		if lv := it.LazyValue(); lv.Len() != segPointerSize {
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return 0, false, err
		}
		if p, ok := decodeSegPointer(v); ok {
			return p.Seg, true, nil
		}
	}
	return 0, false, it.Error()
}
