package proxy

import (
	"testing"
	"time"
)

func TestRateBook(t *testing.T) {
	b := newRateBook()
	t0 := time.Unix(1000, 0)
	if _, _, ok := b.observe("p", t0, 0, 0); ok {
		t.Fatal("a rate from one sample")
	}
	if _, _, ok := b.observe("p", t0.Add(500*time.Millisecond), 5, 50); ok {
		t.Fatal("a rate from samples under a second apart")
	}
	r0, r1, ok := b.observe("p", t0.Add(2*time.Second), 20, 200)
	if !ok || r0 != 10 || r1 != 100 {
		t.Fatalf("rates %v %v %v", r0, r1, ok)
	}
	// Samples older than the window are dropped but for the newest one.
	r0, _, ok = b.observe("p", t0.Add(30*time.Second), 20, 200)
	if !ok || r0 != 0 {
		t.Fatalf("after a pause: %v %v", r0, ok)
	}
	r0, _, ok = b.observe("p", t0.Add(32*time.Second), 40, 200)
	if !ok || r0 != 10 {
		t.Fatalf("steady: %v %v", r0, ok)
	}
	// A counter going down restarts the series.
	if _, _, ok := b.observe("p", t0.Add(34*time.Second), 3, 0); ok {
		t.Fatal("rate across a reset")
	}
	// Idle series are forgotten.
	b.observe("q", t0.Add(time.Hour), 1, 1)
	if _, ok := b.series["p"]; ok {
		t.Fatal("idle series kept")
	}
}
