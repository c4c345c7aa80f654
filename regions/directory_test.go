package regions

import (
	"strings"
	"testing"
	"time"
)

// step is one input to the directory state machine.
type step struct {
	op   string // join, update, fail, leave, reap, suspect, check
	name string
	ver  string // tag version, to tell updates apart
	at   time.Duration
	want string // kinds emitted, space separated
}

func runSteps(t *testing.T, d *dirState, steps []step, coords map[string]any) {
	t.Helper()
	t0 := time.Unix(1000, 0)
	for i, s := range steps {
		now := t0.Add(s.at)
		n := Node{Name: s.name, Addr: "127.0.0.1:1", Tags: Tags{Region: "eu", Advertise: Advertise{Version: s.ver}}}
		var out []Event
		switch s.op {
		case "join":
			out = d.join(n, now)
		case "update":
			out = d.update(n, now)
		case "fail":
			out = d.fail(n, now)
		case "leave":
			out = d.leave(n, now)
		case "reap":
			out = d.reap(s.name, now)
		case "suspect":
			out = d.suspect(s.name, now, now.Add(time.Second), coords[s.name])
		case "check":
			out = d.checkSuspects(now, func(name string) any { return coords[name] })
		}
		var kinds []string
		for _, ev := range out {
			kinds = append(kinds, ev.Kind.String())
			if ev.Time != now {
				t.Errorf("step %d: event time %v", i, ev.Time)
			}
		}
		if got := strings.Join(kinds, " "); got != s.want {
			t.Fatalf("step %d (%s %s): got %q, want %q", i, s.op, s.name, got, s.want)
		}
	}
}

func TestDirectoryTransitions(t *testing.T) {
	d := newDirState("a")
	runSteps(t, d, []step{
		{op: "join", name: "a", want: "join"},
		{op: "join", name: "a", want: ""}, // serf repeating itself
		{op: "join", name: "b", ver: "1", want: "join"},
		{op: "update", name: "b", ver: "1", want: ""}, // same tags
		{op: "update", name: "b", ver: "2", want: "update"},
		{op: "suspect", name: "a", want: ""}, // never suspect ourselves
		{op: "suspect", name: "zz", want: ""},
		{op: "suspect", name: "b", ver: "2", want: "suspect"},
		{op: "suspect", name: "b", ver: "2", want: ""},
		{op: "update", name: "b", ver: "3", want: "update"}, // still suspect
		{op: "fail", name: "b", ver: "3", want: "failed"},
		{op: "fail", name: "b", ver: "3", want: ""},
		{op: "suspect", name: "b", want: ""}, // only alive nodes become suspect
		{op: "reap", name: "a", want: ""},    // an up node is never reaped
		{op: "join", name: "b", ver: "3", want: "join"},
		{op: "leave", name: "b", ver: "3", want: "leave"},
		{op: "leave", name: "b", ver: "4", want: "update"},
		{op: "reap", name: "b", want: "reap"},
		{op: "reap", name: "b", want: ""},
		{op: "fail", name: "c", want: "failed"}, // unknown node learnt failed
		{op: "update", name: "d", want: "join"}, // missed join
	}, nil)
	dir := d.directory("eu")
	if dir.Seq != 12 || len(dir.Nodes) != 3 {
		t.Fatalf("directory %+v", dir)
	}
	if got := dir.Regions(); len(got) != 1 || got[0] != "eu" {
		t.Errorf("regions %v", got)
	}
}

func TestSuspicionEnds(t *testing.T) {
	d := newDirState("a")
	c1, c2 := new(int), new(int)
	coords := map[string]any{"b": c1, "c": c1}
	runSteps(t, d, []step{
		{op: "join", name: "b", want: "join"},
		{op: "join", name: "c", want: "join"},
		{op: "suspect", name: "b", want: "suspect"},
		{op: "suspect", name: "c", want: "suspect"},
		{op: "check", at: 500 * time.Millisecond, want: ""}, // no ack, deadline ahead
	}, coords)
	// A direct probe of b succeeded: new coordinate object.
	coords["b"] = c2
	runSteps(t, d, []step{
		{op: "check", at: 600 * time.Millisecond, want: "alive"},
		// c's suspicion outlived the longest memberlist allows without a
		// failure: it was refuted.
		{op: "check", at: time.Second, want: "alive"},
		{op: "check", at: 2 * time.Second, want: ""},
		{op: "suspect", name: "b", at: 3 * time.Second, want: "suspect"},
		{op: "join", name: "b", at: 3 * time.Second, want: "alive"}, // serf says alive again
	}, coords)
}

func TestReconcileRepairsLostEvents(t *testing.T) {
	d := newDirState("a")
	t0 := time.Unix(1000, 0)
	grace := time.Second
	info := func(name, ver string) memberInfo {
		return memberInfo{Name: name, Addr: "127.0.0.1:1", Tags: map[string]string{TagRegion: "eu", TagVersion: ver}}
	}
	a, _ := nodeFrom(info("a", ""))
	b, _ := nodeFrom(info("b", ""))
	d.join(a, t0)
	d.join(b, t0)
	members := []serfView{{info("a", ""), StateAlive}, {info("b", "2"), StateFailed}, {info("c", ""), StateAlive}}
	// First sight of a difference: could be an event in flight.
	if out, _ := d.reconcile(members, t0, grace); len(out) != 0 {
		t.Fatalf("repaired at once: %v", out)
	}
	// It went away before grace (the event arrived): nothing to repair.
	cNode, _ := nodeFrom(info("c", ""))
	d.join(cNode, t0.Add(100*time.Millisecond))
	if out, _ := d.reconcile(members, t0.Add(200*time.Millisecond), grace); len(out) != 0 {
		t.Fatalf("repaired early: %v", out)
	}
	out, repaired := d.reconcile(members, t0.Add(grace), grace)
	if len(out) != 1 || out[0].Kind != EventFailed || out[0].Node.Version != "2" || strings.Join(repaired, ",") != "b" {
		t.Fatalf("repair: %v %v", out, repaired)
	}
	// serf forgot c while it is up here: failed then reaped, after grace.
	members = members[:2]
	d.reconcile(members, t0.Add(2*grace), grace)
	out, _ = d.reconcile(members, t0.Add(3*grace), grace)
	if len(out) != 2 || out[0].Kind != EventFailed || out[1].Kind != EventReap || out[1].Node.Name != "c" {
		t.Fatalf("forgotten node: %v", out)
	}
	if out, _ := d.reconcile(members, t0.Add(4*grace), grace); len(out) != 0 {
		t.Fatalf("steady state repaired: %v", out)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []time.Duration
		want time.Duration
		ok   bool
	}{
		{nil, 0, false},
		{[]time.Duration{5}, 5, true},
		{[]time.Duration{9, 1, 5}, 5, true},
		{[]time.Duration{1, 100, 3, 5}, 4, true},
	} {
		got, ok := median(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("median(%v) = %v, %v", c.in, got, ok)
		}
	}
}

func TestStateAndKindNames(t *testing.T) {
	for s := State(0); s <= StateLeft; s++ {
		if strings.HasPrefix(s.String(), "state(") {
			t.Errorf("state %d unnamed", s)
		}
	}
	for k := EventJoin; k <= EventOverflow; k++ {
		if strings.HasPrefix(k.String(), "event(") {
			t.Errorf("kind %d unnamed", k)
		}
	}
	if State(9).String() != "state(9)" || EventKind(0).String() != "event(0)" {
		t.Error("unknown values")
	}
}
