package localstore

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// TestWaiterPlaces drives a partition's waiter list with waiters watching
// one or several places on it, added, removed in random order and woken,
// and checks after every step that each waiter's recorded place is where
// it is, and that a removed or woken waiter is gone.
func TestWaiterPlaces(t *testing.T) {
	s, pid := openTopic(t, Config{}, "waiters")
	p, err := s.partition(pid)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	type place struct {
		w *waiter
		k int
	}
	var in []place // the places added and neither removed nor woken
	check := func(step int) {
		t.Helper()
		if len(p.waiters) != len(in) {
			t.Fatalf("step %d: %d waiters listed, want %d", step, len(p.waiters), len(in))
		}
		for i, r := range p.waiters {
			if sl := r.w.at[r.k]; sl.i != i || sl.gen != p.wgen {
				t.Fatalf("step %d: waiter at %d records place %d of generation %d (now %d)", step, i, sl.i, sl.gen, p.wgen)
			}
		}
		for _, pl := range in {
			if r := p.waiters[pl.w.at[pl.k].i]; r.w != pl.w || r.k != pl.k {
				t.Fatalf("step %d: a waiter's place holds another", step)
			}
		}
	}
	for step := range 5000 {
		switch op := rng.IntN(10); {
		case op < 5: // a new waiter watching the partition one to three times
			w := &waiter{ch: make(chan struct{}, 1), at: make([]waitSlot, 1+rng.IntN(3))}
			p.wmu.Lock()
			for k := range w.at {
				p.addLocked(w, k)
				in = append(in, place{w, k})
			}
			p.wmu.Unlock()
		case op < 9 && len(in) > 0: // one place removed
			j := rng.IntN(len(in))
			p.remove(in[j].w, in[j].k)
			in = append(in[:j], in[j+1:]...)
		case op == 9: // a wake: every waiter is signalled and gone
			woken := in
			in = nil
			p.wake()
			for _, pl := range woken {
				select {
				case <-pl.w.ch:
					pl.w.ch <- struct{}{} // a waiter of several places is signalled once
				default:
					t.Fatalf("step %d: a waiter was not signalled by the wake", step)
				}
				p.remove(pl.w, pl.k) // what Wait's return does: a no-op now
			}
		}
		check(step)
	}
}

// TestWaitManyPartitions has waiters on overlapping sets of partitions
// return as appends reach one of theirs, or with their context, and leave
// no waiter listed.
func TestWaitManyPartitions(t *testing.T) {
	s := openTest(t, Config{})
	tm, err := s.CreateTopic("many", 16, nil)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 64 {
		var ws []Watch
		for _, i := range rng.Perm(16)[:1+rng.IntN(16)] {
			ws = append(ws, Watch{PID: tm.PIDs[i], Offset: 0})
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if g%8 == 0 { // some give up before anything arrives
				ctx, cancel = context.WithTimeout(ctx, time.Millisecond)
				defer cancel()
				if err := s.Wait(ctx, ws); err != nil && ctx.Err() == nil {
					errs <- err
				}
				return
			}
			if err := s.Wait(ctx, ws); err != nil {
				errs <- err
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	for _, pid := range tm.PIDs {
		if _, err := s.Append(context.Background(), pid, AppendRequest{Entry: makeEntry(t, "m", 1, 8, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, pid := range tm.PIDs {
		p, _ := s.partition(pid)
		p.wmu.Lock()
		n := len(p.waiters)
		p.wmu.Unlock()
		if n != 0 {
			t.Errorf("partition %d lists %d waiters after every Wait returned", pid, n)
		}
	}
}
