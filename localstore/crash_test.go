package localstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestCrashKeepsAcknowledgedAppends simulates a machine crash at arbitrary
// moments while appenders (sync, and one async), cursor writers and
// retention run. The crash is a clone of the in-memory filesystem holding
// what was fsynced plus a random share of what was not (pebble's crashable
// MemFS). On the clone:
//   - every append acknowledged before the crash is there, at its offsets,
//     with its bytes (large entries, stored in parts, among them);
//   - the entries tile the log with no gap, and the next append continues
//     where the log ends (no offset reused);
//   - no cursor points past the log;
//   - the log start is at most where retention asked it to be.
func TestCrashKeepsAcknowledgedAppends(t *testing.T) {
	rounds := 12
	if testing.Short() {
		rounds = 4
	}
	for _, inline := range []bool{false, true} {
		collected := 0
		for round := 0; round < rounds; round++ {
			t.Run(fmt.Sprintf("inline=%v/round%d", inline, round), func(t *testing.T) {
				if crashRound(t, uint64(round), inline) {
					collected++
				}
			})
		}
		if !inline && collected == 0 {
			t.Error("no round removed a segment before its crash; the test did not exercise removal")
		}
	}
}

type acked struct {
	pid   PartitionID
	base  int64
	count int64
	tag   string
}

// crashRound runs one crash and says whether segments had been removed.
func crashRound(t *testing.T, seed uint64, inline bool) bool {
	rng := rand.New(rand.NewPCG(seed, 99))
	fs := vfs.NewCrashableMem()
	cfg := memConfig(fs)
	cfg.InlineEntries = inline
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := s.CreateTopic("crash", 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		acks []acked
	)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil && i < 2000; i++ {
				pid := tm.PIDs[(w+i)%2]
				tag := fmt.Sprintf("w%di%d", w, i)
				n, size := 1+(w*7+i)%5, 64
				if w == 0 && i%5 == 0 {
					n, size = 3, 100<<10 // a large entry (inline: stored in parts)
				}
				r, err := s.Append(ctx, pid, AppendRequest{Entry: makeEntry(t, tag, n, size, 0)})
				if err != nil {
					return // the store is closing
				}
				mu.Lock()
				acks = append(acks, acked{pid: pid, base: r.BaseOffset, count: r.Count, tag: tag})
				mu.Unlock()
			}
		}()
	}
	// An async appender on the same partitions: its appends may be lost
	// in the crash, but never a sync append acknowledged after one of
	// them (the sync append's fsync covers the async one before it).
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil && i < 500; i++ {
			pid := tm.PIDs[i%2]
			if _, err := s.Append(ctx, pid, AppendRequest{Entry: makeEntry(t, fmt.Sprintf("async%d", i), 2, 64, 0), Durability: DurabilityAsync}); err != nil {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	// everyLog calls fn with each partition's high watermark, pausing
	// between rounds, until the crash or an error.
	everyLog := func(pause time.Duration, fn func(pid PartitionID, hw int64) error, after func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				for _, pid := range tm.PIDs {
					_, hw, err := s.Offsets(pid)
					if err == nil {
						err = fn(pid, hw)
					}
					if err != nil {
						return
					}
				}
				after()
				time.Sleep(pause)
			}
		}()
	}
	// A cursor writer that follows the high watermark.
	everyLog(time.Millisecond, func(pid PartitionID, hw int64) error {
		_ = s.SaveCursor(pid, "sub", Cursor{MarkDelete: hw / 2, Acked: []Range{{hw/2 + 1, hw}}})
		return nil
	}, func() {})
	// Retention drops the older third of each log now and then, and
	// segments no entry is in any more are removed, while appends go on.
	var truncMu sync.Mutex
	truncated := map[PartitionID]int64{} // highest start asked for
	everyLog(5*time.Millisecond, func(pid PartitionID, hw int64) error {
		truncMu.Lock()
		truncated[pid] = max(truncated[pid], hw/3)
		truncMu.Unlock()
		_, err := s.TruncateBefore(pid, hw/3)
		return err
	}, func() { _ = s.collectSegments() })

	// Let a random amount of work happen, then crash while it goes on.
	target := 1 + rng.IntN(1500)
	deadline := time.Now().Add(30 * time.Second)
	var before []acked
	for {
		mu.Lock()
		if len(acks) >= target || time.Now().After(deadline) {
			before = append([]acked(nil), acks...)
			mu.Unlock()
			break
		}
		mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rand.New(rand.NewPCG(seed, 7))})
	s.segs.rmu.RLock()
	_, first := s.segs.files[1]
	first = first || inline
	s.segs.rmu.RUnlock()
	cancel()
	wg.Wait()
	_ = s.Close()
	if len(before) == 0 {
		t.Fatal("no append was acknowledged before the crash; the test proves nothing")
	}

	cfg = memConfig(crashed)
	cfg.InlineEntries = inline
	s2, err := Open(cfg)
	if err != nil {
		t.Fatalf("reopen after crash: %v", err)
	}
	defer s2.Close()
	stored := map[PartitionID]map[int64]Entry{}
	for _, pid := range tm.PIDs {
		stored[pid] = map[int64]Entry{}
		checkDense(t, s2, pid, -1)
		start, hw, _ := s2.Offsets(pid)
		for next := start; next < hw; {
			es, err := s2.Read(pid, next, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range es {
				stored[pid][e.BaseOffset] = e
				next = e.BaseOffset + e.Count
			}
		}
		// No cursor past the log.
		cs, err := s2.Cursors(pid)
		if err != nil {
			t.Fatal(err)
		}
		for name, c := range cs {
			if c.End() > hw {
				t.Fatalf("cursor %s on %d ends at %d past the log end %d", name, pid, c.End(), hw)
			}
		}
		// The next append continues at the end, reusing nothing.
		r, err := s2.Append(context.Background(), pid, AppendRequest{Entry: makeEntry(t, "after", 1, 1, 0)})
		if err != nil || r.BaseOffset != hw {
			t.Fatalf("append after crash at %d (%v), want %d", r.BaseOffset, err, hw)
		}
	}
	truncMu.Lock()
	defer truncMu.Unlock()
	for _, pid := range tm.PIDs {
		// Retention may have moved the start, never past what it asked.
		if start, _, _ := s2.Offsets(pid); start > truncated[pid] {
			t.Fatalf("partition %d starts at %d after the crash; retention asked for at most %d", pid, start, truncated[pid])
		}
	}
	for _, a := range before {
		if start, _, _ := s2.Offsets(a.pid); a.base+a.count <= start {
			continue // dropped by retention
		}
		e, ok := stored[a.pid][a.base]
		if !ok {
			t.Fatalf("acknowledged append %s at partition %d offset %d lost in the crash", a.tag, a.pid, a.base)
		}
		if e.Count != a.count || entryTag(t, e.Value) != a.tag {
			t.Fatalf("offset %d holds %s (%d records), acknowledged %s (%d)", a.base, entryTag(t, e.Value), e.Count, a.tag, a.count)
		}
	}
	t.Logf("%d acknowledged appends checked after the crash (segment 1 removed: %v)", len(before), !first)
	return !first
}
