package wsdriver_test

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ternmq/tern/internal/perf"
	"github.com/ternmq/tern/internal/perf/wsdriver"
	"github.com/ternmq/tern/internal/testcluster"
)

// TestWorkloads runs each workload briefly against a tern node over the
// WebSocket API, on two partitions read by two consumers, and checks that
// the figures add up: every message counted once, rates and latencies
// set, progress lines printed.
func TestWorkloads(t *testing.T) {
	node := testcluster.Start(t).Node(0)
	ws, err := wsdriver.New(wsdriver.Config{URL: "ws://" + node.Config.Listeners.HTTP})
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []perf.Mode{perf.ModeProduce, perf.ModeConsume, perf.ModeE2E} {
		t.Run(string(mode), func(t *testing.T) {
			w := perf.DefaultConfig()
			w.Mode = mode
			w.Partitions = 2
			w.Consumers = 2
			w.Warmup = 200 * time.Millisecond
			w.Duration = time.Second
			w.Interval = 250 * time.Millisecond
			w.Backlog = 2000
			w.MessageSize = 100
			switch mode {
			case perf.ModeE2E:
				w.Rate = 1000
			case perf.ModeConsume:
				w.Warmup = 0
			}
			var progress bytes.Buffer
			w.Progress = &progress
			d := &counting{Driver: ws}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			res, err := perf.Run(ctx, w, d)
			if err != nil {
				t.Fatalf("run: %v\nprogress:\n%s", err, progress.String())
			}
			if res.Errors != 0 {
				t.Errorf("%d errors", res.Errors)
			}
			switch mode {
			case perf.ModeProduce:
				checkSide(t, "publish", res.Publish, true)
			case perf.ModeConsume:
				if res.Fill == nil || res.Fill.Messages != w.Backlog {
					t.Errorf("fill = %+v, want %d messages", res.Fill, w.Backlog)
				}
				checkSide(t, "consume", res.Consume, false)
				// Every message of the backlog is read once: more would be
				// redelivery, fewer a lost message.
				if n := d.received.Load(); n != int64(w.Backlog) {
					t.Errorf("received %d messages of a %d-message backlog", n, w.Backlog)
				}
			case perf.ModeE2E:
				checkSide(t, "publish", res.Publish, true)
				checkSide(t, "end-to-end", res.Consume, true)
				if n := res.Publish.Messages; n < 500 || n > 1500 {
					t.Errorf("published %d in the window at 1000 msg/s", n)
				}
			}
			if mode != perf.ModeConsume && !strings.Contains(progress.String(), "websocket | pub") {
				t.Errorf("no progress line:\n%s", progress.String())
			}
		})
	}
}

// counting counts every payload its consumers hand on, in the window or not.
type counting struct {
	perf.Driver
	received atomic.Int64
}

func (c *counting) NewConsumer(ctx context.Context, topic string, partitions, index, count int, handle func([]byte)) (perf.Consumer, error) {
	return c.Driver.NewConsumer(ctx, topic, partitions, index, count, func(p []byte) {
		c.received.Add(1)
		handle(p)
	})
}

// TestConfigErrorsSayWhatToChange: each bad setting is named.
func TestConfigErrorsSayWhatToChange(t *testing.T) {
	_, err := wsdriver.New(wsdriver.Config{URL: "http://x:1", AdminURL: "x:1", Window: -1})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"want ws://host:port", "want http://host:port", "window -1 is negative"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
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
