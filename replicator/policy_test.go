package replicator

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestHLCIncreasesAndFollowsObservedClocks(t *testing.T) {
	now := time.UnixMilli(1000)
	c := &hlcClock{now: func() time.Time { return now }}
	a := c.Now()
	b := c.Now()
	if a != (HLC{Wall: 1000}) || b != (HLC{Wall: 1000, Logical: 1}) {
		t.Fatalf("readings in one millisecond: %v %v", a, b)
	}
	// A remote clock ahead of ours: our next reading must order after it.
	c.Observe(HLC{Wall: 5000, Logical: 7})
	if r := c.Now(); r.Compare(HLC{Wall: 5000, Logical: 7}) <= 0 {
		t.Fatalf("reading %v not after the observed clock", r)
	}
	// Our wall clock going backwards does not go back.
	now = time.UnixMilli(10)
	if r := c.Now(); r.Wall != 5000 {
		t.Fatalf("reading %v went back with the wall clock", r)
	}
	now = time.UnixMilli(9000)
	if r := c.Now(); r != (HLC{Wall: 9000}) {
		t.Fatalf("reading %v", r)
	}
}

func TestPolicySpecValidation(t *testing.T) {
	known := []string{"ap", "eu", "us"}
	for _, tc := range []struct {
		name string
		spec PolicySpec
		want []string // substrings of the error; none: valid
	}{
		{"valid", PolicySpec{Regions: []string{"us", "eu"}}, nil},
		{"valid hub", PolicySpec{Regions: []string{"us", "eu", "ap"}, Topology: TopologyHub, Hub: "us", Start: map[string]Start{"ap": StartLatest}}, nil},
		{"empty", PolicySpec{}, []string{"regions is empty"}},
		{"unknown and duplicate", PolicySpec{Regions: []string{"us", "mars", "us", "venus"}}, []string{"listed twice", "unknown regions mars, venus", "the mesh knows ap, eu, us"}},
		{"hub missing", PolicySpec{Regions: []string{"us", "eu"}, Topology: TopologyHub}, []string{"topology hub needs hub"}},
		{"hub with mesh", PolicySpec{Regions: []string{"us", "eu"}, Hub: "us"}, []string{"topology is mesh"}},
		{"bad topology", PolicySpec{Regions: []string{"us"}, Topology: "ring"}, []string{`topology "ring"`}},
		{"bad start", PolicySpec{Regions: []string{"us", "eu"}, Start: map[string]Start{"eu": "yesterday", "ap": StartLatest}},
			[]string{`start for "eu" is "yesterday"`, `start names region "ap"`}},
	} {
		s := tc.spec
		err := s.normalize(known)
		if len(tc.want) == 0 {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			} else if !slices.IsSorted(s.Regions) {
				t.Errorf("%s: regions not sorted: %v", tc.name, s.Regions)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidPolicy) {
			t.Errorf("%s: %v, want ErrInvalidPolicy", tc.name, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", tc.name, err, w)
			}
		}
	}
	var ur *UnknownRegionsError
	s := PolicySpec{Regions: []string{"mars"}}
	if err := s.normalize(known); !errors.As(err, &ur) || !slices.Equal(ur.Known, known) {
		t.Fatalf("unknown region error %v", err)
	}
}

func TestPolicyKeyValidate(t *testing.T) {
	good := []PolicyKey{{KindNamespace, "public/default"}, {KindTopic, "persistent://public/default/orders"}}
	for _, k := range good {
		if err := k.Validate(); err != nil {
			t.Errorf("%v: %v", k, err)
		}
	}
	bad := []PolicyKey{{KindNamespace, "public"}, {KindTopic, "orders"}, {KindTopic, "persistent://public/default/orders-partition-1"}, {"tenant", "x"}}
	for _, k := range bad {
		if err := k.Validate(); err == nil {
			t.Errorf("%v passed", k)
		}
	}
}

// Folding the same records in any order gives the same latest versions on every node.
func TestPolicyFoldConverges(t *testing.T) {
	var recs []*Policy
	for i := range 40 {
		p := &Policy{
			PolicyKey: PolicyKey{Kind: KindNamespace, Name: []string{"a/x", "a/y", "b/z"}[i%3]},
			Regions:   []string{[]string{"us", "eu", "ap"}[i%3]},
			Version:   int64(i/3 + 1),
			Stamp:     HLC{Wall: int64(1000 + i%7), Logical: uint32(i % 2)},
			Writer:    []string{"us", "eu", "ap"}[(i/2)%3],
			Deleted:   i%11 == 0,
		}
		recs = append(recs, p)
	}
	fold := func(order []*Policy) []Policy {
		ps := newPolicyStore("us", &hlcClock{now: time.Now})
		for _, p := range order {
			ps.fold(p)
		}
		return ps.list(true)
	}
	want := fold(recs)
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		order := slices.Clone(recs)
		rnd.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		got := fold(order)
		for i := range want {
			if got[i].Stamp != want[i].Stamp || got[i].Writer != want[i].Writer || got[i].Version != want[i].Version {
				t.Fatalf("fold order changed the outcome of %v: %+v vs %+v", want[i].PolicyKey, got[i], want[i])
			}
		}
	}
	// A tie on the clock is broken by the writing region.
	a := &Policy{Stamp: HLC{Wall: 5}, Writer: "eu"}
	b := &Policy{Stamp: HLC{Wall: 5}, Writer: "us"}
	if !b.newer(a) || a.newer(b) || a.newer(a) {
		t.Fatal("tie-break by writer")
	}
}

func TestEffectivePolicy(t *testing.T) {
	ps := newPolicyStore("us", &hlcClock{now: time.Now})
	ns := &Policy{PolicyKey: PolicyKey{KindNamespace, "t/ns"}, Regions: []string{"us", "eu"}, Version: 1, Writer: "us", Stamp: HLC{Wall: 1}}
	tp := &Policy{PolicyKey: PolicyKey{KindTopic, "persistent://t/ns/a"}, Regions: []string{"us"}, Version: 1, Writer: "us", Stamp: HLC{Wall: 1}}
	ps.fold(ns)
	ps.fold(tp)
	a, b := mustTopic(t, "persistent://t/ns/a"), mustTopic(t, "persistent://t/ns/b")
	if p := ps.effective(a); p != tp {
		t.Fatalf("topic a: %+v", p)
	}
	if p := ps.effective(b); p != ns {
		t.Fatalf("topic b: %+v", p)
	}
	del := *tp
	del.Deleted, del.Version, del.Stamp = true, 2, HLC{Wall: 2}
	ps.fold(&del)
	if p := ps.effective(a); p != ns {
		t.Fatalf("topic a after its policy was deleted: %+v", p)
	}
	if p := ps.effective(mustTopic(t, "persistent://t/other/c")); p != nil {
		t.Fatalf("no policy: %+v", p)
	}
}

func FuzzDecodePolicy(f *testing.F) {
	good, _ := encodePolicy(&Policy{PolicyKey: PolicyKey{KindTopic, "persistent://a/b/c"}, Regions: []string{"us"}, Version: 3, Writer: "us", Stamp: HLC{Wall: 9}})
	f.Add(good)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"kind":"namespace","name":"a/b","version":1,"writer":"us","regions":null}`))
	f.Add([]byte(`{"kind":"topic","name":"x","version":-1}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decodePolicy(b)
		if err != nil {
			return
		}
		if p.Version < 1 || p.Writer == "" || p.PolicyKey.Validate() != nil {
			t.Fatalf("decoded an invalid record %+v", p)
		}
		// Whatever decodes can be routed without panicking.
		_ = routeFor(p, "us")
	})
}
