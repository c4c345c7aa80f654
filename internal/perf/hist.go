package perf

import (
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
	// from and to bound the send times (Unix ns) of the messages whose
	// latencies are the window's: [from, to).
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

// record counts one completion of size bytes, of a message sent at sent
// (Unix ns); sent 0 means no latency.
func (r *recorder) record(size int, sent int64) {
	r.n.Add(1)
	r.bytes.Add(int64(size))
	r.total.Add(1)
	var us int64
	if sent != 0 {
		us = min(max((time.Now().UnixNano()-sent)/int64(time.Microsecond), histMin), histMax)
	}
	inWindow := sent != 0 && sent >= r.from.Load() && sent < r.to.Load()
	measuring := r.measuring.Load()
	r.mu.Lock()
	if sent != 0 {
		_ = r.mu.interval.RecordValue(us)
	}
	if measuring {
		r.mu.wn++
		r.mu.wbytes += int64(size)
	}
	if inWindow {
		_ = r.mu.window.RecordValue(us)
	}
	r.mu.Unlock()
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
