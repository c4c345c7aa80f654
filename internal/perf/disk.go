package perf

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// DiskPattern is a way of writing a log to disk that the disk probe times.
type DiskPattern string

const (
	// DiskLog appends to a file that was written in full before, as a log
	// that reuses its old files does (pebble recycles its WAL files so,
	// and tern its removed segments). The disk then only has the data to
	// write at each fdatasync. The file's pages are dropped from the page
	// cache before the appends start, as tern drops a reused segment's:
	// with them cached, the appends write into pages the kernel already
	// has, which a log reusing files written minutes before does not get.
	DiskLog DiskPattern = "log"
	// DiskAllocated appends to new files of DiskConfig.SegmentFile bytes,
	// each allocated whole (fallocate) and made durable one ahead of the
	// writer, as tern's segments are: there is no size to commit, but each
	// fdatasync marks the blocks it covers written (a journal commit on
	// ext4), and every append takes new pages for the page cache.
	DiskAllocated DiskPattern = "allocated"
	// DiskGrowing appends to a new file, which grows with every append:
	// each fdatasync also commits the file's new size and blocks.
	DiskGrowing DiskPattern = "growing"
	// DiskLogFlush is DiskLog plus a second writer that writes every byte
	// again into new files of DiskConfig.FlushFile bytes, each written
	// out as it goes and fsynced when full: what an LSM's memtable flush
	// does beside its WAL, and so the write pattern of a log stored in
	// pebble.
	DiskLogFlush DiskPattern = "log+flush"
)

// DiskPatterns are the patterns in the order the probe runs them.
var DiskPatterns = []DiskPattern{DiskLog, DiskAllocated, DiskGrowing, DiskLogFlush}

// DiskConfig is one run of the disk probe: appends of Record bytes arrive
// at Rate bytes per second, and one writer makes them durable in group
// commits (it writes what has arrived, fdatasyncs, and starts again), as a
// broker's log does under sync durability. Commit latency runs from an
// append's due time to the end of the fdatasync that covers it.
type DiskConfig struct {
	// Dir is where the probe writes; it makes a new directory inside and
	// removes it afterwards.
	Dir string
	// Rate is the bytes per second appended.
	Rate int64
	// Record is the bytes per append (one produce request's worth).
	Record int
	// Warmup and Duration are the unmeasured and measured time of each
	// pattern.
	Warmup, Duration time.Duration
	// Patterns are the patterns to run, in order.
	Patterns []DiskPattern
	// FlushFile is the size of the second writer's files in DiskLogFlush
	// (a memtable's size).
	FlushFile int64
	// FlushChunk is how often the second writer starts writing out what
	// it wrote (pebble's BytesPerSync).
	FlushChunk int64
	// SegmentFile is the size of DiskAllocated's files (tern's
	// storage.segment_size).
	SegmentFile int64
	// Cache is how many of the newest bytes the log's writer wrote stay
	// in the page cache; older pages are dropped after each fdatasync,
	// dropChunk bytes or more at a time, as tern's storage.segment_cache
	// does (tern's default is 256 MiB). 0 keeps every page, which the
	// kernel then keeps until memory runs short: a fresh page for every
	// append, where a writer that drops pages behind it gets back pages
	// it freed. On a virtual machine whose free memory goes back to the
	// host (free page reporting), a fresh page can cost twenty times a
	// reused one to touch.
	Cache int64
	// Settle is a pause between patterns, after one pattern's files are
	// removed and before the next starts: on a disk that discards freed
	// blocks, writes into new blocks just after a removal of gigabytes are
	// made durable far more slowly for some seconds, which would charge
	// one pattern's cleanup to the next. The log patterns wait as long
	// again between preparing their file and writing into it.
	Settle time.Duration
	// GroupCommitInterval is the least time between the starts of two
	// fdatasyncs, as tern's storage.group_commit_interval: appends that
	// arrive sooner wait for the next. 0 starts each at once.
	GroupCommitInterval time.Duration
	// Busy is how many threads spin on the CPU beside the writer during
	// each pattern's run, as a client and a server sharing the machine's
	// cores keep them busy. The writer then waits for a core as a node's
	// committer does under load: after its fdatasync returns, and when
	// appends arrive. With as many spinning threads as cores the probe is
	// the worst case, every core wanted all the time. 0 runs none.
	Busy int
	// Progress gets a line each second; nil discards them.
	Progress io.Writer
}

// DefaultDiskConfig is the load of a broker taking 130,000 1 KiB messages
// a second (half the Kafka path's maximum on a small machine) in produce
// requests of 64 KiB.
func DefaultDiskConfig() DiskConfig {
	return DiskConfig{
		Dir: ".", Rate: 130 << 20, Record: 64 << 10,
		Warmup: 2 * time.Second, Duration: 10 * time.Second,
		Patterns: DiskPatterns, FlushFile: 64 << 20, FlushChunk: 512 << 10,
		SegmentFile: 64 << 20, Cache: 256 << 20, Settle: 15 * time.Second,
	}
}

// Validate reports what to change in a config that cannot run.
func (c DiskConfig) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("disk probe: no directory given"))
	}
	if c.Rate < 1<<20 || c.Rate > 16<<30 {
		errs = append(errs, fmt.Errorf("disk probe: rate %d B/s is outside 1 MiB/s to 16 GiB/s", c.Rate))
	}
	if c.Record < 512 || c.Record > 64<<20 {
		errs = append(errs, fmt.Errorf("disk probe: record %d B is outside 512 B to 64 MiB", c.Record))
	} else if int64(c.Record) > c.Rate {
		errs = append(errs, fmt.Errorf("disk probe: record %d B is more than a second's worth at %d B/s; lower the record or raise the rate", c.Record, c.Rate))
	}
	if c.Warmup < 0 || c.Duration <= 0 || c.Warmup+c.Duration > 10*time.Minute {
		errs = append(errs, fmt.Errorf("disk probe: warm-up %v and duration %v: want a positive duration and at most 10m in all", c.Warmup, c.Duration))
	}
	if len(c.Patterns) == 0 {
		errs = append(errs, errors.New("disk probe: no patterns given"))
	}
	for _, p := range c.Patterns {
		if !isDiskPattern(p) {
			errs = append(errs, fmt.Errorf("disk probe: unknown pattern %q: want %s", p, joinPatterns(DiskPatterns)))
		}
	}
	if c.FlushFile < max(1<<20, int64(c.Record)) || c.FlushChunk <= 0 || c.FlushChunk > c.FlushFile {
		errs = append(errs, fmt.Errorf("disk probe: flush file %d B and chunk %d B: want a file of at least 1 MiB and one record, and a chunk within it", c.FlushFile, c.FlushChunk))
	}
	if c.Settle < 0 || c.Settle > 10*time.Minute {
		errs = append(errs, fmt.Errorf("disk probe: settle %v: want 0 to 10m", c.Settle))
	}
	if c.Cache < 0 {
		errs = append(errs, fmt.Errorf("disk probe: cache %d B is negative: give 0 to keep every page, or the bytes to keep", c.Cache))
	}
	if c.GroupCommitInterval < 0 || c.GroupCommitInterval > time.Second {
		errs = append(errs, fmt.Errorf("disk probe: group commit interval %v: want 0 to 1s", c.GroupCommitInterval))
	}
	if c.Busy < 0 || c.Busy > 64 {
		errs = append(errs, fmt.Errorf("disk probe: busy %d threads: want 0 to 64 (the machine's cores, %d, make every core wanted)", c.Busy, runtime.NumCPU()))
	}
	if c.SegmentFile < max(1<<20, int64(c.Record)) {
		errs = append(errs, fmt.Errorf("disk probe: segment file %d B: want at least 1 MiB and one record", c.SegmentFile))
	}
	return errors.Join(errs...)
}

func isDiskPattern(p DiskPattern) bool {
	for _, q := range DiskPatterns {
		if p == q {
			return true
		}
	}
	return false
}

func joinPatterns(ps []DiskPattern) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = string(p)
	}
	return strings.Join(s, ", ")
}

// ParseDiskPatterns reads a comma-separated list of patterns.
func ParseDiskPatterns(s string) ([]DiskPattern, error) {
	var ps []DiskPattern
	for _, f := range strings.Split(s, ",") {
		p := DiskPattern(strings.TrimSpace(f))
		if !isDiskPattern(p) {
			return nil, fmt.Errorf("unknown disk pattern %q: want %s", p, joinPatterns(DiskPatterns))
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// DiskResult is what the disk probe measured.
type DiskResult struct {
	Dir      string  `json:"dir"`
	Rate     float64 `json:"rate_mb_s"`
	Record   int     `json:"record_bytes"`
	Warmup   float64 `json:"warmup_s"`
	Duration float64 `json:"duration_s"`
	// Cache is Config.Cache in bytes: the writer's newest bytes kept in
	// the page cache (0: every page).
	Cache int64 `json:"cache_bytes"`
	// GroupCommitInterval is Config.GroupCommitInterval in milliseconds.
	GroupCommitInterval float64 `json:"group_commit_interval_ms,omitempty"`
	// Busy is Config.Busy: threads spinning beside the writer, on a
	// machine of Cores cores.
	Busy     int                 `json:"busy_threads,omitempty"`
	Cores    int                 `json:"cores,omitempty"`
	Patterns []DiskPatternResult `json:"patterns"`
}

// DiskPatternResult is one pattern's measured window.
type DiskPatternResult struct {
	Pattern DiskPattern `json:"pattern"`
	// MBps is the bytes made durable per second; Appends and Syncs count
	// appends and fdatasyncs.
	MBps    float64 `json:"mb_s"`
	Appends int64   `json:"appends"`
	Syncs   int64   `json:"syncs"`
	// Commit is the time from an append's due time to its fdatasync's end.
	Commit Latency `json:"commit"`
	// Fdatasync is the time the fdatasyncs themselves took.
	Fdatasync Latency `json:"fdatasync"`
	// FlushMBps is the second writer's rate in DiskLogFlush.
	FlushMBps float64 `json:"flush_mb_s,omitempty"`
	// Files is how many segment files DiskAllocated wrote into.
	Files int `json:"files,omitempty"`
	// BusyCores is the CPU the busy threads got over the pattern's run,
	// in cores (their CPU time over the run's time), where it is known.
	BusyCores float64 `json:"busy_cores,omitempty"`
}

// RunDisk runs each pattern in turn and reports their measured windows.
func RunDisk(ctx context.Context, cfg DiskConfig) (*DiskResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	dir, err := os.MkdirTemp(cfg.Dir, "tern-disk-probe-")
	if err != nil {
		return nil, fmt.Errorf("disk probe: %w (give a writable directory on the disk to test)", err)
	}
	defer os.RemoveAll(dir)
	res := &DiskResult{
		Dir: cfg.Dir, Rate: float64(cfg.Rate) / 1e6, Record: cfg.Record,
		Warmup: cfg.Warmup.Seconds(), Duration: cfg.Duration.Seconds(), Cache: cfg.Cache,
		GroupCommitInterval: float64(cfg.GroupCommitInterval) / float64(time.Millisecond),
		Busy:                cfg.Busy,
	}
	if cfg.Busy > 0 {
		res.Cores = runtime.NumCPU()
	}
	// One buffer of random bytes (so no layer below can compress or skip
	// them) is written over and over.
	buf := make([]byte, max(cfg.Record, int(min(cfg.FlushChunk, 4<<20))))
	_, _ = rand.Read(buf)
	for i, p := range cfg.Patterns {
		if i > 0 && cfg.Settle > 0 {
			fmt.Fprintf(cfg.Progress, "settling %v: the disk finishes with the files %s removed\n", cfg.Settle, cfg.Patterns[i-1])
			if err := Sleep(ctx, cfg.Settle); err != nil {
				return res, err
			}
		}
		pr, err := runDiskPattern(ctx, cfg, p, dir, buf)
		if err != nil {
			return res, fmt.Errorf("disk probe %s: %w", p, err)
		}
		res.Patterns = append(res.Patterns, *pr)
	}
	return res, nil
}

// diskRun is one pattern's run.
type diskRun struct {
	cfg DiskConfig
	buf []byte
	log *os.File
	// measureAt is when the measured window starts: appends due from
	// then on are counted.
	measureAt time.Time

	mu struct {
		sync.Mutex
		cond    *sync.Cond
		due     []time.Time // appends waiting for the writer
		done    bool
		commit  *hdrhistogram.Histogram
		fsync   *hdrhistogram.Histogram
		iCommit *hdrhistogram.Histogram // this second's
		iSyncs  int64
		iBytes  int64
		appends int64
		syncs   int64
		flushed int64 // bytes the second writer wrote in the window
		err     error
	}
	flush chan struct{} // a flush file's worth was appended
	// segs, in DiskAllocated, are the segment files the log moves through.
	segs *segFiles
	// kept are the writer's synced bytes whose pages are still cached,
	// oldest first, keptBytes their total (Config.Cache).
	kept      []pageSpan
	keptBytes int64
}

func runDiskPattern(ctx context.Context, cfg DiskConfig, p DiskPattern, dir string, buf []byte) (*DiskPatternResult, error) {
	total := cfg.Rate*int64((cfg.Warmup+cfg.Duration)/time.Millisecond)/1000 + 2*int64(cfg.Record)
	need := total
	if p == DiskLogFlush {
		need += 3 * cfg.FlushFile
	}
	if free, ok := freeBytes(dir); ok && free < need+need/10 {
		return nil, fmt.Errorf("needs %d MiB free in %s, %d MiB are: lower --rate or --duration, or give another --dir", need>>20, dir, free>>20)
	}
	r := &diskRun{cfg: cfg, buf: buf, flush: make(chan struct{}, 4)}
	r.mu.cond = sync.NewCond(&r.mu.Mutex)
	r.mu.commit, r.mu.fsync, r.mu.iCommit = newHist(), newHist(), newHist()
	if p == DiskAllocated {
		r.segs = &segFiles{dir: dir, size: cfg.SegmentFile, spare: make(chan segMade, 1)}
		defer r.segs.remove()
		r.segs.makeSpare()
		f, err := r.segs.next()
		if err != nil {
			return nil, fmt.Errorf("allocating a segment file: %w", err)
		}
		r.log = f
	} else {
		var err error
		r.log, err = os.OpenFile(filepath.Join(dir, string(p)+".log"), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
		if err != nil {
			return nil, err
		}
		defer func() {
			_ = r.log.Close()
			_ = os.Remove(r.log.Name())
		}()
	}
	if p == DiskLog || p == DiskLogFlush {
		fmt.Fprintf(cfg.Progress, "preparing %s: writing the %d MiB file the log will reuse\n", p, total>>20)
		if err := r.prepare(ctx, total); err != nil {
			return nil, err
		}
		dropPages(r.log, 0, 0)
		// Dropping gigabytes of pages at once can slow the machine for
		// seconds after (on a virtual machine whose freed memory goes
		// back to the host, commit p99 was 189 ms at 283 MB/s measured
		// at once, 2.1 ms after 20 s).
		if cfg.Settle > 0 {
			fmt.Fprintf(cfg.Progress, "settling %v: the machine finishes with the pages the preparation dropped\n", cfg.Settle)
			if err := Sleep(ctx, cfg.Settle); err != nil {
				return nil, err
			}
		}
	}
	stopBusy := startBusy(cfg.Busy)
	start := time.Now()
	r.measureAt = start.Add(cfg.Warmup)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); r.writer() }()
	if p == DiskLogFlush {
		wg.Add(1)
		go func() { defer wg.Done(); r.flusher(dir) }()
	}
	r.generate(ctx, p, start)
	r.mu.Lock()
	r.mu.done = true
	r.mu.cond.Broadcast()
	r.mu.Unlock()
	close(r.flush)
	wg.Wait()
	busyCPU := stopBusy()
	wall := time.Since(start)
	if r.mu.err != nil {
		return nil, r.mu.err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	secs := cfg.Duration.Seconds()
	files := 0
	if r.segs != nil {
		files = len(r.segs.made)
	}
	return &DiskPatternResult{
		Files:     files,
		Pattern:   p,
		MBps:      float64(r.mu.appends) * float64(cfg.Record) / secs / 1e6,
		Appends:   r.mu.appends,
		Syncs:     r.mu.syncs,
		Commit:    latencyOf(r.mu.commit),
		Fdatasync: latencyOf(r.mu.fsync),
		FlushMBps: float64(r.mu.flushed) / secs / 1e6,
		BusyCores: busyCPU.Seconds() / wall.Seconds(),
	}, nil
}

// startBusy starts n threads spinning on the CPU (Config.Busy) and returns
// the function that stops them and gives the CPU time they got (0 where a
// thread's CPU time is not known). GOMAXPROCS is raised by n meanwhile, so
// the probe's own goroutines keep their processors and the spinning
// threads compete with them in the kernel's scheduler, as another
// process's threads do.
func startBusy(n int) func() time.Duration {
	if n == 0 {
		return func() time.Duration { return 0 }
	}
	procs := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(procs + n)
	var (
		stop atomic.Bool
		wg   sync.WaitGroup
		cpu  atomic.Int64 // nanoseconds
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			// The thread may have run other goroutines before.
			before := threadCPU()
			spin(&stop)
			cpu.Add(int64(threadCPU() - before))
		}()
	}
	return func() time.Duration {
		stop.Store(true)
		wg.Wait()
		runtime.GOMAXPROCS(procs)
		return time.Duration(cpu.Load())
	}
}

// spin keeps a core busy until stop is set.
func spin(stop *atomic.Bool) {
	x := uint64(1)
	for !stop.Load() {
		for range 1 << 14 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	spinSink.Store(x)
}

// spinSink keeps spin's arithmetic from being optimized away.
var spinSink atomic.Uint64

// prepare writes the whole log file once and makes it durable.
func (r *diskRun) prepare(ctx context.Context, total int64) error {
	for at := int64(0); at < total; at += int64(len(r.buf)) {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := r.log.WriteAt(r.buf[:min(int64(len(r.buf)), total-at)], at); err != nil {
			return err
		}
	}
	return r.log.Sync()
}

// generate hands appends to the writer at their due times and prints a
// progress line each second.
func (r *diskRun) generate(ctx context.Context, p DiskPattern, start time.Time) {
	interval := time.Duration(float64(time.Second) * float64(r.cfg.Record) / float64(r.cfg.Rate))
	measureAt, end := r.measureAt, start.Add(r.cfg.Warmup+r.cfg.Duration)
	nextLine := start.Add(time.Second)
	lastLine := start
	perFlush := r.cfg.FlushFile / int64(r.cfg.Record)
	for i := int64(0); ctx.Err() == nil; i++ {
		due := start.Add(time.Duration(i) * interval)
		if !due.Before(end) {
			break
		}
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		now := time.Now()
		r.mu.Lock()
		if r.mu.err != nil {
			r.mu.Unlock()
			return
		}
		r.mu.due = append(r.mu.due, due)
		r.mu.cond.Signal()
		r.mu.Unlock()
		if p == DiskLogFlush && (i+1)%perFlush == 0 {
			select {
			case r.flush <- struct{}{}:
			default: // the flusher is behind; the next file waits
			}
		}
		if !now.Before(nextLine) {
			r.progressLine(p, now, start, measureAt, now.Sub(lastLine).Seconds())
			lastLine, nextLine = now, nextLine.Add(time.Second)
		}
	}
}

func (r *diskRun) progressLine(p DiskPattern, now, start, measureAt time.Time, secs float64) {
	r.mu.Lock()
	syncs, bytes, h := r.mu.iSyncs, r.mu.iBytes, r.mu.iCommit
	r.mu.iSyncs, r.mu.iBytes, r.mu.iCommit = 0, 0, newHist()
	r.mu.Unlock()
	phase := "warm-up"
	if !now.Before(measureAt) {
		phase = "measure"
	}
	l := latencyOf(h)
	fmt.Fprintf(r.cfg.Progress, "%6.1fs %-7s %-9s | %7.1f MB/s %6.0f syncs/s | commit p50 %.2f p99 %.2f max %.1f ms\n",
		now.Sub(start).Seconds(), phase, p, float64(bytes)/secs/1e6, float64(syncs)/secs, l.P50, l.P99, l.Max)
}

// writer is the group commit: it writes every append that has arrived,
// fdatasyncs, and records each append's latency.
func (r *diskRun) writer() {
	var (
		at   int64
		next time.Time // the earliest the next fdatasync may start
	)
	for {
		r.mu.Lock()
		for len(r.mu.due) == 0 && !r.mu.done {
			r.mu.cond.Wait()
		}
		if len(r.mu.due) == 0 {
			r.mu.Unlock()
			return
		}
		if rest := time.Until(next); rest > 0 && !r.mu.done {
			r.mu.Unlock()
			time.Sleep(rest)
			r.mu.Lock()
		}
		due := r.mu.due
		r.mu.due = nil
		r.mu.Unlock()
		n := int64(len(due)) * int64(r.cfg.Record)
		if r.segs != nil && at > 0 && at+n > r.cfg.SegmentFile {
			// On to the next segment file, made ahead, as tern moves
			// on when a record does not fit.
			f, err := r.segs.next()
			if err != nil {
				r.setErr(err)
				return
			}
			r.log, at = f, 0
		}
		for left := n; left > 0; {
			c := min(left, int64(len(r.buf)))
			if _, err := r.log.WriteAt(r.buf[:c], at); err != nil {
				r.setErr(err)
				return
			}
			at += c
			left -= c
		}
		s := time.Now()
		if r.cfg.GroupCommitInterval > 0 {
			next = s.Add(r.cfg.GroupCommitInterval)
		}
		if err := fdatasync(r.log); err != nil {
			r.setErr(err)
			return
		}
		e := time.Now()
		r.keep(r.log, at-n, n)
		r.mu.Lock()
		r.mu.iSyncs++
		r.mu.iBytes += n
		measured := false
		for _, d := range due {
			us := min(max(int64(e.Sub(d)/time.Microsecond), histMin), histMax)
			_ = r.mu.iCommit.RecordValue(us)
			if !d.Before(r.measureAt) {
				_ = r.mu.commit.RecordValue(us)
				r.mu.appends++
				measured = true
			}
		}
		// A sync is the window's if it made one of the window's appends
		// durable: one ending in the window with only warm-up appends
		// would time a sync no measured commit waited for.
		if measured {
			r.mu.syncs++
			_ = r.mu.fsync.RecordValue(min(max(int64(e.Sub(s)/time.Microsecond), histMin), histMax))
		}
		r.mu.Unlock()
	}
}

// pageSpan is n bytes of f from off.
type pageSpan struct {
	f      *os.File
	off, n int64
}

// dropChunk is the least the probe drops from the page cache at once, as
// tern does (localstore's dropChunk).
const dropChunk = 8 << 20

// keep notes that f's [off, off+n) was made durable, and drops from the
// page cache what the writer wrote more than Config.Cache bytes before.
func (r *diskRun) keep(f *os.File, off, n int64) {
	if r.cfg.Cache == 0 {
		return
	}
	if k := len(r.kept); k > 0 && r.kept[k-1].f == f && r.kept[k-1].off+r.kept[k-1].n == off {
		r.kept[k-1].n += n
	} else {
		r.kept = append(r.kept, pageSpan{f, off, n})
	}
	r.keptBytes += n
	if r.keptBytes-r.cfg.Cache < dropChunk {
		return
	}
	for over := r.keptBytes - r.cfg.Cache; over > 0; {
		sp := &r.kept[0]
		d := min(sp.n, over)
		dropPages(sp.f, sp.off, d)
		sp.off, sp.n = sp.off+d, sp.n-d
		r.keptBytes -= d
		over -= d
		if sp.n == 0 {
			r.kept = r.kept[1:]
		}
	}
}

// Sleep waits d, or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// segFiles are DiskAllocated's files, each made (created, allocated
// whole, made durable with its directory entry) in the background one
// ahead of the writer, as tern makes its segments.
type segFiles struct {
	dir   string
	size  int64
	n     int        // files started, for their names
	made  []*os.File // files the writer moved to
	spare chan segMade
	// making is set while a spare is being made and not yet taken.
	making bool
}

type segMade struct {
	f   *os.File
	err error
}

// makeSpare starts making the next file.
func (s *segFiles) makeSpare() {
	s.n++
	s.making = true
	name := filepath.Join(s.dir, fmt.Sprintf("allocated-%06d.seg", s.n))
	go func() {
		f, err := makeAllocated(name, s.size, s.dir)
		s.spare <- segMade{f, err}
	}()
}

// next waits for the spare and starts making the one after it.
func (s *segFiles) next() (*os.File, error) {
	m := <-s.spare
	s.making = false
	if m.err != nil {
		return nil, m.err
	}
	s.made = append(s.made, m.f)
	s.makeSpare()
	return m.f, nil
}

// remove closes and removes every file made, the spare too.
func (s *segFiles) remove() {
	if s.making {
		if m := <-s.spare; m.f != nil {
			s.made = append(s.made, m.f)
		}
	}
	for _, f := range s.made {
		_ = f.Close()
		_ = os.Remove(f.Name())
	}
}

// makeAllocated creates name with size bytes allocated and makes the file
// and its directory entry durable.
func makeAllocated(name string, size int64, dir string) (*os.File, error) {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	if err := allocateFile(f, size); err != nil {
		_ = f.Close()
		_ = os.Remove(name)
		return nil, err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		_ = os.Remove(name)
		return nil, err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return f, nil
}

// flusher writes a FlushFile of bytes into a new file for each signal,
// starting write-out every FlushChunk bytes and fsyncing at the end, and
// keeps the last two files.
func (r *diskRun) flusher(dir string) {
	for i := 0; ; i++ {
		if _, ok := <-r.flush; !ok {
			return
		}
		name := filepath.Join(dir, fmt.Sprintf("flush-%d", i))
		f, err := os.Create(name)
		if err != nil {
			r.setErr(err)
			return
		}
		for at := int64(0); at < r.cfg.FlushFile; {
			c := min(r.cfg.FlushChunk, r.cfg.FlushFile-at, int64(len(r.buf)))
			if _, err := f.Write(r.buf[:c]); err != nil {
				_ = f.Close()
				r.setErr(err)
				return
			}
			startWriteOut(f, at, c)
			at += c
		}
		err = f.Sync()
		_ = f.Close()
		if err != nil {
			r.setErr(err)
			return
		}
		r.mu.Lock()
		if !time.Now().Before(r.measureAt) {
			r.mu.flushed += r.cfg.FlushFile
		}
		r.mu.Unlock()
		if i >= 2 {
			_ = os.Remove(filepath.Join(dir, fmt.Sprintf("flush-%d", i-2)))
		}
	}
}

func (r *diskRun) setErr(err error) {
	r.mu.Lock()
	if r.mu.err == nil {
		r.mu.err = err
	}
	r.mu.cond.Broadcast()
	r.mu.Unlock()
}

// WriteJSON writes the result as one JSON object.
func (res *DiskResult) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// WriteTable writes the result as a table a person reads.
func (res *DiskResult) WriteTable(w io.Writer) error {
	cache := "every page kept in the page cache"
	if res.Cache > 0 {
		cache = fmt.Sprintf("pages more than %d MiB behind the writer dropped", res.Cache>>20)
	}
	if res.GroupCommitInterval > 0 {
		cache += fmt.Sprintf(", fdatasyncs at least %g ms apart", res.GroupCommitInterval)
	}
	if res.Busy > 0 {
		cache += fmt.Sprintf(", %s spinning beside it (%d cores)", Count(res.Busy, "thread"), res.Cores)
	}
	fmt.Fprintf(w, "disk probe in %s: %.1f MB/s in appends of %d B, one writer in group commits (write, fdatasync), %s, warm-up %gs, measured %gs\n",
		res.Dir, res.Rate, res.Record, cache, res.Warmup, res.Duration)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "pattern\tMB/s\tsyncs/s\tcommit p50 ms\tp99 ms\tp99.9 ms\tmax ms\tfdatasync p50 ms\tp99 ms\tmax ms\tflush MB/s\t"
	if res.Busy > 0 {
		head += "busy cores\t"
	}
	fmt.Fprintln(tw, head)
	for _, p := range res.Patterns {
		flush := "-"
		if p.Pattern == DiskLogFlush {
			flush = fmt.Sprintf("%.1f", p.FlushMBps)
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t",
			p.Pattern, p.MBps, float64(p.Syncs)/res.Duration, p.Commit.P50, p.Commit.P99, p.Commit.P999, p.Commit.Max,
			p.Fdatasync.P50, p.Fdatasync.P99, p.Fdatasync.Max, flush)
		if res.Busy > 0 {
			busy := "-"
			if p.BusyCores > 0 {
				busy = fmt.Sprintf("%.2f", p.BusyCores)
			}
			fmt.Fprintf(tw, "%s\t", busy)
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "commit: from an append's due time to the end of the fdatasync that covers it. log: a file written in full before, its pages dropped;\n"+
		"allocated: new segment-sized files, each allocated whole one ahead, as tern's segments are; growing: a new file;\n"+
		"log+flush: log, plus every byte written again into new files as an LSM's flush does.")
	return err
}
