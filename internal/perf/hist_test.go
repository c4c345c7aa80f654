package perf

import (
	"encoding/binary"
	"testing"
	"time"
)

// The window's latencies are those of the messages sent in it, whenever
// they complete; its counts are the completions that fall in it.
func TestWindowLatenciesAreOfMessagesSentInIt(t *testing.T) {
	r := newRecorder()
	now := time.Now()
	beforeWindow := stamp(now.Add(-time.Second))

	r.record(100, beforeWindow) // warm-up: neither counted nor timed
	r.from.Store(stamp(now))
	r.measuring.Store(true)
	r.record(100, beforeWindow)                    // sent in the warm-up: counted, not timed
	r.record(100, stamp(now.Add(time.Nanosecond))) // sent in the window: both
	r.record(100, 0)                               // no latency: counted
	r.measuring.Store(false)
	r.to.Store(stamp(time.Now()))
	r.record(100, stamp(now.Add(2*time.Nanosecond)))       // sent in the window, completed after: timed
	r.record(100, stamp(time.Now().Add(time.Millisecond))) // sent after: neither

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

// Messages received together are timed from one clock reading, each from
// the send time it starts with, and counted as record counts them.
func TestRecordAllTimesMessagesReceivedTogether(t *testing.T) {
	r := newRecorder()
	now := nanotime()
	payload := func(sent int64, size int) []byte {
		p := make([]byte, size)
		binary.LittleEndian.PutUint64(p, uint64(sent))
		return p
	}
	r.from.Store(now - int64(time.Second))
	r.measuring.Store(true)
	r.recordAll([][]byte{
		payload(now-int64(3*time.Millisecond), 100),
		payload(now-int64(7*time.Millisecond), 100),
		payload(now-int64(2*time.Second), 100), // sent before the window: counted, not timed
		make([]byte, 4),                        // too short to hold a send time: counted
	}, now)
	r.recordAll([][]byte{payload(now-int64(time.Millisecond), 50)}, 0) // no latencies: counted
	n, bytes, h := r.window()
	if n != 5 || bytes != 354 {
		t.Errorf("window counts %d completions, %d bytes; want 5, 354", n, bytes)
	}
	if h.TotalCount() != 2 || !h.ValuesAreEquivalent(h.Min(), 3000) || !h.ValuesAreEquivalent(h.Max(), 7000) {
		t.Errorf("window timed %d messages, %d to %d us; want 2, 3000 to 7000", h.TotalCount(), h.Min(), h.Max())
	}
	if got := r.total.Load(); got != 5 {
		t.Errorf("total %d; want 5", got)
	}
	if in, _, ih := r.tick(); in != 5 || ih.TotalCount() != 3 {
		t.Errorf("interval counts %d and times %d; want 5 and 3 (the warm-up's message too)", in, ih.TotalCount())
	}
}
