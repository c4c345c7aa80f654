package kafkadriver_test

import (
	"bytes"
	"context"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/ternmq/tern/internal/perf"
	"github.com/ternmq/tern/internal/perf/kafkadriver"
	"github.com/ternmq/tern/internal/testcluster"
)

// TestWorkloads runs each workload briefly against a tern node and checks
// that the figures add up: messages counted, rates and latencies set, the
// progress lines and the table printed.
func TestWorkloads(t *testing.T) {
	d := newDriver(t)
	for _, mode := range []perf.Mode{perf.ModeProduce, perf.ModeConsume, perf.ModeE2E} {
		t.Run(string(mode), func(t *testing.T) {
			w := perf.DefaultConfig()
			w.Mode = mode
			w.Partitions = 2
			w.Consumers = 2
			w.Warmup = 200 * time.Millisecond
			w.Duration = time.Second
			w.Interval = 250 * time.Millisecond
			w.Backlog = 3000
			w.MessageSize = 100
			switch mode {
			case perf.ModeE2E:
				w.Rate = 2000
			case perf.ModeConsume:
				w.Warmup = 0 // the small backlog drains in well under a second
			}
			var progress bytes.Buffer
			w.Progress = &progress
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			prevGC := debug.SetGCPercent(123)
			res, err := perf.Run(ctx, w, d)
			afterGC := debug.SetGCPercent(prevGC)
			if err != nil {
				t.Fatalf("run: %v\nprogress:\n%s", err, progress.String())
			}
			if res.Errors != 0 {
				t.Errorf("%d errors", res.Errors)
			}
			// The run's GC target is reported and the process's is back.
			if res.ClientGOGC != 400 {
				t.Errorf("client GOGC %d in the result, want the default 400", res.ClientGOGC)
			}
			if afterGC != 123 {
				t.Errorf("GC percent %d after the run, want the process's 123 back", afterGC)
			}
			switch mode {
			case perf.ModeProduce:
				checkSide(t, "publish", res.Publish, true)
			case perf.ModeConsume:
				if res.Fill == nil || res.Fill.Messages != w.Backlog {
					t.Errorf("fill = %+v, want %d messages", res.Fill, w.Backlog)
				}
				checkSide(t, "consume", res.Consume, false)
			case perf.ModeE2E:
				checkSide(t, "publish", res.Publish, true)
				checkSide(t, "end-to-end", res.Consume, true)
				// At 2000 msg/s for a second the window holds about 2000
				// messages; pacing must neither stall nor run away.
				if n := res.Publish.Messages; n < 1000 || n > 3000 {
					t.Errorf("published %d in the window at 2000 msg/s", n)
				}
			}
			// The consume run drains its small backlog before the first line.
			if mode != perf.ModeConsume && !strings.Contains(progress.String(), "kafka | pub") {
				t.Errorf("no progress line:\n%s", progress.String())
			}
			var table bytes.Buffer
			if err := res.WriteTable(&table); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"msgs/s", "p99.9 ms", "load average"} {
				if !strings.Contains(table.String(), want) {
					t.Errorf("table lacks %q:\n%s", want, table.String())
				}
			}
		})
	}
}

// TestConsumeWarmupStopsAtAFifthOfTheBacklog: a consume run whose
// consumers would read the whole backlog within the warm-up ends its
// warm-up after a fifth of it and measures the rest, instead of failing.
func TestConsumeWarmupStopsAtAFifthOfTheBacklog(t *testing.T) {
	d := newDriver(t)
	w := perf.DefaultConfig()
	w.Mode = perf.ModeConsume
	w.Warmup = time.Minute // far longer than the backlog takes to read
	w.Duration = time.Minute
	// Many fetches' worth, so the warm-up can end between two of them.
	w.Backlog = 200_000
	w.MessageSize = 100
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	res, err := perf.Run(ctx, w, d)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if took := time.Since(start); took > 45*time.Second {
		t.Errorf("run took %v: the warm-up waited out its time", took)
	}
	checkSide(t, "consume", res.Consume, false)
	// The measured part is what follows the first fifth, give or take a
	// fetch's worth read while the warm-up ended.
	if n := res.Consume.Messages; n > w.Backlog*4/5 || n < w.Backlog/2 {
		t.Errorf("measured %d of %d messages; want at most the last four fifths", n, w.Backlog)
	}
}

// newDriver starts a node and returns a driver for it, closed with the test.
func newDriver(t *testing.T) *kafkadriver.Driver {
	t.Helper()
	node := testcluster.Start(t).Node(0)
	cfg := kafkadriver.DefaultConfig()
	cfg.Brokers = []string{node.KafkaAddr()}
	d, err := kafkadriver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func checkSide(t *testing.T, name string, f *perf.Figures, latency bool) {
	t.Helper()
	if f == nil || f.Messages <= 0 || f.MsgsPerSec <= 0 || f.MBPerSec <= 0 || f.Bytes != f.Messages*100 {
		t.Fatalf("%s figures %+v", name, f)
	}
	if !latency {
		return
	}
	l := f.Latency
	if l == nil || l.Count == 0 || l.P50 <= 0 || l.P50 > l.P99 || l.P99 > l.P999 || l.P999 > l.Max {
		t.Errorf("%s latency %+v: want 0 < p50 <= p99 <= p99.9 <= max", name, l)
	}
}
