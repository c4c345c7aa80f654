package perf

import (
	"encoding/binary"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are recorded in microseconds from 1 us to one hour with three
// significant digits (HDR: the error at any value is below 0.1%).
const (
	histMin    = 1
	histMax    = int64(time.Hour / time.Microsecond)
	histDigits = 3
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(histMin, histMax, histDigits) }

// recorder counts completed messages (acknowledged publishes or consumed
// messages) and their latencies, for the current progress interval and for
// the measured window. Callbacks from many goroutines record into it.
//
// The window counts the completions that fall in it (its msgs/s), and the
// latencies of the messages sent in it, whenever they complete: a message
// sent during the warm-up and received in the window is the warm-up's, and
// one sent at the window's end and received after it is the window's.
type recorder struct {
	// measuring is set during the measured window.
	measuring atomic.Bool
	// from and to bound the send times (timestamps, see nanotime) of the
	// messages whose latencies are the window's: [from, to).
	from, to atomic.Int64

	// interval counters, swapped out by each progress line.
	n, bytes atomic.Int64
	// total counts every completion since the start, window or not.
	total atomic.Int64

	mu struct {
		sync.Mutex
		interval *hdrhistogram.Histogram
		window   *hdrhistogram.Histogram
		wn       int64 // completions in the window
		wbytes   int64
	}
}

func newRecorder() *recorder {
	r := &recorder{}
	r.from.Store(math.MaxInt64)
	r.to.Store(math.MaxInt64)
	r.mu.interval = newHist()
	r.mu.window = newHist()
	return r
}

// clockBase anchors the load generator's timestamps: a message's send and
// receive times are nanoseconds since it on the monotonic clock (see
// nanotime). It lies a second before the process started, so no reading
// is 0, which means "no timestamp".
var clockBase = time.Now().Add(-time.Second)

// nanotime is now as a timestamp. Reading the monotonic clock alone takes
// one clock read where time.Now takes two (27 against 48 ns on the machine
// we measure on). At 600k messages a second, sent and received, the load
// generator's time.Now calls took a tenth of a core from the system under
// test.
func nanotime() int64 { return int64(time.Since(clockBase)) }

// stamp is t as a timestamp; t must carry a monotonic reading (come from
// time.Now).
func stamp(t time.Time) int64 { return int64(t.Sub(clockBase)) }

// record counts one completion of size bytes, now, of a message sent at
// sent (a timestamp); sent 0 means no latency.
func (r *recorder) record(size int, sent int64) {
	var now int64
	if sent != 0 {
		now = nanotime()
	}
	r.n.Add(1)
	r.bytes.Add(int64(size))
	r.total.Add(1)
	from, to, measuring := r.from.Load(), r.to.Load(), r.measuring.Load()
	r.mu.Lock()
	r.addLocked(size, sent, now, from, to, measuring)
	r.mu.Unlock()
}

// recordAll counts, under one lock, the completions of the messages whose
// payloads were received together at now (a timestamp; 0 for no
// latencies), each sent at the time it starts with (see sentOf).
func (r *recorder) recordAll(ps [][]byte, now int64) {
	var bytes int64
	for _, p := range ps {
		bytes += int64(len(p))
	}
	r.n.Add(int64(len(ps)))
	r.bytes.Add(bytes)
	r.total.Add(int64(len(ps)))
	from, to, measuring := r.from.Load(), r.to.Load(), r.measuring.Load()
	r.mu.Lock()
	for _, p := range ps {
		var sent int64
		if now != 0 {
			sent = sentOf(p)
		}
		r.addLocked(len(p), sent, now, from, to, measuring)
	}
	r.mu.Unlock()
}

// sentOf is the send time a payload starts with; 0 (no latency) if it is
// too short to hold one.
func sentOf(p []byte) int64 {
	if len(p) < minMessageSize {
		return 0
	}
	return int64(binary.LittleEndian.Uint64(p))
}

// addLocked records one completion at now of a message sent at sent (0:
// no latency) into the interval and, when it is the window's, the
// window; from, to and measuring are the window's as loaded before. r.mu
// is held.
func (r *recorder) addLocked(size int, sent, now, from, to int64, measuring bool) {
	if sent != 0 {
		us := min(max((now-sent)/int64(time.Microsecond), histMin), histMax)
		_ = r.mu.interval.RecordValue(us)
		if sent >= from && sent < to {
			_ = r.mu.window.RecordValue(us)
		}
	}
	if measuring {
		r.mu.wn++
		r.mu.wbytes += int64(size)
	}
}

// tick returns the interval's counts and latency histogram and starts a
// new interval.
func (r *recorder) tick() (n, bytes int64, h *hdrhistogram.Histogram) {
	n, bytes = r.n.Swap(0), r.bytes.Swap(0)
	fresh := newHist()
	r.mu.Lock()
	h = r.mu.interval
	r.mu.interval = fresh
	r.mu.Unlock()
	return n, bytes, h
}

// window returns the measured window's counts and histogram.
func (r *recorder) window() (n, bytes int64, h *hdrhistogram.Histogram) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.wn, r.mu.wbytes, r.mu.window.Clone()
}

// Latency is a latency distribution in milliseconds.
type Latency struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P95   float64 `json:"p95_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p99_9_ms"`
	Max   float64 `json:"max_ms"`
}

func latencyOf(h *hdrhistogram.Histogram) Latency {
	ms := func(us int64) float64 { return float64(us) / 1000 }
	if h.TotalCount() == 0 {
		return Latency{}
	}
	return Latency{
		Count: h.TotalCount(),
		Mean:  h.Mean() / 1000,
		P50:   ms(h.ValueAtQuantile(50)),
		P95:   ms(h.ValueAtQuantile(95)),
		P99:   ms(h.ValueAtQuantile(99)),
		P999:  ms(h.ValueAtQuantile(99.9)),
		Max:   ms(h.Max()),
	}
}
