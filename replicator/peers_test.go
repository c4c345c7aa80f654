package replicator

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ternmq/tern/regions"
)

func node(name, region string, st regions.State, quic string) regions.Node {
	n := regions.Node{Name: name, State: st}
	n.Region = region
	n.QUIC = quic
	return n
}

func TestPeerTableChoosesAndFollows(t *testing.T) {
	pt := newPeerTable("us", "us-1")
	add, remove, changed := pt.reset(regions.Directory{Nodes: []regions.Node{
		node("eu-2", "eu", regions.StateAlive, "10.0.0.2:7947"),
		node("eu-1", "eu", regions.StateFailed, "10.0.0.1:7947"),
		node("us-1", "us", regions.StateAlive, "10.0.1.1:7947"),
		node("us-2", "us", regions.StateAlive, "10.0.1.2:7947"),
		node("ap-1", "ap", regions.StateAlive, ""),
	}})
	if !changed || len(remove) != 0 {
		t.Fatalf("reset: changed %v remove %v", changed, remove)
	}
	var names []string
	for _, p := range add {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	// Nodes of the local region and nodes without a mesh address are not transport peers.
	if !slices.Equal(names, []string{"eu-1", "eu-2"}) {
		t.Fatalf("peers %v", names)
	}
	if !slices.Equal(pt.known(), []string{"ap", "eu", "us"}) || !slices.Equal(pt.remoteRegions(), []string{"ap", "eu"}) {
		t.Fatalf("regions %v %v", pt.known(), pt.remoteRegions())
	}
	// The up node wins over a failed one with a lower name.
	eu, ch := pt.nodeFor("eu")
	if eu != "eu-2" {
		t.Fatalf("eu receiver %q", eu)
	}
	if ap, _ := pt.nodeFor("ap"); ap != "" {
		t.Fatalf("ap has no mesh address, got %q", ap)
	}
	// eu-1 comes back: the lower name wins, and the streams to eu are told.
	if a, _, _ := pt.apply(regions.Event{Kind: regions.EventAlive, Node: node("eu-1", "eu", regions.StateAlive, "10.0.0.1:7947")}); a == nil || a.Name != "eu-1" {
		t.Fatalf("apply alive: %+v", a)
	}
	select {
	case <-ch:
	default:
		t.Fatal("the change of eu's receiver was not signalled")
	}
	if eu, _ := pt.nodeFor("eu"); eu != "eu-1" {
		t.Fatalf("eu receiver %q", eu)
	}
	// An update that does not change the choice does not signal.
	_, ch = pt.nodeFor("eu")
	pt.apply(regions.Event{Kind: regions.EventUpdate, Node: node("eu-2", "eu", regions.StateAlive, "10.0.0.9:7947")})
	select {
	case <-ch:
		t.Fatal("signalled without a change")
	default:
	}
	// Reaping the last ap node forgets the region.
	_, r, changed := pt.apply(regions.Event{Kind: regions.EventReap, Node: node("ap-1", "ap", regions.StateLeft, "")})
	if r != "ap-1" || !changed || slices.Contains(pt.known(), "ap") {
		t.Fatalf("reap: %q %v %v", r, changed, pt.known())
	}
}

func TestEngineConfigValidate(t *testing.T) {
	c := DefaultEngineConfig()
	if err := c.Validate(); err == nil {
		t.Fatal("a config without node and region passed")
	}
	c.NodeName, c.Region = "n", "r"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.StallAfter, c.ReadBytes, c.RetryInitial = 0, 1, time.Hour
	err := c.Validate()
	for _, w := range []string{"StallAfter", "ReadBytes", "RetryInitial"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v does not name %s", err, w)
		}
	}
}
