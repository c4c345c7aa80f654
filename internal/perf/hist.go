package perf

import (
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
type recorder struct {
	// measuring is set during the measured window.
	measuring atomic.Bool

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
	r.mu.interval = newHist()
	r.mu.window = newHist()
	return r
}

// record counts one completion of size bytes; lat < 0 means no latency.
func (r *recorder) record(size int, lat time.Duration) {
	r.n.Add(1)
	r.bytes.Add(int64(size))
	r.total.Add(1)
	us := max(int64(lat/time.Microsecond), histMin)
	us = min(us, histMax)
	measuring := r.measuring.Load()
	r.mu.Lock()
	if lat >= 0 {
		_ = r.mu.interval.RecordValue(us)
	}
	if measuring {
		r.mu.wn++
		r.mu.wbytes += int64(size)
		if lat >= 0 {
			_ = r.mu.window.RecordValue(us)
		}
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
