package pulsardriver_test

import (
	"strings"
	"testing"

	"github.com/ternmq/tern/bench/pulsardriver"
	"github.com/ternmq/tern/internal/perf/perftest"
	"github.com/ternmq/tern/internal/testcluster"
)

// TestWorkloads runs each workload briefly against a tern node over the
// Pulsar protocol with the Pulsar Go client and checks that the figures
// add up (perftest.RunWorkloads).
func TestWorkloads(t *testing.T) {
	node := testcluster.Start(t).Node(0)
	d, err := pulsardriver.New(pulsardriver.Config{URL: node.PulsarURL(), AdminURL: node.HTTPURL()})
	if err != nil {
		t.Fatal(err)
	}
	perftest.RunWorkloads(t, d, perftest.Options{Rate: 1000, Backlog: 2000})
}

// TestConfigErrorsSayWhatToChange: each bad setting is named.
func TestConfigErrorsSayWhatToChange(t *testing.T) {
	_, err := pulsardriver.New(pulsardriver.Config{URL: "http://x:1", AdminURL: "x:1", Linger: -1})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"want pulsar://host:port", "want http://host:port", "linger -1ns is negative"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}
