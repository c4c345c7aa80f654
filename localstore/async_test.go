package localstore

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ternmq/tern/protocols"
)

// gateFS holds every segment fdatasync while its gate is shut.
type gateFS struct {
	syncHookFS
	mu      sync.Mutex
	cond    *sync.Cond
	shut    bool
	waiting int // fdatasyncs held at the gate
}

func newGateFS() *gateFS {
	g := &gateFS{}
	g.syncHookFS = syncHookFS{FS: vfs.NewMem(), suffix: ".seg", before: g.wait}
	g.cond = sync.NewCond(&g.mu)
	return g
}

func (g *gateFS) set(shut bool) {
	g.mu.Lock()
	g.shut = shut
	g.cond.Broadcast()
	g.mu.Unlock()
}

// held reports whether an fdatasync is held at the shut gate within 10s.
func (g *gateFS) held() bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		g.mu.Lock()
		n := g.waiting
		g.mu.Unlock()
		if n > 0 {
			return true
		}
	}
	return false
}

// wait holds an fdatasync while the gate is shut.
func (g *gateFS) wait() {
	g.mu.Lock()
	g.waiting++
	g.cond.Broadcast()
	for g.shut {
		g.cond.Wait()
	}
	g.waiting--
	g.mu.Unlock()
}

// An async append is acknowledged once its records are written, before
// the segments' fdatasync; its pointer, and with it the high watermark,
// waits for that fdatasync as a sync append's does, so a reader never
// finds an entry a crash could take back. A sync append is not
// acknowledged before it.
func TestAsyncAppendIsAcknowledgedBeforeItsFsync(t *testing.T) {
	g := newGateFS()
	if err := g.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	s, pid := openTopic(t, Config{Dir: "/d", FS: g, SegmentSize: 1 << 20}, "async")
	t.Cleanup(func() { g.set(false) }) // before the store closes, should the test fail
	first := appendStamped(t, s, pid, makeEntry(t, "first", 2, 100, 1000), DurabilitySync)

	g.set(true)
	e := makeEntry(t, "async", 3, 100, 2000)
	r, err := s.Append(context.Background(), pid, AppendRequest{Entry: e, Durability: DurabilityAsync})
	if err != nil {
		t.Fatal(err)
	}
	if r.BaseOffset != 2 || r.Count != 3 {
		t.Fatalf("async append got offsets %d+%d, want 2+3", r.BaseOffset, r.Count)
	}
	if !g.held() {
		t.Fatal("no segment fdatasync began for the async append")
	}
	if _, hw, _ := s.Offsets(pid); hw != 2 {
		t.Fatalf("high watermark %d while the async append's fdatasync is held, want 2", hw)
	}
	if got := s.Metrics().AsyncBacklog; got != int64(len(e)) {
		t.Fatalf("async backlog %d bytes while the fdatasync is held, want the entry's %d", got, len(e))
	}
	if got := readAll(t, s, pid); len(got) != 1 {
		t.Fatalf("%d entries readable while the fdatasync is held, want 1", len(got))
	}
	sa, err := s.StartAppend(context.Background(), pid, AppendRequest{Entry: makeEntry(t, "sync", 1, 100, 3000), Durability: DurabilitySync})
	if err != nil {
		t.Fatal(err)
	}
	if sa.Ready() {
		t.Fatal("a sync append is ready while the segments' fdatasync is held")
	}

	g.set(false)
	if _, err := sa.Wait(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		_, hw, _ := s.Offsets(pid)
		if hw >= 6 {
			break
		}
		if err := s.Wait(ctx, []Watch{{PID: pid, Offset: hw}}); err != nil {
			t.Fatalf("high watermark stuck at %d: %v", hw, err)
		}
	}
	if got := s.Metrics().AsyncBacklog; got != 0 {
		t.Fatalf("async backlog %d bytes once durable, want 0", got)
	}
	got := readAll(t, s, pid)
	if len(got) != 3 || !bytes.Equal(got[0], first) {
		t.Fatalf("read %d entries after the fdatasync, want 3", len(got))
	}
	if err := protocols.StampEntry(e, r.BaseOffset, r.AppendTime); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[1], e) {
		t.Fatal("the async append reads back different bytes")
	}
}

// Async appends past Config.AsyncBacklog bytes acknowledged and not yet
// durable are acknowledged once durable: a disk slower than the producers
// holds them back.
func TestAsyncBacklogHoldsAppendsPastItsBound(t *testing.T) {
	g := newGateFS()
	if err := g.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	e := func(i int) []byte { return makeEntry(t, fmt.Sprintf("e%d", i), 1, 500, int64(i)) }
	size := int64(len(e(0)))
	s, pid := openTopic(t, Config{Dir: "/d", FS: g, SegmentSize: 1 << 20, AsyncBacklog: 2 * size}, "backlog")
	t.Cleanup(func() { g.set(false) }) // before the store closes, should the test fail

	g.set(true)
	var pending []*PendingAppend
	for i := range 3 {
		pa, err := s.StartAppend(context.Background(), pid, AppendRequest{Entry: e(i), Durability: DurabilityAsync})
		if err != nil {
			t.Fatal(err)
		}
		pending = append(pending, pa)
	}
	if !g.held() {
		t.Fatal("no segment fdatasync began for the async appends")
	}
	for i, pa := range pending[:2] {
		if !pa.Ready() {
			t.Fatalf("async append %d, within the backlog bound, is not ready", i)
		}
		if _, err := pa.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if pending[2].Ready() {
		t.Fatal("the async append past the backlog bound is ready while the fdatasync is held")
	}
	done := make(chan error, 1)
	go func() {
		_, err := pending[2].Wait()
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the async append past the backlog bound was acknowledged while the fdatasync was held (%v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	g.set(false)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, hw, _ := s.Offsets(pid); hw != 3 {
		t.Fatalf("high watermark %d once the held append is acknowledged, want 3", hw)
	}
	if n := s.asyncBacklog.Load(); n != 0 {
		t.Fatalf("async backlog %d bytes once every append is durable, want 0", n)
	}
}

// An fdatasync that three appends waited for counts once among the
// fdatasyncs and three times among the append commits: the commit
// histogram is what producers saw.
func TestAppendCommitCountsEachAppendsWait(t *testing.T) {
	g := newGateFS()
	if err := g.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	s, pid := openTopic(t, Config{Dir: "/d", FS: g, SegmentSize: 1 << 20}, "commit")
	t.Cleanup(func() { g.set(false) })
	appendStamped(t, s, pid, makeEntry(t, "before", 1, 100, 1000), DurabilitySync)

	const hold = 200 * time.Millisecond
	g.set(true)
	var pending []*PendingAppend
	for i := range 3 {
		pa, err := s.StartAppend(context.Background(), pid, AppendRequest{Entry: makeEntry(t, "held", 1, 100, int64(2000+i)), Durability: DurabilitySync})
		if err != nil {
			t.Fatal(err)
		}
		pending = append(pending, pa)
	}
	if !g.held() {
		t.Fatal("no segment fdatasync began for the held appends")
	}
	time.Sleep(hold)
	g.set(false)
	for _, pa := range pending {
		if _, err := pa.Wait(); err != nil {
			t.Fatal(err)
		}
	}

	m := s.Metrics()
	// slower counts the observations above the largest bucket bound under
	// three quarters of the hold.
	slower := func(h FsyncHistogram) uint64 {
		bound, below := 0.0, uint64(0)
		for b, n := range h.Buckets {
			if b <= 0.75*hold.Seconds() && b > bound {
				bound, below = b, n
			}
		}
		return h.Count - below
	}
	if m.AppendCommit.Count != 4 {
		t.Errorf("%d append commits counted, want the 4 appends", m.AppendCommit.Count)
	}
	if n := slower(m.AppendCommit); n < 3 || n > 4 {
		t.Errorf("%d append commits took about %v or more, want the 3 held ones", n, hold)
	}
	if n := slower(m.SegmentFsync); n < 1 || n >= 3 {
		t.Errorf("%d fdatasyncs took about %v or more, want the one held (a few at most)", n, hold)
	}
	if m.AppendCommit.Sum < m.SegmentFsync.Sum {
		t.Errorf("append commits took %.3fs in all, less than the %.3fs of the fdatasyncs they waited for", m.AppendCommit.Sum, m.SegmentFsync.Sum)
	}
}

// Async appends kept in pebble reach its WAL durably one AsyncSyncInterval
// after the first of them, each time writes resume after a quiet spell:
// the sync loop sleeps while nothing is unsynced and must wake for the
// next write. A crash after the sync keeps every append before it.
func TestAsyncAppendsReachTheWALAfterQuiet(t *testing.T) {
	mem := vfs.NewCrashableMem()
	var syncs atomic.Int64 // WAL fdatasyncs that have returned
	cfg := memConfig(syncHookFS{FS: mem, suffix: ".log", after: func() { syncs.Add(1) }})
	cfg.InlineEntries = true
	cfg.AsyncSyncInterval = 20 * time.Millisecond
	s, pid := openTopic(t, cfg, "quiet")
	for round := range 3 {
		before := syncs.Load()
		e := makeEntry(t, fmt.Sprint("round", round), 1, 100, int64(round))
		if _, err := s.Append(context.Background(), pid, AppendRequest{Entry: e, Durability: DurabilityAsync}); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); syncs.Load() == before; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: no WAL sync within 10s of an async append (interval 20ms)", round)
			}
		}
		crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		cfg2 := memConfig(crashed)
		cfg2.InlineEntries = true
		s2 := openTest(t, cfg2)
		if got := readAll(t, s2, pid); len(got) != round+1 {
			t.Fatalf("round %d: a crash after the interval's sync kept %d entries, want %d", round, len(got), round+1)
		}
		if err := s2.Close(); err != nil {
			t.Fatal(err)
		}
		// Quiet for several intervals before the next round.
		time.Sleep(5 * cfg.AsyncSyncInterval)
	}
}
