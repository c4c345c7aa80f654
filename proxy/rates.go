package proxy

import (
	"sync"
	"time"
)

// Rates for the console and the API (messages and bytes per second in,
// messages per second consumed), computed from samples of counters the node
// keeps anyway: a log's high watermark and size, a subscription's consumed
// count (high watermark less backlog). A sample is taken when the stats are
// read, at most one a second per series, and a rate is the change between
// now and the oldest sample of the last rateWindow at least a second old.
// Nothing runs when nobody reads; the console polls every two seconds, so
// its rates are never older than that, and a one-off read after a long
// pause gets the average since the previous read. The append path is not
// touched.
const (
	rateWindow  = 10 * time.Second
	rateMinGap  = time.Second
	rateSamples = 12
	rateIdle    = 10 * time.Minute
)

// rateBook holds the sample series of one node.
type rateBook struct {
	mu     sync.Mutex
	series map[string]*rateSeries
	pruned time.Time
}

type rateSeries struct {
	samples []rateSample
	used    time.Time
}

type rateSample struct {
	at   time.Time
	vals [2]int64
}

func newRateBook() *rateBook { return &rateBook{series: map[string]*rateSeries{}} }

// observe records the current values of a series and returns their rates
// per second, or ok=false until a sample old enough exists. A counter that
// went down (a log recreated, a cursor reset) restarts its series.
func (b *rateBook) observe(key string, now time.Time, v0, v1 int64) (r0, r1 float64, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Sub(b.pruned) > rateIdle {
		for k, s := range b.series {
			if now.Sub(s.used) > rateIdle {
				delete(b.series, k)
			}
		}
		b.pruned = now
	}
	s := b.series[key]
	if s == nil {
		s = &rateSeries{}
		b.series[key] = s
	}
	s.used = now
	cur := rateSample{at: now, vals: [2]int64{v0, v1}}
	if n := len(s.samples); n > 0 && (v0 < s.samples[n-1].vals[0] || v1 < s.samples[n-1].vals[1]) {
		s.samples = s.samples[:0]
	}
	// Drop samples past the window that a newer one past it replaces.
	for len(s.samples) > 1 && now.Sub(s.samples[1].at) > rateWindow {
		s.samples = s.samples[1:]
	}
	// The base is the oldest sample within the window and at least
	// rateMinGap old, else the newest sample older than the window (an
	// average over the pause).
	var base *rateSample
	for i := range s.samples {
		age := now.Sub(s.samples[i].at)
		if age < rateMinGap {
			break
		}
		base = &s.samples[i]
		if age <= rateWindow {
			break
		}
	}
	if base != nil {
		secs := now.Sub(base.at).Seconds()
		r0 = float64(v0-base.vals[0]) / secs
		r1 = float64(v1-base.vals[1]) / secs
		ok = true
	}
	if n := len(s.samples); n == 0 || now.Sub(s.samples[n-1].at) >= rateMinGap {
		if n >= rateSamples {
			s.samples = append(s.samples[:0], s.samples[1:]...)
		}
		s.samples = append(s.samples, cur)
	}
	return r0, r1, ok
}
