package localstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ternmq/tern/protocols"
)

func TestAppendReadOffsets(t *testing.T) {
	s := openTest(t, Config{})
	tm, err := s.CreateTopic("persistent://public/default/t", 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	pid := tm.PIDs[1]
	ctx := context.Background()
	var bases []int64
	for i, n := range []int{1, 5, 3} {
		r, err := s.Append(ctx, pid, AppendRequest{Entry: makeEntry(t, fmt.Sprintf("e%d", i), n, 10, 1000)})
		if err != nil {
			t.Fatal(err)
		}
		if r.Count != int64(n) {
			t.Fatalf("append %d count %d, want %d", i, r.Count, n)
		}
		bases = append(bases, r.BaseOffset)
	}
	if want := []int64{0, 1, 6}; fmt.Sprint(bases) != fmt.Sprint(want) {
		t.Fatalf("base offsets %v, want %v", bases, want)
	}
	start, hw, _ := s.Offsets(pid)
	if start != 0 || hw != 9 {
		t.Fatalf("offsets start=%d hw=%d, want 0 9", start, hw)
	}
	// A read from inside the second entry starts with that entry.
	es, err := s.Read(pid, 3, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[0].BaseOffset != 1 || es[1].BaseOffset != 6 || entryTag(t, es[0].Value) != "e1" {
		t.Fatalf("read from 3: %+v", es)
	}
	// The stored batch carries its base offset.
	e, _ := protocols.DecodeEntry(es[1].Value)
	if e.Header.BaseOffset != 6 || e.Envelope.AppendTime == 0 {
		t.Fatalf("stored header base=%d appendTime=%d", e.Header.BaseOffset, e.Envelope.AppendTime)
	}
	// A tiny budget still returns one entry.
	if es, _ := s.Read(pid, 0, 1); len(es) != 1 {
		t.Fatalf("budget 1 returned %d entries, want 1", len(es))
	}
	// At the high watermark: nothing. Past it: out of range.
	if es, err := s.Read(pid, 9, 1<<20); err != nil || len(es) != 0 {
		t.Fatalf("read at hw: %v %v", es, err)
	}
	var oor *protocols.OffsetOutOfRangeError
	if _, err := s.Read(pid, 10, 1<<20); !errors.As(err, &oor) || oor.End != 9 {
		t.Fatalf("read past hw: %v", err)
	}
	// The other partition is untouched.
	if _, hw, _ := s.Offsets(tm.PIDs[0]); hw != 0 {
		t.Fatalf("partition 0 hw %d", hw)
	}
}

func TestReopenKeepsLogAndRegistry(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	tm, _ := s.CreateTopic("persistent://public/default/r", 0, map[string]string{"retention.ms": "5"})
	for i := 0; i < 3; i++ {
		if _, err := s.Append(context.Background(), tm.PIDs[0], AppendRequest{Entry: makeEntry(t, "x", 2, 10, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, Config{Dir: dir})
	got, err := s.Topic("persistent://public/default/r")
	if err != nil || got.Config["retention.ms"] != "5" || got.PIDs[0] != tm.PIDs[0] {
		t.Fatalf("topic after reopen: %+v %v", got, err)
	}
	r, err := s.Append(context.Background(), tm.PIDs[0], AppendRequest{Entry: makeEntry(t, "y", 1, 10, 0)})
	if err != nil || r.BaseOffset != 6 {
		t.Fatalf("append after reopen at %d (%v), want 6", r.BaseOffset, err)
	}
	// A new topic never reuses an id.
	t2, _ := s.CreateTopic("persistent://public/default/r2", 3, nil)
	for _, pid := range t2.PIDs {
		if pid <= tm.PIDs[0] {
			t.Fatalf("new partition id %d reuses an old one (%d)", pid, tm.PIDs[0])
		}
	}
}

func TestTopicRegistry(t *testing.T) {
	s := openTest(t, Config{})
	if _, err := s.CreateTopic("a", 2, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateTopic("a", 2, nil); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("duplicate create: %v", err)
	}
	if _, err := s.AddPartitions("a", 1); !errors.Is(err, ErrBadPartitions) {
		t.Fatalf("shrink: %v", err)
	}
	tm, err := s.AddPartitions("a", 4)
	if err != nil || len(tm.PIDs) != 4 || tm.Partitions != 4 {
		t.Fatalf("grow: %+v %v", tm, err)
	}
	if _, err := s.CreateTopic("b", 0, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddPartitions("b", 2); !errors.Is(err, ErrBadPartitions) {
		t.Fatalf("grow non-partitioned: %v", err)
	}
	if err := s.SaveCursor(tm.PIDs[0], "sub", Cursor{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Write([]Op{{Key: GroupOffsetKey("g", tm.PIDs[0]), Value: []byte("1")}}, true); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTopic("a"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(GroupOffsetKey("g", tm.PIDs[0])); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Get(GroupOffsetKey("g", tm.PIDs[0])); ok {
		t.Fatal("group offset survived topic deletion")
	}
	if _, err := s.Append(context.Background(), tm.PIDs[0], AppendRequest{Entry: makeEntry(t, "z", 1, 1, 0)}); !errors.Is(err, ErrPartitionNotFound) {
		t.Fatalf("append to deleted partition: %v", err)
	}
	if names := s.Topics(""); len(names) != 1 || names[0].Name != "b" {
		t.Fatalf("topics after delete: %+v", names)
	}
}

func TestWaitWakesOnAppend(t *testing.T) {
	s := openTest(t, Config{})
	tm, _ := s.CreateTopic("w", 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- s.Wait(ctx, []Watch{{PID: tm.PIDs[0], Offset: 0}, {PID: tm.PIDs[1], Offset: 0}})
	}()
	if _, err := s.Append(ctx, tm.PIDs[1], AppendRequest{Entry: makeEntry(t, "w", 1, 1, 0)}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("wait: %v", err)
	}
	// Already past: returns at once.
	if err := s.Wait(ctx, []Watch{{PID: tm.PIDs[1], Offset: 0}}); err != nil {
		t.Fatal(err)
	}
	// Nothing new: the context decides.
	short, cancel2 := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel2()
	if err := s.Wait(short, []Watch{{PID: tm.PIDs[1], Offset: 1}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("idle wait: %v", err)
	}
	// Deleting a watched topic wakes the waiter.
	go func() { done <- s.Wait(ctx, []Watch{{PID: tm.PIDs[0], Offset: 0}}) }()
	waitFor(t, func() bool {
		p, _ := s.partition(tm.PIDs[0])
		p.wmu.Lock()
		defer p.wmu.Unlock()
		return len(p.waiters) == 1
	})
	if err := s.DeleteTopic("w"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("wait on deleted topic returned %v; want nil (caller re-reads and sees the deletion)", err)
	}
}

func TestGuardWritesAtomicallyOrSkips(t *testing.T) {
	s := openTest(t, Config{})
	tm, _ := s.CreateTopic("g", 0, nil)
	pid := tm.PIDs[0]
	ctx := context.Background()
	k := ProducerKey(pid, 'k', []byte("p1"))
	r, err := s.Append(ctx, pid, AppendRequest{Entry: makeEntry(t, "a", 2, 1, 0), Guard: func(base int64) ([]Op, *AppendResult, error) {
		return []Op{{Key: k, Value: []byte(fmt.Sprint(base))}}, nil, nil
	}})
	if err != nil || r.BaseOffset != 0 {
		t.Fatal(r, err)
	}
	if v, ok, _ := s.Get(k); !ok || string(v) != "0" {
		t.Fatalf("guard op not written: %q %v", v, ok)
	}
	r, err = s.Append(ctx, pid, AppendRequest{Entry: makeEntry(t, "a", 2, 1, 0), Guard: func(base int64) ([]Op, *AppendResult, error) {
		return nil, &AppendResult{BaseOffset: 0, Count: 2}, nil
	}})
	if err != nil || !r.Skipped || r.BaseOffset != 0 {
		t.Fatalf("skip: %+v %v", r, err)
	}
	boom := errors.New("refused")
	if _, err := s.Append(ctx, pid, AppendRequest{Entry: makeEntry(t, "a", 2, 1, 0), Guard: func(int64) ([]Op, *AppendResult, error) {
		return nil, nil, boom
	}}); !errors.Is(err, boom) {
		t.Fatalf("guard error: %v", err)
	}
	if _, hw, _ := s.Offsets(pid); hw != 2 {
		t.Fatalf("hw %d after a skip and a refusal, want 2", hw)
	}
}

func TestConcurrentAppendsAreDense(t *testing.T) {
	s := openTest(t, Config{})
	tm, _ := s.CreateTopic("c", 0, nil)
	pid := tm.PIDs[0]
	const writers, each = 8, 50
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if _, err := s.Append(context.Background(), pid, AppendRequest{Entry: makeEntry(t, "c", 3, 8, 0)}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	checkDense(t, s, pid, writers*each*3)
	if m := s.Metrics(); m.SyncWaits != writers*each || m.AppendedRecords != writers*each*3 {
		t.Fatalf("metrics %+v", m)
	}
}

// checkDense reads the whole log and checks the entries tile [start, hw).
func checkDense(t *testing.T, s *Store, pid PartitionID, wantHW int64) {
	t.Helper()
	start, hw, _ := s.Offsets(pid)
	if wantHW >= 0 && hw != wantHW {
		t.Fatalf("hw %d, want %d", hw, wantHW)
	}
	next := start
	for next < hw {
		es, err := s.Read(pid, next, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if e.BaseOffset > next || e.BaseOffset+e.Count <= next {
				t.Fatalf("gap: expected an entry holding %d, got [%d,%d)", next, e.BaseOffset, e.BaseOffset+e.Count)
			}
			next = e.BaseOffset + e.Count
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestStartAppendPipelinesInOrder(t *testing.T) {
	s := openTest(t, Config{})
	tm, _ := s.CreateTopic("pipe", 0, nil)
	pid := tm.PIDs[0]
	var pending []*PendingAppend
	for i := 0; i < 20; i++ {
		pa, err := s.StartAppend(context.Background(), pid, AppendRequest{Entry: makeEntry(t, fmt.Sprintf("p%d", i), 2, 8, 0)})
		if err != nil {
			t.Fatal(err)
		}
		if base, _ := pa.Offsets(); base != int64(2*i) {
			t.Fatalf("append %d assigned %d before waiting, want %d", i, base, 2*i)
		}
		pending = append(pending, pa)
	}
	// Nothing is visible before it is durable... and everything after.
	for i, pa := range pending {
		r, err := pa.Wait()
		if err != nil || r.BaseOffset != int64(2*i) {
			t.Fatalf("wait %d: %+v %v", i, r, err)
		}
	}
	checkDense(t, s, pid, 40)
	es, _ := s.Read(pid, 0, 1<<20)
	for i, e := range es {
		if entryTag(t, e.Value) != fmt.Sprintf("p%d", i) {
			t.Fatalf("entry %d holds %s", i, entryTag(t, e.Value))
		}
	}
}

// A resend recognised as a duplicate while the original still waits for
// its fsync is answered only once the original is durable.
func TestSkippedAppendWaitsForTheOriginal(t *testing.T) {
	s := openTest(t, Config{})
	tm, _ := s.CreateTopic("dupwait", 0, nil)
	pid := tm.PIDs[0]
	orig, err := s.StartAppend(context.Background(), pid, AppendRequest{Entry: makeEntry(t, "o", 3, 8, 0)})
	if err != nil {
		t.Fatal(err)
	}
	dup, err := s.StartAppend(context.Background(), pid, AppendRequest{Entry: makeEntry(t, "o", 3, 8, 0),
		Guard: func(int64) ([]Op, *AppendResult, error) { return nil, &AppendResult{BaseOffset: 0, Count: 3}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := dup.Wait(); done <- err }()
	select {
	case <-done:
		t.Fatal("the duplicate was answered before the original was durable")
	case <-time.After(50 * time.Millisecond):
	}
	if _, err := orig.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
