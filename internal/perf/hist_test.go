package perf

import (
	"testing"
	"time"
)

// The window's latencies are those of the messages sent in it, whenever
// they complete; its counts are the completions that fall in it.
func TestWindowLatenciesAreOfMessagesSentInIt(t *testing.T) {
	r := newRecorder()
	now := time.Now()
	beforeWindow := now.Add(-time.Second).UnixNano()

	r.record(100, beforeWindow) // warm-up: neither counted nor timed
	r.from.Store(now.UnixNano())
	r.measuring.Store(true)
	r.record(100, beforeWindow)                        // sent in the warm-up: counted, not timed
	r.record(100, now.Add(time.Nanosecond).UnixNano()) // sent in the window: both
	r.record(100, 0)                                   // no latency: counted
	r.measuring.Store(false)
	r.to.Store(time.Now().UnixNano())
	r.record(100, now.Add(2*time.Nanosecond).UnixNano())       // sent in the window, completed after: timed
	r.record(100, time.Now().Add(time.Millisecond).UnixNano()) // sent after: neither

	n, bytes, h := r.window()
	if n != 3 || bytes != 300 {
		t.Errorf("window counts %d completions, %d bytes; want 3, 300", n, bytes)
	}
	if got := h.TotalCount(); got != 2 {
		t.Errorf("window timed %d messages; want the 2 sent in it", got)
	}
	if max := time.Duration(h.Max()) * time.Microsecond; max > 500*time.Millisecond {
		t.Errorf("window's largest latency is %v: a warm-up message's second got in", max)
	}
	if got := r.total.Load(); got != 6 {
		t.Errorf("total %d; want every completion, 6", got)
	}
}
