package localstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/ternmq/tern/protocols"
)

// AppendRequest is one entry to append.
type AppendRequest struct {
	// Entry is an encoded protocols entry (envelope and one RecordBatch
	// v2). The store stamps the base offset and the append time into it in
	// place and does not keep it after Append returns, so callers may reuse
	// the buffer. Callers validate the batch (CRC and all); the store checks
	// only what its invariants need, and derives a large entry's segment
	// checksum from the batch's CRC (crc.go), so a batch whose CRC was not
	// checked could be stored unreadable.
	Entry []byte
	// Envelope and Batch, used when Entry is nil, are the entry in parts:
	// the store encodes them straight into its write batch, saving the copy
	// an encoded Entry costs. Neither is kept after StartAppend returns.
	Envelope *protocols.Envelope
	Batch    []byte
	// Durability overrides the store default for this append.
	Durability Durability
	// Guard, if set, runs under the partition's append lock with the base
	// offset the entry would get. It may return ops to write in the same
	// pebble batch (deduplication state that must agree with the log), or
	// a non-nil Skip to write nothing and answer with that result (a
	// duplicate), or an error to refuse the append.
	//
	// A Guard that keeps memory state must treat it as pending until
	// Append returns: if the write fails the store refuses all later writes
	// (ErrFailed) and the node reloads its state from disk on restart.
	Guard func(base int64) (ops []Op, skip *AppendResult, err error)
}

// AppendResult reports where an entry landed.
type AppendResult struct {
	BaseOffset int64
	Count      int64
	AppendTime int64
	// LogStart is the log start offset after the append.
	LogStart int64
	// Skipped is set when the Guard answered instead of a write.
	Skipped bool
}

// Append adds an entry to the end of a partition's log and returns once it
// is durable under the chosen durability. It is StartAppend then Wait.
func (s *Store) Append(ctx context.Context, pid PartitionID, req AppendRequest) (AppendResult, error) {
	pa, err := s.StartAppend(ctx, pid, req)
	if err != nil {
		return AppendResult{}, err
	}
	return pa.Wait()
}

// PendingAppend is an append whose offsets are assigned and whose write is
// submitted, but whose durability has not been awaited yet.
type PendingAppend struct {
	// item is the append's place in the committer's queue (with segments).
	item   *commitItem
	s      *Store
	p      *partition
	b      *pebble.Batch
	res    AppendResult
	end    int64
	bytes  int64
	recs   int64
	synced bool
	done   bool
}

// StartAppend assigns the entry its offsets and submits the write, in
// offset order, and returns without waiting for the fsync. Callers that
// pipeline requests (a Kafka connection with several produce requests in
// flight) start appends in request order and wait for each afterwards, so
// the order of entries follows the order of requests while their fsyncs are
// shared. Every PendingAppend must be waited for.
//
// Ordering: offsets are assigned and the pebble batch is submitted under the
// partition lock, so batches reach pebble (and the segment stream) in
// offset order; the fsync wait happens after the lock is released, so
// appenders queued behind each other are made durable by one shared fsync
// (the committer's segment fdatasync, or pebble's group commit inline).
// The high watermark moves only after the wait.
func (s *Store) StartAppend(ctx context.Context, pid PartitionID, req AppendRequest) (*PendingAppend, error) {
	p, err := s.partition(pid)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	batch, size, err := req.parts()
	if err != nil {
		return nil, err
	}
	h, err := protocols.ParseBatchHeader(batch)
	if err != nil {
		return nil, err
	}
	count := h.OffsetCount()
	if count <= 0 || h.NumRecords <= 0 {
		return nil, fmt.Errorf("%w: batch covers %d offsets with %d records", protocols.ErrCorruptBatch, count, h.NumRecords)
	}
	// A reader joins a large entry's parts up to the length its batch
	// header gives, so that length must be the batch's.
	if h.Size() != len(batch) {
		return nil, fmt.Errorf("%w: batchLength %d but %d bytes follow it", protocols.ErrCorruptBatch, h.Length, len(batch)-12)
	}
	dur := req.Durability
	if dur == "" {
		dur = s.cfg.Durability
	}
	sync := dur == DurabilitySync

	p.mu.Lock()
	if err := s.check(); err != nil {
		p.mu.Unlock()
		return nil, err
	}
	base := p.head.Next
	var ops []Op
	if req.Guard != nil {
		var skip *AppendResult
		ops, skip, err = req.Guard(base)
		if err != nil || skip != nil {
			start := p.head.Start
			p.mu.Unlock()
			if skip != nil {
				r := *skip
				r.Skipped = true
				r.LogStart = start
				return &PendingAppend{s: s, p: p, res: r, end: -1, synced: true}, nil
			}
			return nil, err
		}
	}
	now := max(s.cfg.Now().UnixMilli(), p.head.LastAppend)
	// The batch is sized for the entry up front. Grown by doubling from
	// the capacity of whichever pooled batch pebble hands out, a 1 MiB
	// entry cost 2 to 3 MiB of buffers, the last one too large to be
	// pooled again.
	var (
		b    *pebble.Batch
		item *commitItem
	)
	if s.segWrites {
		b, item, err = s.writeSegment(&req, pid, base, size, now, ops)
	} else {
		bs := batchSize(size, ops)
		b = s.db.NewBatchWithSize(bs, pebble.WithInitialSizeBytes(bs))
		err = req.write(b, pid, base, size, now)
	}
	if err != nil {
		p.mu.Unlock()
		_ = b.Close()
		return nil, err
	}
	nh := p.head
	nh.Next = base + count
	nh.Bytes += int64(size)
	nh.Entries++
	nh.MaxTime = max(nh.MaxTime, h.MaxTimestamp)
	nh.LastAppend = now
	idx := indexValue{Count: count, Size: int64(size), AppendTime: now, MaxTime: nh.MaxTime}
	_ = b.Set(logKey(kindIndex, pid, base), idx.encode(), nil)
	_ = b.Set(headKey(pid), nh.encode(), nil)
	for _, op := range ops {
		if err := applyOp(b, op); err != nil {
			if item != nil {
				s.segs.committed(item.ptr)
			}
			p.mu.Unlock()
			_ = b.Close()
			return nil, err
		}
	}
	if item != nil && item.hasPtr {
		// The batch goes into the segment stream too, behind its entry,
		// so the segment fdatasync makes the append durable without
		// pebble's WAL: after a crash, replay applies it (replay.go).
		if err := s.segs.writeBatch(pid, base, nh.Next, item.ptr, b.Repr()); err != nil {
			s.segs.committed(item.ptr)
			p.mu.Unlock()
			_ = b.Close()
			return nil, err
		}
	}
	switch {
	case s.segWrites:
		// Through the committer, in this partition's offset order.
		if item == nil {
			item = &commitItem{done: make(chan error, 1)}
		}
		item.b, item.sync = b, sync
		if !sync && item.hasPtr {
			item.early, item.p, item.end, item.size = true, p, nh.Next, int64(size)
			// Past the backlog bound it is acknowledged once durable.
			item.held = s.asyncBacklog.Add(item.size) > s.cfg.AsyncBacklog
		}
		if !s.cmt.enqueue(item) {
			if item.early {
				s.asyncBacklog.Add(-item.size)
			}
			err = ErrClosed
			if item.hasPtr {
				s.segs.committed(item.ptr)
			}
		}
	case sync:
		err = s.db.ApplyNoSyncWait(b, pebble.Sync)
	default:
		if err = s.db.Apply(b, pebble.NoSync); err == nil {
			s.markUnsynced()
		}
	}
	if err != nil {
		if !errors.Is(err, ErrClosed) {
			s.fail(err)
		}
		p.mu.Unlock()
		_ = b.Close()
		return nil, err
	}
	p.head = nh
	p.mu.Unlock()
	return &PendingAppend{
		item: item,
		s:    s, p: p, b: b, end: nh.Next, synced: !sync && item == nil,
		bytes: int64(size), recs: int64(h.NumRecords),
		res: AppendResult{BaseOffset: base, Count: count, AppendTime: now},
	}, nil
}

// parts returns the request's batch and the encoded entry's size.
func (req *AppendRequest) parts() (batch []byte, size int, err error) {
	if req.Entry != nil {
		at, err := protocols.EntryBatchOffset(req.Entry)
		if err != nil {
			return nil, 0, err
		}
		return req.Entry[at:], len(req.Entry), nil
	}
	env := req.Envelope
	if env == nil {
		env = &protocols.Envelope{}
	}
	size, err = protocols.EntrySize(env, len(req.Batch))
	return req.Batch, size, err
}

// entryPartSize is the largest pebble value an entry is stored in. A
// larger entry is stored as its first entryPartSize bytes under its own key
// and the rest in parts under entryPartKey. Pebble's flush keeps its block
// buffers for reuse only up to 256 KiB (colblk's maxBlockRetainedSize and
// block's tempBufferMaxReusedSize), and a blob block is one value plus at
// most a few KiB of smaller ones: every value above that size cost two
// fresh buffers of its size at each flush. Kafka clients batch up to 1 MB.
const entryPartSize = 192 << 10

// entryParts is how many parts after the first an entry of size bytes has.
func entryParts(size int) int { return (max(size, 1) - 1) / entryPartSize }

// batchSize is the pebble batch size an append needs: the entry, its
// index and head records, the guard's operations, and each record's kind,
// key and length prefixes.
func batchSize(entry int, ops []Op) int {
	const header, record, small = 12, 1 + 2*binary.MaxVarintLen32 + 13, 64
	n := header + record + entry + 2*(record+small) + entryParts(entry)*(record+4)
	for _, op := range ops {
		n += 1 + 2*binary.MaxVarintLen32 + len(op.Key) + len(op.Value)
	}
	return n
}

// write puts the entry, stamped with its base offset and append time, into
// b: whole under its key, or in parts when it is larger than entryPartSize.
// An entry in parts is encoded in place in b's buffer.
func (req *AppendRequest) write(b *pebble.Batch, pid PartitionID, base int64, size int, now int64) error {
	key := logKey(kindEntry, pid, base)
	first := min(size, entryPartSize)
	var rest []byte // what follows the first part
	if req.Entry != nil {
		if err := protocols.StampEntry(req.Entry, base, now); err != nil {
			return err
		}
		if err := b.Set(key, req.Entry[:first], nil); err != nil {
			return err
		}
		rest = req.Entry[first:]
	} else {
		env := req.Envelope
		if env == nil {
			env = &protocols.Envelope{}
		}
		// The envelope's length is a u16, so the first part always holds
		// it and the batch header.
		envLen := size - len(req.Batch)
		if first < envLen+protocols.BatchHeaderSize {
			return fmt.Errorf("localstore: a %d-byte envelope leaves no room for the batch header in a %d-byte part", envLen, first)
		}
		op := b.SetDeferred(len(key), first)
		copy(op.Key, key)
		enc, err := protocols.AppendEntry(op.Value[:0], env, req.Batch[:first-envLen])
		if err != nil {
			return err
		}
		if len(enc) != first || &enc[0] != &op.Value[0] {
			return fmt.Errorf("localstore: entry encoded to %d bytes, %d were reserved", len(enc), first)
		}
		if err := protocols.StampEntry(op.Value, base, now); err != nil {
			return err
		}
		if err := op.Finish(); err != nil {
			return err
		}
		rest = req.Batch[first-envLen:]
	}
	for part := uint32(1); len(rest) > 0; part++ {
		n := min(len(rest), entryPartSize)
		if err := b.Set(entryPartKey(pid, base, part), rest[:n], nil); err != nil {
			return err
		}
		rest = rest[n:]
	}
	return nil
}

// writeSegment writes the entry, stamped with its base offset and append
// time, as a segment record, and returns a batch holding its pointer and
// the committer item that will make the record durable before the pointer.
func (s *Store) writeSegment(req *AppendRequest, pid PartitionID, base int64, size int, now int64, ops []Op) (*pebble.Batch, *commitItem, error) {
	b := s.db.NewBatchWithSize(batchSize(segPointerSize, ops))
	// The record is the entry, envelope then batch. A batch given on its
	// own is written from where the request holds it: the envelope and
	// the batch's header (whose base offset the stamp sets; the caller's
	// batch is left as it was) are encoded apart, the rest follows them in
	// the same write instead of being copied behind them first.
	head, body := req.Entry, []byte(nil)
	var batchAt int
	var err error
	if head == nil {
		env := req.Envelope
		if env == nil {
			env = &protocols.Envelope{}
		}
		bp := envBufs.Get().(*[]byte)
		defer envBufs.Put(bp)
		enc, err := protocols.AppendEnvelope((*bp)[:0], env)
		if err != nil {
			return b, nil, err
		}
		// StartAppend parsed the batch's header: it is all there.
		enc = append(enc, req.Batch[:protocols.BatchHeaderSize]...)
		*bp = enc[:0]
		head, body = enc, req.Batch[protocols.BatchHeaderSize:]
		batchAt = len(enc) - protocols.BatchHeaderSize
	} else if batchAt, err = protocols.EntryBatchOffset(head); err != nil {
		return b, nil, err
	}
	if n := len(head) + len(body); n != size {
		return b, nil, fmt.Errorf("localstore: entry encoded to %d bytes, %d were expected", n, size)
	}
	if err := protocols.StampEntry(head, base, now); err != nil {
		return b, nil, err
	}
	ptr, err := s.segs.writeSum(head, body, recordSum(head, body, batchAt))
	if err != nil {
		return b, nil, err
	}
	item := &commitItem{ptr: ptr, hasPtr: true, done: make(chan error, 1)}
	v := ptr.encode()
	if err := b.Set(logKey(kindEntry, pid, base), v[:], nil); err != nil {
		s.segs.committed(ptr)
		return b, nil, err
	}
	return b, item, nil
}

// envBufs are buffers an entry's envelope is encoded in before its segment
// write, which copies or writes it, so the buffer is free again when it
// returns.
var envBufs = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// Offsets are the entry's assigned offsets, known before it is durable.
func (pa *PendingAppend) Offsets() (base, count int64) { return pa.res.BaseOffset, pa.res.Count }

// Ready reports whether Wait would return without waiting. It may say no
// when Wait would not wait (an append pebble commits itself), never the
// reverse.
func (pa *PendingAppend) Ready() bool {
	switch {
	case pa.done:
		return true
	case pa.end < 0:
		return pa.p.hw.Load() >= pa.res.BaseOffset+pa.res.Count
	case pa.item != nil:
		return (pa.item.early && !pa.item.held) || len(pa.item.done) > 0
	}
	return pa.synced
}

// Wait waits until the entry is durable (under sync durability), moves the
// high watermark and returns the result; an async append in a segment
// returns at once, and the committer moves the high watermark once it is
// durable. Calling it again returns the same.
func (pa *PendingAppend) Wait() (AppendResult, error) {
	if pa.done {
		return pa.res, nil
	}
	pa.done = true
	if pa.end < 0 { // answered by the guard
		return pa.res, pa.waitCovered()
	}
	early := pa.item != nil && pa.item.early
	var err error
	switch {
	case early:
		// Acknowledged after the write; the committer makes the entry
		// durable, applies (and closes) its batch and moves the high
		// watermark. Past the backlog bound it waits for that, as a
		// sync append does.
		pa.b = nil
		if pa.item.held {
			pa.s.stats.syncWaits.Add(1)
			err = <-pa.item.done
		}
	case pa.item != nil:
		if pa.item.sync {
			pa.s.stats.syncWaits.Add(1)
		}
		err = <-pa.item.done
	case !pa.synced:
		pa.s.stats.syncWaits.Add(1)
		err = pa.b.SyncWait()
	}
	if pa.b != nil {
		_ = pa.b.Close()
		pa.b = nil
	}
	if err != nil {
		pa.s.fail(err)
		return AppendResult{}, err
	}
	pa.s.stats.appends.Add(1)
	pa.s.stats.appendBytes.Add(pa.bytes)
	pa.s.stats.records.Add(pa.recs)
	if !early {
		pa.p.advance(pa.end)
	}
	pa.res.LogStart = pa.p.start.Load()
	return pa.res, nil
}

// waitCovered waits until the high watermark covers the offsets a guard
// answered with: a resend recognised as a duplicate while the original
// still waits for its fsync must not be acknowledged before it.
func (pa *PendingAppend) waitCovered() error {
	target := pa.res.BaseOffset + pa.res.Count
	for {
		hw := pa.p.hw.Load()
		if hw >= target {
			return nil
		}
		if err := pa.s.Wait(context.Background(), []Watch{{PID: pa.p.id, Offset: hw}}); err != nil {
			return err
		}
		if err := pa.s.check(); err != nil {
			return err
		}
		pa.p.wmu.Lock()
		closed := pa.p.closed
		pa.p.wmu.Unlock()
		if closed && pa.p.hw.Load() < target {
			return fmt.Errorf("%w: partition %d closed before offset %d was durable", ErrPartitionNotFound, pa.p.id, target-1)
		}
	}
}

// Offsets are a partition's log start offset and high watermark.
func (s *Store) Offsets(pid PartitionID) (start, hw int64, err error) {
	p, err := s.partition(pid)
	if err != nil {
		return 0, 0, err
	}
	return p.start.Load(), p.hw.Load(), nil
}

// Stats is a partition's size.
type Stats struct {
	Start, HighWatermark int64
	Bytes, Entries       int64
	LastAppend           int64 // Unix ms, 0 if never
}

// PartitionStats reports a partition's bounds and size.
func (s *Store) PartitionStats(pid PartitionID) (Stats, error) {
	p, err := s.partition(pid)
	if err != nil {
		return Stats{}, err
	}
	p.mu.Lock()
	h := p.head
	p.mu.Unlock()
	return Stats{Start: h.Start, HighWatermark: p.hw.Load(), Bytes: h.Bytes, Entries: h.Entries, LastAppend: h.LastAppend}, nil
}

// Entry is one stored entry: offsets [BaseOffset, BaseOffset+Count) and the
// encoded value, which the caller owns.
type Entry = protocols.StoredEntry

// Read returns whole entries starting with the one that holds offset from,
// up to maxBytes of entry data but always at least one entry when from is
// below the high watermark. Reading at the high watermark returns nothing;
// reading outside [start, hw] is a *protocols.OffsetOutOfRangeError.
func (s *Store) Read(pid PartitionID, from int64, maxBytes int) ([]Entry, error) {
	es, _, err := s.ReadInto(pid, from, maxBytes, nil)
	return es, err
}

// ReadInto reads as Read does, with the entries' values in buf's storage
// as far as it reaches (buf is a buffer to reuse; nil allocates). Values
// that do not fit go into new buffers, never by moving what was read. It
// returns the largest buffer it used, which the caller may reuse once it
// is done with the entries: a consumer reading on at full speed then
// allocates (and the runtime clears and collects) nothing per read, after
// the first few reads of a size.
func (s *Store) ReadInto(pid PartitionID, from int64, maxBytes int, buf []byte) ([]Entry, []byte, error) {
	buf = buf[:0]
	p, err := s.partition(pid)
	if err != nil {
		return nil, buf, err
	}
	hw := p.hw.Load()
	start := p.start.Load()
	if from < start || from > hw {
		return nil, buf, &protocols.OffsetOutOfRangeError{Requested: from, Start: start, End: hw}
	}
	if from == hw {
		return nil, buf, nil
	}
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: pidPrefix(kindEntry, pid),
		UpperBound: logKey(kindEntry, pid, hw),
	})
	if err != nil {
		return nil, buf, err
	}
	defer it.Close()
	// A consumer reading on reads at the next entry's base offset: a
	// forward seek finds that entry without the backward seek, which makes
	// the iterator change direction and copy the value it steps over. A
	// read from inside an entry steps back to the entry holding it.
	ok := it.SeekGE(logKey(kindEntry, pid, from))
	if ok {
		if _, base, _ := decodeLogKey(it.Key()); base > from {
			ok = false
		}
	}
	if !ok {
		ok = it.SeekLT(logKey(kindEntry, pid, from+1))
		if base, _, part := decodeEntryPartKey(it.Key()); ok && part {
			// The last part of a large entry: step to its first.
			ok = it.SeekGE(logKey(kindEntry, pid, base))
		}
		if !ok {
			ok = it.First()
		}
	}
	var (
		metas  []Entry
		read   int   // bytes of entries read
		placed int   // bytes in the buffers filled before buf
		keep   = buf // the largest buffer used, returned for reuse
		run    segRun
	)
	// room makes room for need more bytes at the end of buf. A new chunk
	// leaves the entries read so far where they are, so nothing is
	// copied; each chunk is at least twice the last need and what the
	// read has taken so far, so a read of many entries takes few chunks,
	// while a tailing read of one or two entries allocates little more
	// than it reads. A chunk also has room for what the earlier ones
	// hold: it is the buffer returned for reuse, and the next read of
	// this size then fits in it whole. (Sized for the rest alone, chunks
	// of a read over readBufSize never grew to hold one: every such read
	// allocated, and the runtime cleared, several megabytes.)
	room := func(need int) {
		if cap(buf)-len(buf) < need {
			placed += len(buf)
			rest := max(need, min(maxBytes-read, readBufSize, 2*max(need, read)))
			buf = make([]byte, 0, placed+rest)
			if cap(buf) > cap(keep) {
				keep = buf
			}
		}
	}
	// flush reads the pending run of segment records in one read and
	// adds their entries.
	flush := func() error {
		if len(run.items) == 0 {
			return nil
		}
		room(int(run.end-run.off) + s.segs.slack(run.seg, run.off, run.end-run.off))
		var at, bad int
		var err error
		if buf, at, bad, err = s.segs.readRun(&run, buf); err != nil {
			return fmt.Errorf("partition %d offset %d: %w", pid, run.items[bad].base, err)
		}
		for _, r := range run.items {
			rec := buf[at+int(r.ptr.Off-run.off):]
			entry := rec[segRecordHeader : segRecordHeader+int(r.ptr.Len) : segRecordHeader+int(r.ptr.Len)]
			cnt, _, err := entryHeader(entry)
			if err != nil {
				return fmt.Errorf("partition %d offset %d: %w", pid, r.base, err)
			}
			if r.base+cnt <= from {
				continue // the entry before the one holding from
			}
			metas = append(metas, Entry{BaseOffset: r.base, Count: cnt, Value: entry})
		}
		run.items = run.items[:0]
		return nil
	}
	for ; ok; ok = it.Next() {
		if _, _, part := decodeEntryPartKey(it.Key()); part {
			continue // a part of an entry skipped below
		}
		_, base, valid := decodeLogKey(it.Key())
		if !valid {
			return nil, keep, fmt.Errorf("%w: entry key %x", ErrCorrupt, it.Key())
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, keep, err
		}
		if ptr, inSegment := decodeSegPointer(v); inSegment {
			// Records of entries written one after another are read
			// together: one read for a run instead of one per entry.
			size := int(ptr.Len)
			if len(metas)+len(run.items) > 0 && read+size > maxBytes {
				break
			}
			// A run that fits what is left of the buffer is read before
			// it outgrows it, so the caller's buffer fills first.
			left, have := cap(buf)-len(buf), int(run.end-run.off)
			if !run.extends(ptr) || have <= left && have+segRecordHeader+size > left {
				if err := flush(); err != nil {
					return nil, keep, err
				}
				run.seg, run.off, run.end = ptr.Seg, ptr.Off, ptr.Off
			}
			run.items = append(run.items, runItem{base: base, ptr: ptr})
			run.end = ptr.Off + segRecordHeader + ptr.Len
			if base < from {
				// Only the first entry can start before from, and it
				// may be the one before the entry holding from: read it
				// now, so the entries counted are the ones returned.
				if err := flush(); err != nil {
					return nil, keep, err
				}
				if len(metas) == 0 {
					continue
				}
			}
			read += size
			if read >= maxBytes {
				break
			}
			continue
		}
		if err := flush(); err != nil {
			return nil, keep, err
		}
		cnt, size, err := entryHeader(v)
		if err != nil {
			return nil, keep, fmt.Errorf("partition %d offset %d: %w", pid, base, err)
		}
		if len(v) < size && len(v) != entryPartSize {
			// Only an entry split into parts is shorter than its
			// header says, and its first part is always
			// entryPartSize bytes.
			return nil, keep, fmt.Errorf("partition %d offset %d: %w: the batch header gives %d bytes, the stored entry holds %d", pid, base, ErrCorrupt, size, len(v))
		}
		if base+cnt <= from {
			continue // the entry before the one holding from
		}
		if len(metas) > 0 && read+size > maxBytes {
			break
		}
		room(size)
		at := len(buf)
		buf = append(buf, v...)
		if len(v) < size {
			if buf, err = appendParts(it, base, buf, at, size); err != nil {
				return nil, keep, fmt.Errorf("partition %d offset %d: %w", pid, base, err)
			}
		}
		metas = append(metas, Entry{BaseOffset: base, Count: cnt, Value: buf[at:len(buf):len(buf)]})
		read += size
		if read >= maxBytes {
			break
		}
	}
	if err := flush(); err != nil {
		return nil, keep, err
	}
	if err := it.Error(); err != nil {
		return nil, keep, err
	}
	return metas, keep[:0], nil
}

// segRun is a run of segment records written one after another, which a
// read takes in one read.
type segRun struct {
	seg, off, end uint32
	items         []runItem
}

// runItem is one entry of a run: its base offset and its record.
type runItem struct {
	base int64
	ptr  segPointer
}

// extends says whether p's record follows the run's last one, directly
// or behind at most maxRunGap bytes (false for an empty run): the batch
// record an append writes behind its entry, or another partition's small
// record, is cheaper to read along than to end the run at.
func (r *segRun) extends(p segPointer) bool {
	return len(r.items) > 0 && p.Seg == r.seg && p.Off >= r.end && p.Off-r.end <= maxRunGap
}

// maxRunGap is the most bytes between two records a run reads over.
const maxRunGap = 1 << 10

// readBufSize bounds a buffer a read allocates before it knows how much it
// will read.
const readBufSize = 4 << 20

// entryHeader reads an entry's first part: the number of offsets the entry
// covers and its full length. An entry stored whole is its value's length
// even if its batch header says less (entries written before the store
// checked that the two agree).
func entryHeader(v []byte) (count int64, size int, err error) {
	at, err := protocols.EntryBatchOffset(v)
	if err != nil {
		return 0, 0, err
	}
	h, err := protocols.ParseBatchHeader(v[at:])
	if err != nil {
		return 0, 0, err
	}
	return h.OffsetCount(), max(len(v), at+h.Size()), nil
}

// appendParts appends the parts of a large entry that follow its first one,
// which the iterator is on, until the entry, from buf[at], is size bytes.
func appendParts(it *pebble.Iterator, base int64, buf []byte, at, size int) ([]byte, error) {
	end := at + size
	for part := uint32(1); len(buf) < end; part++ {
		if !it.Next() {
			if err := it.Error(); err != nil {
				return buf, err
			}
			return buf, fmt.Errorf("%w: entry ends after %d of its %d bytes: part %d is missing", ErrCorrupt, len(buf)-at, size, part)
		}
		b, n, ok := decodeEntryPartKey(it.Key())
		if !ok || b != base || n != part {
			return buf, fmt.Errorf("%w: key %x where part %d of the entry was expected", ErrCorrupt, it.Key(), part)
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return buf, err
		}
		buf = append(buf, v...)
	}
	if len(buf) != end {
		return buf, fmt.Errorf("%w: entry parts hold %d bytes more than its batch header gives", ErrCorrupt, len(buf)-end)
	}
	return buf, nil
}

// Watch names a partition and the offset a waiter has read up to.
type Watch struct {
	PID    PartitionID
	Offset int64
}

// Wait blocks until any watched partition's high watermark passes its
// offset, a watched partition is deleted, or ctx ends (returning ctx.Err()).
func (s *Store) Wait(ctx context.Context, watches []Watch) error {
	w := &waiter{ch: make(chan struct{}, 1), at: make([]waitSlot, len(watches))}
	parts := make([]*partition, 0, len(watches))
	defer func() {
		for k, p := range parts {
			p.remove(w, k)
		}
	}()
	for _, wt := range watches {
		p, err := s.partition(wt.PID)
		if err != nil {
			return err
		}
		p.wmu.Lock()
		closed := p.closed
		if !closed {
			p.addLocked(w, len(parts))
		}
		p.wmu.Unlock()
		if closed {
			return fmt.Errorf("%w: id %d", ErrPartitionNotFound, wt.PID)
		}
		parts = append(parts, p)
		// Checked after registering, so an advance between the check and
		// the registration cannot be missed.
		if p.hw.Load() > wt.Offset {
			return nil
		}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-w.ch:
		return s.check()
	}
}
