package replicator

import (
	"slices"
	"testing"

	"github.com/ternmq/tern/protocols"
)

func mustTopic(t *testing.T, s string) protocols.TopicName {
	t.Helper()
	n, err := protocols.ParseTopicName(s, "")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestRouteFor(t *testing.T) {
	mesh := &Policy{Regions: []string{"ap", "eu", "us"}}
	hub := &Policy{Regions: []string{"cloud", "edge", "hub"}, Topology: TopologyHub, Hub: "hub"}
	for _, tc := range []struct {
		p          *Policy
		local      string
		dests      []string
		originOnly bool
	}{
		{mesh, "us", []string{"ap", "eu"}, true},
		{mesh, "mars", nil, false},
		{nil, "us", nil, false},
		{hub, "hub", []string{"cloud", "edge"}, false},
		{hub, "edge", []string{"hub"}, true},
		{&Policy{Regions: []string{"us"}}, "us", []string{}, true},
	} {
		r := routeFor(tc.p, tc.local)
		sameDests := slices.Equal(r.dests, tc.dests) || (len(r.dests) == 0 && len(tc.dests) == 0)
		if !sameDests || (len(tc.dests) > 0 && r.originOnly != tc.originOnly) {
			t.Errorf("routeFor(%v, %s) = %+v, want %v originOnly=%v", tc.p, tc.local, r, tc.dests, tc.originOnly)
		}
	}
}

func TestAdmit(t *testing.T) {
	restricted := protocols.Envelope{}
	if err := protocols.SetReplicateTo(&restricted, []string{"eu"}); err != nil {
		t.Fatal(err)
	}
	local := protocols.Envelope{}
	if err := protocols.SetReplicateTo(&local, []string{protocols.ReplicateLocalOnly}); err != nil {
		t.Fatal(err)
	}
	fromEU := protocols.Envelope{OriginRegion: "eu", Visited: []string{"eu"}}
	viaHub := protocols.Envelope{OriginRegion: "edge", Visited: []string{"edge", "hub"}}
	for _, tc := range []struct {
		name       string
		env        protocols.Envelope
		local      string
		dest       string
		originOnly bool
		want       bool
	}{
		{"local entry in a mesh", protocols.Envelope{}, "us", "eu", true, true},
		{"replicated entry is not forwarded in a mesh", fromEU, "us", "ap", true, false},
		{"never back to the origin", fromEU, "hub", "eu", false, false},
		{"a hub forwards", fromEU, "hub", "ap", false, true},
		{"never to a visited region", viaHub, "cloud", "hub", false, false},
		{"replicate_to allows", restricted, "us", "eu", true, true},
		{"replicate_to forbids", restricted, "us", "ap", true, false},
		{"replication disabled", local, "us", "eu", true, false},
	} {
		got, err := admit(&tc.env, tc.local, tc.dest, tc.originOnly)
		if err != nil || got != tc.want {
			t.Errorf("%s: %v %v, want %v", tc.name, got, err, tc.want)
		}
	}
	bad := protocols.Envelope{Attrs: []protocols.Attr{{Key: protocols.AttrReplicateTo, Value: []byte{3, 1}}}}
	if _, err := admit(&bad, "us", "eu", true); err == nil {
		t.Error("a corrupt replicate_to passed")
	}
}

// The loop rule holds for any chain of senders: following stampForSend and admit, an entry
// never reaches a region twice.
func TestStampAndAdmitPreventLoops(t *testing.T) {
	regions := []string{"a", "b", "c", "d"}
	env := protocols.Envelope{AppendTime: 77}
	stampForSend(&env, "a", 10, 3)
	if env.OriginRegion != "a" || env.OriginOffset != 10 || !slices.Equal(env.Visited, []string{"a"}) {
		t.Fatalf("stamped %+v", env)
	}
	if ep, _ := protocols.OriginEpoch(&env); ep != 3 {
		t.Fatalf("epoch %d", ep)
	}
	if ot, ok, _ := protocols.OriginTime(&env); !ok || ot != 77 {
		t.Fatalf("origin time %d %v", ot, ok)
	}
	// Flood it through every region as hubs would (no origin-only rule).
	reached := map[string]int{"a": 1}
	var walk func(e protocols.Envelope, at string)
	walk = func(e protocols.Envelope, at string) {
		for _, d := range regions {
			if d == at {
				continue
			}
			ok, err := admit(&e, at, d, false)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				continue
			}
			next := e
			next.Visited = slices.Clone(e.Visited)
			next.Attrs = slices.Clone(e.Attrs)
			stampForSend(&next, d, 999, 0)
			if next.OriginOffset != 10 {
				t.Fatalf("a forwarder changed the origin offset: %+v", next)
			}
			reached[d]++
			walk(next, d)
		}
	}
	walk(env, "a")
	for _, r := range regions {
		if reached[r] < 1 {
			t.Errorf("flooding never reached %s", r)
		}
	}
	// Multiple paths are expected when flooding (layer 3 drops the copies), but no path may
	// revisit a region: the recursion above would not terminate otherwise.
}

func TestStreamExtraRoundTrip(t *testing.T) {
	for _, x := range []streamExtra{{}, {originOnly: true, epoch: 1<<62 + 5}, {epoch: -1}} {
		got, err := decodeStreamExtra(x.encode())
		if err != nil || got != x {
			t.Errorf("%+v: %+v %v", x, got, err)
		}
	}
}

func FuzzDecodeStreamExtra(f *testing.F) {
	f.Add(streamExtra{originOnly: true, epoch: 9}.encode())
	f.Add([]byte{})
	f.Add([]byte{1, 0xff, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{2, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		x, err := decodeStreamExtra(b)
		if err != nil {
			return
		}
		if string(x.encode()) != string(b) {
			t.Fatalf("%x does not round-trip", b)
		}
	})
}

func TestForeignRanges(t *testing.T) {
	f := newForeignRanges()
	f.add(1, 10, 20)
	f.add(1, 20, 25) // touching: merged
	f.add(1, 40, 50)
	f.add(1, 30, 35) // out of order
	f.add(1, 34, 41) // overlapping two: merged into one
	f.add(2, 0, 5)
	for _, tc := range []struct {
		at   int64
		to   int64
		skip bool
	}{{9, 0, false}, {10, 25, true}, {24, 25, true}, {25, 0, false}, {29, 0, false}, {30, 50, true}, {49, 50, true}, {50, 0, false}} {
		to, ok := f.skip(1, tc.at)
		if ok != tc.skip || (ok && to != tc.to) {
			t.Errorf("skip(%d) = %d %v, want %d %v", tc.at, to, ok, tc.to, tc.skip)
		}
	}
	if to, ok := f.skip(2, 3); !ok || to != 5 {
		t.Errorf("partition 2: %d %v", to, ok)
	}
	f.forget(2)
	if _, ok := f.skip(2, 3); ok {
		t.Error("forgotten partition still skips")
	}
	for i := range int64(3 * maxForeignRanges) {
		f.add(3, 2*i, 2*i+1)
	}
	if n := len(f.m[3]); n != maxForeignRanges {
		t.Errorf("%d ranges kept, want %d", n, maxForeignRanges)
	}
	if _, ok := f.skip(3, 0); ok {
		t.Error("the oldest range should have been dropped")
	}
	if to, ok := f.skip(3, 2*(3*maxForeignRanges-1)); !ok || to != 2*(3*maxForeignRanges-1)+1 {
		t.Errorf("newest range: %d %v", to, ok)
	}
}
