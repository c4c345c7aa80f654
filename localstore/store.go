package localstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
)

// Store is one node's storage. It is safe for concurrent use.
type Store struct {
	cfg Config
	db  *pebble.DB
	// segs holds the entries written to segment files; segWrites says
	// whether new sync appends go there (and so through the committer).
	segs      *segments
	segWrites bool
	cmt       committer
	cwg       sync.WaitGroup
	ra        readAhead     // reads started ahead of readers behind (ReadOn)
	gcMu      sync.Mutex    // one segment collection at a time
	gcKick    chan struct{} // asks collectLoop to run
	log       *slog.Logger

	mu struct {
		sync.RWMutex
		topics     map[string]*TopicMeta
		partitions map[PartitionID]*partition
		nextPID    PartitionID
	}
	// view is a copy of mu's maps, replaced whenever they change (under
	// mu): lookups on the produce and fetch paths read it without a lock.
	// A fetch of a thousand partitions looks each one up, and mu's read
	// lock, taken from both cores, was a tenth of the node's CPU.
	view atomic.Pointer[registryView]
	// adminMu serialises topic creation, deletion and growth.
	adminMu sync.Mutex

	failed      atomic.Pointer[error]
	closed      atomic.Bool
	unsynced    atomic.Bool   // the WAL holds writes not yet synced
	syncKick    chan struct{} // wakes syncLoop: unsynced became true
	stop        chan struct{}
	wg          sync.WaitGroup
	writeStalls atomic.Int64
	replayed    replayStats // what Open's replay did
	// asyncBacklog is the bytes of async appends queued for the
	// committer and not yet durable (Config.AsyncBacklog).
	asyncBacklog atomic.Int64
	stats        struct {
		appends, appendBytes, records, syncWaits atomic.Int64
	}
	// commitTime is each segment append's time in the committer, from
	// being queued to being durable and visible: what a sync append's
	// producer waits for. An fdatasync slowed by a large group weighs in
	// once per append it held, where segs.fsync counts it once.
	commitTime prometheus.Histogram
}

// Op is one write in an atomic group: a Set, or a Delete when Delete is set.
type Op struct {
	Key    Key
	Value  []byte
	Delete bool
}

// Open opens (creating if needed) the store in cfg.Dir.
func Open(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.fill()
	s := &Store{cfg: cfg, log: cfg.Logger.With("component", "localstore"), stop: make(chan struct{}),
		commitTime: newLatencyHistogram()}
	s.view.Store(&registryView{}) // empty until load
	cache := pebble.NewCache(cfg.CacheSize)
	defer cache.Unref()
	opts := &pebble.Options{
		FS:           cfg.FS,
		Cache:        cache,
		MemTableSize: cfg.MemTableSize,
		// Writes wait while one memtable is full and another is still
		// flushing. A deeper queue only postpones that wait at full write
		// rate, and each queued memtable is MemTableSize of resident
		// memory: with four, a node at full rate passed 350 MiB.
		MemTableStopWritesThreshold: 2,
		// A flush writes a memtable's values to one blob file (and its
		// keys to an sstable or few). Pebble splits flushes at L0's target
		// file size counting the values an sstable refers to in blob
		// files, so at its 2 MiB default a 64 MiB memtable became 23
		// sstables and 23 blob files: 46 file creations and fsyncs per
		// flush, and L0 compactions rewriting the small sstables. Not
		// splitting raised the full-rate produce figures by a fifth to a
		// third.
		TargetFileSizes:       [7]int64{int64(cfg.MemTableSize)},
		L0CompactionThreshold: 4,
		L0StopWritesThreshold: 24,
		// One compaction at a time, always: pebble's default, pinned here
		// because the scheduler below relies on it.
		CompactionConcurrencyRange: func() (int, int) { return 1, 1 },
		FormatMajorVersion:         pebble.FormatNewest,
		Logger:                     pebbleLogger{s.log},
		EventListener: &pebble.EventListener{
			WriteStallBegin: func(pebble.WriteStallBeginInfo) { s.writeStalls.Add(1) },
		},
	}
	// pebble's default scheduler also samples the allowed concurrency
	// every 100ms, for when it rises between compactions; ours cannot
	// rise, and a waiting compaction is granted when the running one is
	// done. That ticker was a third of an idle node's wake-ups.
	opts.Experimental.CompactionScheduler = pebble.NewConcurrencyLimitSchedulerWithNoPeriodicGrantingForTest()
	profile, _ := cfg.Compression.profile()
	opts.ApplyCompressionSettings(func() pebble.DBCompressionSettings {
		return pebble.UniformDBCompressionSettings(profile)
	})
	if cfg.BlobMinSize > 0 {
		// Log entries are written once and read back in order; keeping
		// them out of the LSM's sstables (in blob files the sstables point
		// into) spares flushes and compactions from rewriting them, which
		// otherwise dominates the store's CPU and allocations.
		policy := pebble.ValueSeparationPolicy{
			Enabled:     true,
			MinimumSize: cfg.BlobMinSize,
			// Each flush adds a blob file spanning every partition's
			// keys, so an sstable compacted from many flushes refers to
			// many overlapping blob files. Above this depth pebble copies
			// the values into new blob files; at 10 that rewrote about
			// 700 MiB a few seconds into a full-rate run. A log is read in
			// key order, one blob file after another, so a deep reference
			// costs open file handles, not seeks.
			MaxBlobReferenceDepth: 1000,
			RewriteMinimumAge:     5 * time.Minute,
			TargetGarbageRatio:    0.2,
		}
		opts.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy { return policy }
	}
	db, err := pebble.Open(cfg.Dir, opts)
	if err != nil {
		return nil, fmt.Errorf("localstore: open %s: %w", cfg.Dir, err)
	}
	s.db = db
	fs := cfg.FS
	if fs == nil {
		fs = vfs.Default
	}
	if s.segs, err = openSegments(fs, cfg.Dir, cfg.SegmentSize, cfg.SegmentCache); err != nil {
		_ = db.Close()
		return nil, err
	}
	s.segs.log = s.log
	if err := s.replay(); err != nil {
		_ = s.segs.close()
		_ = db.Close()
		return nil, err
	}
	if err := s.load(); err != nil {
		_ = s.segs.close()
		_ = db.Close()
		return nil, err
	}
	s.cmt.cond = sync.NewCond(&s.cmt.mu)
	// Segments hold entries as clients sent them; a store that compresses
	// keeps its entries in pebble, which compresses its blocks.
	if s.segWrites = !cfg.InlineEntries && (cfg.Compression == "" || cfg.Compression == CompressionNone); s.segWrites {
		s.cwg.Add(1)
		go s.commitLoop()
	}
	s.gcKick = make(chan struct{}, 1)
	s.syncKick = make(chan struct{}, 1)
	s.wg.Add(2)
	go s.syncLoop()
	go s.collectLoop()
	return s, nil
}

// Close stops background work and closes pebble cleanly. Appends and reads
// after Close return ErrClosed.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.ra.close()
	close(s.stop)
	s.wg.Wait()
	s.cmt.close()
	s.cwg.Wait()
	s.mu.RLock()
	for _, p := range s.mu.partitions {
		p.close()
	}
	s.mu.RUnlock()
	var errs []error
	switch {
	case s.failed.Load() != nil:
	case s.segWrites:
		// Every append the committer took is in pebble: the next open
		// has nothing to replay, and reads no segment for it.
		s.segs.mu.Lock()
		next := s.segs.next
		s.segs.mu.Unlock()
		errs = append(errs, s.db.Set(replayFromKey(), binary.BigEndian.AppendUint32(nil, next), pebble.Sync))
	case s.unsynced.Load():
		errs = append(errs, s.db.LogData(nil, pebble.Sync))
	}
	errs = append(errs, s.db.Close(), s.segs.close())
	return errors.Join(errs...)
}

// check returns why the store cannot serve a request, if it cannot.
func (s *Store) check() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if e := s.failed.Load(); e != nil {
		return fmt.Errorf("%w: %v", ErrFailed, *e)
	}
	return nil
}

// fail records a write error that leaves memory and disk possibly apart.
// Every later write is refused until the node restarts and reloads.
func (s *Store) fail(err error) {
	if s.failed.CompareAndSwap(nil, &err) {
		s.log.Error("storage write failed; refusing further writes", "err", err)
	}
}

// markUnsynced records that pebble's WAL holds writes not yet durable in
// it; the first such write since the last sync wakes syncLoop. Call it
// after the write is applied, so the sync it leads to covers it.
func (s *Store) markUnsynced() {
	if s.unsynced.Load() || s.unsynced.Swap(true) {
		return
	}
	select {
	case s.syncKick <- struct{}{}:
	default:
	}
}

// syncLoop fsyncs the WAL AsyncSyncInterval after the first write it does
// not yet hold durably, and sleeps while there is none: an idle node wakes
// for nothing here (a ticker woke it ten times a second).
func (s *Store) syncLoop() {
	defer s.wg.Done()
	t := time.NewTimer(s.cfg.AsyncSyncInterval)
	t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.syncKick:
		}
		t.Reset(s.cfg.AsyncSyncInterval)
		select {
		case <-s.stop:
			t.Stop()
			return
		case <-t.C:
		}
		// Writes marked from here on kick again and get a sync of their
		// own; those before are in the WAL and this sync covers them.
		if s.unsynced.Swap(false) {
			if err := s.syncWAL(); err != nil {
				s.fail(err)
			}
		}
	}
}

// Sync fsyncs the WAL now.
func (s *Store) Sync() error {
	if err := s.check(); err != nil {
		return err
	}
	s.unsynced.Store(false)
	return s.db.LogData(nil, pebble.Sync)
}

// Get reads one record.
func (s *Store) Get(k Key) ([]byte, bool, error) {
	if err := s.check(); err != nil {
		return nil, false, err
	}
	v, closer, err := s.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer closer.Close()
	return bytes.Clone(v), true, nil
}

// Scan calls fn for every record whose key starts with prefix, in key order.
// The slices are valid only during the call.
func (s *Store) Scan(ctx context.Context, prefix Key, fn func(k Key, v []byte) error) error {
	if err := s.check(); err != nil {
		return err
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: PrefixEnd(prefix)})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(it.Key(), it.Value()); err != nil {
			return err
		}
	}
	return it.Error()
}

// Write applies ops atomically. With sync it returns after the WAL fsync.
func (s *Store) Write(ops []Op, sync bool) error {
	if err := s.check(); err != nil {
		return err
	}
	b := s.db.NewBatch()
	defer b.Close()
	for _, op := range ops {
		if err := applyOp(b, op); err != nil {
			return err
		}
	}
	return s.commit(b, sync)
}

func applyOp(b *pebble.Batch, op Op) error {
	if len(op.Key) == 0 {
		return fmt.Errorf("localstore: empty key in write")
	}
	if op.Delete {
		return b.Delete(op.Key, nil)
	}
	return b.Set(op.Key, op.Value, nil)
}

// commit applies b, syncing or marking the WAL as needing an interval sync.
func (s *Store) commit(b *pebble.Batch, sync bool) error {
	opts := pebble.NoSync
	if sync {
		opts = pebble.Sync
	}
	if err := s.db.Apply(b, opts); err != nil {
		s.fail(err)
		return err
	}
	if !sync {
		s.markUnsynced()
	}
	return nil
}

// PutMeta stores a metadata record durably.
func (s *Store) PutMeta(name string, value []byte) error {
	return s.Write([]Op{{Key: MetaKey(name), Value: value}}, true)
}

// GetMeta reads a metadata record.
func (s *Store) GetMeta(name string) ([]byte, bool, error) { return s.Get(MetaKey(name)) }

// DeleteMeta removes a metadata record.
func (s *Store) DeleteMeta(name string) error {
	return s.Write([]Op{{Key: MetaKey(name), Delete: true}}, true)
}

// ScanMeta visits metadata records whose names start with prefix.
func (s *Store) ScanMeta(ctx context.Context, prefix string, fn func(name string, v []byte) error) error {
	return s.Scan(ctx, MetaKey(prefix), func(k Key, v []byte) error { return fn(string(k[1:]), v) })
}

// pebbleLogger routes pebble's log lines to slog.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...))
}
func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...))
}
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error(msg)
	panic(msg)
}
