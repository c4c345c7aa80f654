package e2e

import (
	"strconv"

	"context"
	"github.com/ternmq/tern/internal/testcluster"
	"testing"
	"time"

	"github.com/ternmq/tern/protocols"
)

// TestReplActiveActiveBrokerAPI: producers in both regions, a namespace policy [us, eu]; each
// region ends with every message exactly once, in origin order per origin.
func TestReplActiveActiveBrokerAPI(t *testing.T) {
	c := regionsCluster(t, "us", "eu")
	us, eu := c.Node(0), c.Node(1)
	ch := putPolicy(t, us, map[string]any{"namespace": "public/default", "regions": []string{"us", "eu"}})
	waitPolicy(t, c, nsKey("public/default"), ch.Policy.Version)

	name := topicName(t, "orders")
	for _, n := range []int{0, 1} {
		if _, err := c.Node(n).Proxy().CreateTopic(context.Background(), name, 2, nil); err != nil {
			t.Fatal(err)
		}
	}
	want := map[int]map[string][]string{0: {}, 1: {}}
	for part := 0; part < 2; part++ {
		p := protocols.Partition{Topic: name, Index: part}
		for i := 0; i < 20; i++ {
			a := seq("us", "p"+string(rune('0'+part)), i*3, 3)
			produceValues(t, us, p, a...)
			want[part]["us"] = append(want[part]["us"], a...)
			b := seq("eu", "p"+string(rune('0'+part)), i*2, 2)
			produceValues(t, eu, p, b...)
			want[part]["eu"] = append(want[part]["eu"], b...)
		}
	}
	for part := 0; part < 2; part++ {
		p := protocols.Partition{Topic: name, Index: part}
		for _, n := range c.Nodes() {
			got := waitCount(t, n, p, 100, 20*time.Second)
			checkExactlyOnce(t, n.Name, got, want[part])
		}
	}
	waitCaughtUp(t, us, 10*time.Second)
	waitCaughtUp(t, eu, 10*time.Second)
	st := replStatus(t, us)
	if !st.Summary.Healthy || st.Summary.TotalLagMessages != 0 {
		t.Fatalf("status after catching up: %+v", st.Summary)
	}
}

// TestReplThreeRegionMesh: three regions in full mesh, all producing; every region ends with
// every message once, and each entry crossed each link exactly once (no forwarding, no loops).
func TestReplThreeRegionMesh(t *testing.T) {
	c := regionsCluster(t, "us", "eu", "ap")
	ch := putPolicy(t, c.Node(1), map[string]any{"namespace": "public/default", "regions": []string{"us", "eu", "ap"}})
	waitPolicy(t, c, nsKey("public/default"), ch.Policy.Version)
	name := topicName(t, "mesh3")
	p := protocols.Partition{Topic: name, Index: -1}
	want := map[string][]string{}
	for i := 0; i < 15; i++ {
		for _, n := range c.Nodes() {
			vals := seq(n.Region, "m", i*4, 4)
			if i == 0 {
				// The first producer in each region creates the topic there (or finds it
				// created by replication from a faster region).
				if _, err := n.Proxy().EnsureTopic(context.Background(), name, 0, nil); err != nil {
					t.Fatal(err)
				}
			}
			produceValues(t, n, p, vals...)
			want[n.Region] = append(want[n.Region], vals...)
		}
	}
	for _, n := range c.Nodes() {
		checkExactlyOnce(t, n.Name, waitCount(t, n, p, 180, 20*time.Second), want)
	}
	for _, n := range c.Nodes() {
		waitCaughtUp(t, n, 10*time.Second)
		st := n.Proxy().Replication().Status()
		var sent uint64
		for _, s := range st.Streams {
			if s.Topic == name.String() {
				sent += s.SentMessages
			}
		}
		// 60 messages produced here, sent once to each of the two other regions.
		if sent != 120 {
			t.Errorf("%s sent %d messages of %s, want 120 (each once per link)", n.Name, sent, name)
		}
		for _, in := range st.Inbound {
			if in.Topic == name.String() && (in.Looped != 0 || in.Duplicates != 0) {
				t.Errorf("%s received %+v: a full mesh should see no loops or duplicates", n.Name, in)
			}
		}
	}
}

// TestReplHubAndSpoke: an edge region replicates to a hub only; the hub forwards to the third
// region, and the third region's entries reach the edge through the hub.
func TestReplHubAndSpoke(t *testing.T) {
	c := regionsCluster(t, "edge", "hub", "cloud")
	edge, hub, cloud := c.Node(0), c.Node(1), c.Node(2)
	ch := putPolicy(t, hub, map[string]any{"namespace": "public/default", "regions": []string{"edge", "hub", "cloud"},
		"topology": "hub", "hub": "hub"})
	waitPolicy(t, c, nsKey("public/default"), ch.Policy.Version)
	name := topicName(t, "telemetry")
	for _, n := range c.Nodes() {
		if _, err := n.Proxy().EnsureTopic(context.Background(), name, 3, nil); err != nil {
			t.Fatal(err)
		}
	}
	want := map[int]map[string][]string{}
	for part := 0; part < 3; part++ {
		p := protocols.Partition{Topic: name, Index: part}
		want[part] = map[string][]string{}
		for i := 0; i < 10; i++ {
			for _, n := range []*testcluster.Node{edge, cloud, hub} {
				vals := seq(n.Region, "t", i*2, 2)
				produceValues(t, n, p, vals...)
				want[part][n.Region] = append(want[part][n.Region], vals...)
			}
		}
	}
	for part := 0; part < 3; part++ {
		p := protocols.Partition{Topic: name, Index: part}
		for _, n := range c.Nodes() {
			checkExactlyOnce(t, n.Name+" partition "+strconv.Itoa(part), waitCount(t, n, p, 60, 20*time.Second), want[part])
		}
	}
	// The edge talks to the hub only; the cloud too.
	for _, n := range []*testcluster.Node{edge, cloud} {
		for _, s := range n.Proxy().Replication().Status().Streams {
			if s.Topic == name.String() && s.Destination != "hub" {
				t.Errorf("%s has a stream to %s; a spoke sends to the hub only", n.Name, s.Destination)
			}
		}
	}
	// The hub forwards: per partition it sends its 20 own to each spoke, plus the 20 of each
	// spoke to the other spoke.
	var sent uint64
	for _, s := range hub.Proxy().Replication().Status().Streams {
		if s.Topic == name.String() {
			sent += s.SentMessages
		}
	}
	if want := uint64(3 * (2*20 + 2*20)); sent != want {
		t.Errorf("hub sent %d messages, want %d", sent, want)
	}
}
