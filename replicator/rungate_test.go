package replicator

import (
	"context"
	"testing"
	"time"
)

// TestRunGate: a sender's first run needs no read-ahead place, each run more takes one while
// there is one, and without a free place the reader waits until a run of its own is sent.
func TestRunGate(t *testing.T) {
	e := &Engine{ahead: make(chan struct{}, 1)}
	g := &runGate{e: e, sent: make(chan struct{}, 1)}
	other := &runGate{e: e, sent: make(chan struct{}, 1)}
	ctx := context.Background()
	enter := func(g *runGate, wantAhead bool) {
		t.Helper()
		ahead, err := g.enter(ctx)
		if err != nil || ahead != wantAhead {
			t.Fatalf("enter: ahead %v, %v; want ahead %v", ahead, err, wantAhead)
		}
	}
	enter(g, false) // the first run: no place
	enter(g, true)  // the second takes the node's one place
	enter(other, false)
	if len(e.ahead) != 1 || g.pending.Load() != 2 || other.pending.Load() != 1 {
		t.Fatalf("%d places taken, %d and %d runs pending; want 1, 2 and 1", len(e.ahead), g.pending.Load(), other.pending.Load())
	}

	// A third run waits: no place is free, and its runs are pending.
	got := make(chan bool)
	go func() {
		ahead, err := g.enter(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- ahead
	}()
	select {
	case <-got:
		t.Fatal("a third run entered with no place free and two runs pending")
	case <-time.After(50 * time.Millisecond):
	}
	// Another sender sending its run frees no place of this one's.
	other.done(false)
	select {
	case <-got:
		t.Fatal("a third run entered when another sender sent its run")
	case <-time.After(50 * time.Millisecond):
	}
	// Its own first run sent: the place is still taken, so the third waits on.
	g.done(false)
	select {
	case <-got:
		t.Fatal("a third run entered with a run still pending and no place free")
	case <-time.After(50 * time.Millisecond):
	}
	// The run holding the place sent: nothing pending, the third goes without a place.
	g.done(true)
	select {
	case ahead := <-got:
		if ahead {
			t.Fatal("the third run took a place with nothing pending")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the third run did not enter once its sender had nothing pending")
	}
	if len(e.ahead) != 0 {
		t.Fatalf("%d places taken; want 0", len(e.ahead))
	}

	// A reader waiting for room stops with its context.
	enter(g, true)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := g.enter(cctx); err == nil {
		t.Fatal("enter with a cancelled context and no room returned no error")
	}
}
