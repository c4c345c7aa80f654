package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ternmq/tern/proxy"
	"github.com/ternmq/tern/replicator"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (rerun with -update and review the diff):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func pol(kind replicator.PolicyKind, name string, version int64, regions ...string) replicator.Policy {
	return replicator.Policy{PolicyKey: replicator.PolicyKey{Kind: kind, Name: name}, Regions: regions, Version: version, Writer: "us"}
}

// TestPrintPlan renders the plan shapes the e2e transcripts do not reach: a topic that
// inherits, a topology change, a region added at latest that the local region does not send
// to, a region that could not be asked, incoming topics, a removed region.
func TestPrintPlan(t *testing.T) {
	tg, err := parseTarget("acme/telemetry/readings")
	if err != nil {
		t.Fatal(err)
	}
	before := pol(replicator.KindNamespace, "acme/telemetry", 4, "eu", "us", "mars")
	after := pol(replicator.KindTopic, tg.topic.String(), 1, "edge", "eu", "us", "ap")
	after.Topology, after.Hub = replicator.TopologyHub, "eu"
	after.Start = map[string]replicator.Start{"edge": replicator.StartLatest}
	two := 2
	d := proxy.PolicyDryRun{
		PolicyChange: replicator.PolicyChange{Policy: &after},
		Plan: &proxy.PolicyPlan{
			LocalRegion: "us",
			Before:      &proxy.EffectivePolicy{Source: "namespace", Policy: before},
			After:       &proxy.EffectivePolicy{Source: "topic", Policy: after},
			Added: []proxy.RegionPlan{
				{Region: "ap", Start: replicator.StartEarliest, Sends: false, Checked: false, CheckError: "no node of ap is up with an admin address",
					Topics: []proxy.RegionTopic{{Name: tg.topic.String(), Partitions: 2, Action: "unknown"}}},
				{Region: "edge", Start: replicator.StartLatest, Sends: false, Checked: true,
					Topics:   []proxy.RegionTopic{{Name: tg.topic.String(), Partitions: 2, Action: "exists", TheirPartitions: &two}},
					Incoming: []proxy.PlanTopic{{Name: "persistent://acme/telemetry/readings", Partitions: 2, Messages: 1200, Bytes: 3 << 20}}},
			},
			Removed: []string{"mars"},
			Kept:    []string{"eu", "us"},
			Topics:  []proxy.PlanTopic{{Name: tg.topic.String(), Partitions: 2, Messages: 40, Bytes: 4096}},
			Notes:   []string{"replication to mars stops; mars keeps what it already received", "topology changes from mesh to hub (eu)"},
		},
	}
	var b bytes.Buffer
	printPlan(&b, tg, d)
	golden(t, "plan.golden", b.Bytes())
}

// TestRollUp sums streams per destination region and judges health as the replicator does.
func TestRollUp(t *testing.T) {
	now := time.Unix(1700000000, 0)
	st := replicator.Status{Node: "us-1", Region: "us", Transport: "on",
		Links: []replicator.LinkStatus{{Peer: "eu-1", Region: "eu", State: "up"}, {Peer: "ap-1", Region: "ap", State: "down", LastError: "timeout"}},
		Streams: []replicator.StreamStatus{
			{Topic: "persistent://public/default/orders", Partition: 0, Destination: "eu", State: replicator.StreamActive, LagMessages: 3, LagSeconds: 1.5, LastTransfer: &now},
			{Topic: "persistent://public/default/orders", Partition: 1, Destination: "eu", State: replicator.StreamStalled, LagMessages: 7, LagSeconds: 40},
			{Topic: "persistent://public/default/orders", Partition: 0, Destination: "ap", State: replicator.StreamDisconnected, LagMessages: 2, LagSeconds: 9},
			{Topic: "persistent://acme/other/x", Partition: -1, Destination: "eu", State: replicator.StreamActive},
			{Topic: "persistent://tern/system/policies", Partition: -1, Destination: "eu", State: replicator.StreamActive},
		},
	}
	tg, _ := parseTarget("public/default")
	ps := rollUp(st, &tg)
	if ps.Healthy || len(ps.Streams) != 3 || len(ps.Regions) != 2 {
		t.Fatalf("rollUp(public/default) = %+v", ps)
	}
	ap, eu := ps.Regions[0], ps.Regions[1]
	if ap.Region != "ap" || ap.Link != "down" || ap.LinkError != "timeout" || ap.LagMessages != 2 || ap.Healthy {
		t.Errorf("ap = %+v", ap)
	}
	if eu.Region != "eu" || eu.Link != "up" || eu.Streams != 2 || eu.Active != 1 || eu.Stalled != 1 || eu.LagMessages != 10 || eu.LagSeconds != 40 || eu.Healthy {
		t.Errorf("eu = %+v", eu)
	}
	all := rollUp(st, nil)
	if len(all.Streams) != 4 {
		t.Errorf("rollUp(everything) kept %d streams, want 4 (the system topic is left out)", len(all.Streams))
	}
	var b bytes.Buffer
	defer func(f func() time.Time) { clockNow = f }(clockNow)
	clockNow = func() time.Time { return now.Add(90 * time.Second) }
	printPolicyStatus(&b, ps, st.Transport)
	golden(t, "status.golden", b.Bytes())
}
