package localstore

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// firstSyncFS holds the first segment fdatasync after arm until release,
// and counts the ones that begin while it is held.
type firstSyncFS struct {
	syncHookFS
	mu             sync.Mutex
	armed, holding bool
	release        chan struct{}
	during         int
}

func newFirstSyncFS() *firstSyncFS {
	fs := &firstSyncFS{}
	fs.syncHookFS = syncHookFS{FS: vfs.NewMem(), suffix: ".seg", before: fs.beforeSync}
	return fs
}

func (fs *firstSyncFS) arm() {
	fs.mu.Lock()
	fs.armed, fs.release = true, make(chan struct{})
	fs.mu.Unlock()
}

func (fs *firstSyncFS) state() (holding bool, during int) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.holding, fs.during
}

// beforeSync holds the first fdatasync after arm until release, and
// counts those that begin meanwhile.
func (fs *firstSyncFS) beforeSync() {
	fs.mu.Lock()
	if fs.holding {
		fs.during++
	}
	hold := fs.armed
	fs.armed = false
	if hold {
		fs.holding = true
	}
	release := fs.release
	fs.mu.Unlock()
	if hold {
		<-release
		fs.mu.Lock()
		fs.holding = false
		fs.mu.Unlock()
	}
}

// until polls cond for up to 10 s.
func until(cond func() bool) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}

// While one group's segment fdatasync is in progress the committer starts
// the next group's, but applies (and acknowledges) a group only once its
// own fdatasync and every earlier group's have returned: an append written
// before the held fdatasync began may be in a file that fdatasync took, and
// the later one need not cover it.
func TestCommitterOverlapsFdatasyncsAndAppliesInOrder(t *testing.T) {
	fs := newFirstSyncFS()
	if err := fs.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	s, pid := openTopic(t, Config{Dir: "/d", FS: fs, SegmentSize: 1 << 20}, "order")
	appendStamped(t, s, pid, makeEntry(t, "before", 1, 100, 1000), DurabilitySync)

	fs.arm()
	var released bool
	defer func() {
		if !released {
			close(fs.release) // before the store closes, should the test fail
		}
	}()
	start := func(tag string) *PendingAppend {
		pa, err := s.StartAppend(context.Background(), pid, AppendRequest{Entry: makeEntry(t, tag, 1, 100, 2000), Durability: DurabilitySync})
		if err != nil {
			t.Fatal(err)
		}
		return pa
	}
	first := start("first")
	if !until(func() bool { h, _ := fs.state(); return h }) {
		t.Fatal("the first append's fdatasync never began")
	}
	second := start("second")
	if !until(func() bool { _, n := fs.state(); return n > 0 }) {
		t.Fatal("the second append's fdatasync did not begin while the first's was held")
	}
	time.Sleep(50 * time.Millisecond) // room for a wrong early commit
	if first.Ready() || second.Ready() {
		t.Fatalf("acknowledged while the first fdatasync is held: first %v, second %v", first.Ready(), second.Ready())
	}
	if _, hw, _ := s.Offsets(pid); hw != 1 {
		t.Fatalf("high watermark %d while the first fdatasync is held, want 1", hw)
	}
	close(fs.release)
	released = true
	for _, pa := range []*PendingAppend{first, second} {
		if _, err := pa.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if _, hw, _ := s.Offsets(pid); hw != 3 {
		t.Fatalf("high watermark %d once both are acknowledged, want 3", hw)
	}
}

// With GroupCommitInterval, an fdatasync starts at once after the disk was
// idle that long, and appends that arrive sooner after one began wait for
// the next and share it. Without it, the first of the later appends would
// have its own fdatasync at once, and they would be acknowledged within
// milliseconds.
func TestGroupCommitIntervalSharesFdatasyncs(t *testing.T) {
	var mu sync.Mutex
	syncs := 0
	fs := syncHookFS{FS: vfs.NewMem(), suffix: ".seg", before: func() { mu.Lock(); syncs++; mu.Unlock() }}
	if err := fs.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	const interval = time.Second
	s, pid := openTopic(t, Config{Dir: "/d", FS: fs, SegmentSize: 1 << 20, GroupCommitInterval: interval}, "grouped")
	count := func() int { mu.Lock(); defer mu.Unlock(); return syncs }
	before := count()
	start := func(tag string) *PendingAppend {
		pa, err := s.StartAppend(context.Background(), pid, AppendRequest{Entry: makeEntry(t, tag, 1, 100, 2000), Durability: DurabilitySync})
		if err != nil {
			t.Fatal(err)
		}
		return pa
	}

	// The disk has been idle: the first append's fdatasync starts at once.
	began := time.Now()
	if _, err := start("first").Wait(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took >= interval {
		t.Errorf("the first append, on an idle disk, took %v: held for the interval", took)
	}
	if n := count() - before; n != 1 {
		t.Fatalf("%d segment fdatasyncs for the first append, want 1", n)
	}

	var later []*PendingAppend
	for _, tag := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		later = append(later, start(tag))
	}
	for i, pa := range later {
		if _, err := pa.Wait(); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	if took := time.Since(began); took < interval {
		t.Errorf("appends started right after an fdatasync began were acknowledged %v after it, before the %v interval", took, interval)
	}
	if n := count() - before; n != 2 {
		t.Errorf("%d segment fdatasyncs for one append and then seven within the interval, want 2", n)
	}
	if _, hw, _ := s.Offsets(pid); hw != 8 {
		t.Errorf("high watermark %d, want 8", hw)
	}

	for _, iv := range []time.Duration{-time.Millisecond, 2 * time.Second} {
		if err := (Config{Dir: "/d", GroupCommitInterval: iv}).Validate(); err == nil {
			t.Errorf("group commit interval %v accepted", iv)
		}
	}
}
