package perftest

import (
	"bytes"
	"context"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ternmq/tern/internal/perf"
)

// Options shape the short workloads.
type Options struct {
	// Rate is the e2e publish rate in msgs/s.
	Rate int
	// Backlog is the consume workload's backlog.
	Backlog int64
}

// MessageSize is the workloads' message size.
const MessageSize = 100

// RunWorkloads runs produce, consume and e2e briefly through d, on two
// partitions read by two consumers, and checks that the figures add up:
// messages counted, every message of the backlog received exactly once,
// rates and latencies set, the progress lines and the table printed, and
// the client's GC target reported and restored.
func RunWorkloads(t *testing.T, d perf.Driver, o Options) {
	for _, mode := range []perf.Mode{perf.ModeProduce, perf.ModeConsume, perf.ModeE2E} {
		t.Run(string(mode), func(t *testing.T) {
			w := perf.DefaultConfig()
			w.Mode = mode
			w.Partitions = 2
			w.Consumers = 2
			w.Warmup = 200 * time.Millisecond
			w.Duration = time.Second
			w.Interval = 250 * time.Millisecond
			w.Backlog = o.Backlog
			w.MessageSize = MessageSize
			switch mode {
			case perf.ModeE2E:
				w.Rate = o.Rate
			case perf.ModeConsume:
				w.Warmup = 0 // the small backlog drains in well under a second
			}
			var progress bytes.Buffer
			w.Progress = &progress
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cd := &Counting{Driver: d}
			prevGC := debug.SetGCPercent(123)
			res, err := perf.Run(ctx, w, cd)
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
				CheckSide(t, "publish", res.Publish, true)
			case perf.ModeConsume:
				if res.Fill == nil || res.Fill.Messages != w.Backlog {
					t.Errorf("fill = %+v, want %d messages", res.Fill, w.Backlog)
				}
				CheckSide(t, "consume", res.Consume, false)
				// Every message of the backlog is received once: more
				// would be redelivery, fewer a lost message.
				if n := cd.Received.Load(); n != w.Backlog {
					t.Errorf("received %d messages of a %d-message backlog", n, w.Backlog)
				}
			case perf.ModeE2E:
				CheckSide(t, "publish", res.Publish, true)
				CheckSide(t, "end-to-end", res.Consume, true)
				// The window holds about a second's worth; pacing must
				// neither stall nor run away.
				if n := res.Publish.Messages; n < int64(o.Rate/2) || n > int64(o.Rate*3/2) {
					t.Errorf("published %d in the window at %d msg/s", n, o.Rate)
				}
			}
			// The consume run drains its small backlog before the first line.
			if mode != perf.ModeConsume && !strings.Contains(progress.String(), d.Name()+" | pub") {
				t.Errorf("no progress line:\n%s", progress.String())
			}
			// Where /proc/stat tells, a window of a second says how busy
			// the machine was: the run itself kept it busy. (A consume
			// window is as long as its small backlog takes to read, too
			// short for the kernel's 10 ms ticks to say.)
			if runtime.GOOS == "linux" && mode != perf.ModeConsume {
				if m := res.Machine; m == nil || m.Busy <= 0 || m.Busy > 1 || m.Cores < 1 {
					t.Errorf("machine figures %+v: want a busy share in (0, 1]", m)
				}
			}
			var table bytes.Buffer
			if err := res.WriteTable(&table); err != nil {
				t.Fatal(err)
			}
			wants := []string{"2 partitions, 1 producer,", "msgs/s", "p99.9 ms", "load average"}
			if res.Machine != nil {
				wants = append(wants, "machine in the window: ")
			}
			for _, want := range wants {
				if !strings.Contains(table.String(), want) {
					t.Errorf("table lacks %q:\n%s", want, table.String())
				}
			}
		})
	}
}

// Counting counts every payload its consumers hand on, in the window or not.
type Counting struct {
	perf.Driver
	Received atomic.Int64
}

// NewConsumer wraps the driver's, counting each payload.
func (c *Counting) NewConsumer(ctx context.Context, topic string, partitions, index, count int, handle func([][]byte)) (perf.Consumer, error) {
	return c.Driver.NewConsumer(ctx, topic, partitions, index, count, func(ps [][]byte) {
		c.Received.Add(int64(len(ps)))
		handle(ps)
	})
}

// CheckSide checks one side's figures: messages of MessageSize counted
// with a rate, and with latency, percentiles in order.
func CheckSide(t *testing.T, name string, f *perf.Figures, latency bool) {
	t.Helper()
	if f == nil || f.Messages <= 0 || f.MsgsPerSec <= 0 || f.MBPerSec <= 0 || f.Bytes != f.Messages*MessageSize {
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
