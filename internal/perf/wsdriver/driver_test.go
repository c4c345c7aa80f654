package wsdriver_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ternmq/tern/internal/perf/perftest"
	"github.com/ternmq/tern/internal/perf/wsdriver"
	"github.com/ternmq/tern/internal/testcluster"
)

// TestWorkloads runs each workload briefly against a tern node over the
// WebSocket API and checks that the figures add up
// (perftest.RunWorkloads).
func TestWorkloads(t *testing.T) {
	node := testcluster.Start(t).Node(0)
	d, err := wsdriver.New(wsdriver.Config{URL: "ws://" + node.Config.Listeners.HTTP})
	if err != nil {
		t.Fatal(err)
	}
	perftest.RunWorkloads(t, d, perftest.Options{Rate: 1000, Backlog: 2000})
}

// TestWorkloadsBatching: the same workloads with the producers asking the
// node to batch.
func TestWorkloadsBatching(t *testing.T) {
	node := testcluster.Start(t).Node(0)
	d, err := wsdriver.New(wsdriver.Config{URL: "ws://" + node.Config.Listeners.HTTP, Batching: true, BatchDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	perftest.RunWorkloads(t, d, perftest.Options{Rate: 1000, Backlog: 2000})
}

// TestConfigErrorsSayWhatToChange: each bad setting is named.
func TestConfigErrorsSayWhatToChange(t *testing.T) {
	_, err := wsdriver.New(wsdriver.Config{URL: "http://x:1", AdminURL: "x:1", Window: -1, BatchDelay: -time.Second})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"want ws://host:port", "want http://host:port", "window -1 is negative", "batch delay -1s is negative"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}
