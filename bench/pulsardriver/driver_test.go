package pulsardriver_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ternmq/tern/bench/pulsardriver"
	"github.com/ternmq/tern/internal/perf/perftest"
	"github.com/ternmq/tern/internal/testcluster"
	"github.com/ternmq/tern/protocols"
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

// TestNoBatchingSendsEachMessageAlone: with NoBatching each message is an
// entry of its own; with batching and a long delay, the same messages
// share entries.
func TestNoBatchingSendsEachMessageAlone(t *testing.T) {
	node := testcluster.Start(t).Node(0)
	for _, tc := range []struct {
		name      string
		cfg       pulsardriver.Config
		wantAlone bool
	}{
		{"unbatched", pulsardriver.Config{NoBatching: true}, true},
		{"batched", pulsardriver.Config{Linger: time.Hour}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.URL, cfg.AdminURL = node.PulsarURL(), node.HTTPURL()
			d, err := pulsardriver.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			topic := "alone-" + tc.name
			if err := d.CreateTopic(ctx, topic, 1); err != nil {
				t.Fatal(err)
			}
			pr, err := d.NewProducer(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			const n = 20
			done := make(chan error, n)
			for i := range n {
				pr.Send(ctx, []byte(fmt.Sprint("m", i)), func(err error) { done <- err })
			}
			if err := pr.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			for range n {
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			}
			_ = pr.Close()
			entries := map[int64]int{}
			for off := int64(0); off < n; {
				res, err := node.Proxy().Fetch(ctx, protocols.Partition{Topic: protocols.TopicName{Tenant: "public", Namespace: "default", Local: topic}, Index: 0}, off, 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Entries) == 0 {
					t.Fatalf("the log ends at offset %d of %d", off, n)
				}
				for _, e := range res.Entries {
					entries[e.BaseOffset] = int(e.Count)
					off = e.BaseOffset + e.Count
				}
			}
			if alone := len(entries) == n; alone != tc.wantAlone {
				t.Fatalf("%d messages were written as %d entries %v", n, len(entries), entries)
			}
		})
	}
}
