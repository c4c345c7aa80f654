package kafkadriver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ternmq/tern/internal/perf"
	"github.com/ternmq/tern/internal/perf/kafkadriver"
	"github.com/ternmq/tern/internal/perf/perfcli"
	"github.com/ternmq/tern/internal/perf/perftest"
	"github.com/ternmq/tern/internal/testcluster"
)

// TestWorkloads runs each workload briefly against a tern node over
// Kafka and checks that the figures add up (perftest.RunWorkloads).
func TestWorkloads(t *testing.T) {
	perftest.RunWorkloads(t, newDriver(t), perftest.Options{Rate: 2000, Backlog: 3000})
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
	w.MessageSize = perftest.MessageSize
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
	perftest.CheckSide(t, "consume", res.Consume, false)
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

// TestFetchSize: --fetch-size reaches the consumers, which read a backlog
// through 10 MiB fetches, and a size out of range is refused with what to
// give instead.
func TestFetchSize(t *testing.T) {
	for _, bad := range []int{-1, 60 << 20} {
		cfg := kafkadriver.DefaultConfig()
		cfg.Brokers = []string{"127.0.0.1:9"}
		cfg.FetchSize = bad
		if _, err := kafkadriver.New(cfg); err == nil || !strings.Contains(err.Error(), "fetch size") {
			t.Errorf("fetch size %d: %v, want an error naming the fetch size", bad, err)
		}
	}
	node := testcluster.Start(t).Node(0)
	f := &perfcli.Flags{KafkaAddr: node.KafkaAddr(), Acks: "all", Compression: "none", FetchSize: 10 << 20}
	cfg := kafkadriver.FlagsConfig(f)
	if cfg.FetchSize != 10<<20 || len(cfg.Brokers) != 1 {
		t.Fatalf("config from flags: %+v", cfg)
	}
	d, err := kafkadriver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	w := perf.DefaultConfig()
	w.Mode = perf.ModeConsume
	w.Backlog = 20_000
	w.Warmup = 0
	w.Duration = 30 * time.Second
	w.MessageSize = perftest.MessageSize
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := perf.Run(ctx, w, d)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	perftest.CheckSide(t, "consume", res.Consume, false)
	if res.Consume.Messages != w.Backlog {
		t.Errorf("consumed %d of a %d-message backlog", res.Consume.Messages, w.Backlog)
	}
}
