package jsdriver_test

import (
	"context"
	"testing"

	"github.com/ternmq/tern/bench/jsdriver"
	"github.com/ternmq/tern/bench/peer"
	"github.com/ternmq/tern/internal/perf/perftest"
)

// TestWorkloads runs each workload briefly against an embedded JetStream
// with file storage and checks that the figures add up
// (perftest.RunWorkloads).
func TestWorkloads(t *testing.T) {
	r, err := peer.Start(peer.Config{Kind: peer.JetStream, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	d, err := jsdriver.New(r.Addrs.NATS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	perftest.RunWorkloads(t, d, perftest.Options{Rate: 1000, Backlog: 2000})
}
