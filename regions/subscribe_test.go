package regions

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// collector reads a subscription until it closes.
type collector struct {
	mu     sync.Mutex
	events []Event
	closed bool
}

func collect(ch <-chan Event, delay time.Duration) *collector {
	c := &collector{}
	go func() {
		for ev := range ch {
			c.mu.Lock()
			c.events = append(c.events, ev)
			c.mu.Unlock()
			if delay > 0 {
				time.Sleep(delay) // a deliberately slow consumer
			}
		}
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
	}()
	return c
}

func (c *collector) snapshot() ([]Event, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.events), c.closed
}

// replay applies events to a directory the way a subscriber would.
func replay(dir Directory, events []Event) map[string]Node {
	nodes := make(map[string]Node)
	for _, n := range dir.Nodes {
		nodes[n.Name] = n
	}
	for _, ev := range events {
		if ev.Kind == EventReap {
			delete(nodes, ev.Node.Name)
			continue
		}
		nodes[ev.Node.Name] = ev.Node
	}
	return nodes
}

// checkChain verifies that every event continues from the state the
// previous event for the same node left, and changes something: a
// duplicate or a missed transition breaks the chain.
func checkChain(t *testing.T, start Directory, events []Event) {
	t.Helper()
	last := make(map[string]Node)
	for _, n := range start.Nodes {
		last[n.Name] = n
	}
	for _, ev := range events {
		prev, known := last[ev.Node.Name]
		var prevState State
		if known {
			prevState = prev.State
		}
		if ev.Prev != prevState {
			t.Errorf("seq %d %s %s: prev %s, but the last event left it %s", ev.Seq, ev.Kind, ev.Node.Name, ev.Prev, prevState)
		}
		ok := false
		switch ev.Kind {
		case EventJoin:
			ok = ev.Node.State == StateAlive && (!known || prevState == StateFailed || prevState == StateLeft)
		case EventSuspect:
			ok = ev.Node.State == StateSuspect && prevState == StateAlive
		case EventAlive:
			ok = ev.Node.State == StateAlive && prevState == StateSuspect
		case EventFailed:
			ok = ev.Node.State == StateFailed && prevState != StateFailed
		case EventLeave:
			ok = ev.Node.State == StateLeft && prevState != StateLeft
		case EventUpdate:
			ok = known && ev.Node.State == prevState && (ev.Node.Tags != prev.Tags || ev.Node.Addr != prev.Addr)
		case EventReap:
			ok = known && !prevState.Up()
		}
		if !ok {
			t.Errorf("seq %d: %s of %s (%s -> %s) is not a change", ev.Seq, ev.Kind, ev.Node.Name, prevState, ev.Node.State)
		}
		if ev.Kind == EventReap {
			delete(last, ev.Node.Name)
		} else {
			last[ev.Node.Name] = ev.Node
		}
	}
}

// kindsOf lists the event kinds for one node, leaving out suspicions and
// their ends: a loaded machine may miss a probe at any time, and
// checkChain already holds those events to the rules.
func kindsOf(events []Event, name string) string {
	var ks []string
	for _, ev := range events {
		if ev.Node.Name == name && ev.Kind != EventSuspect && ev.Kind != EventAlive {
			ks = append(ks, ev.Kind.String())
		}
	}
	return strings.Join(ks, " ")
}

func TestSubscriberSeesEachChangeOnce(t *testing.T) {
	acfg := testConfig(t, "a", "eu")
	acfg.Timings.ReconnectTimeout = 1500 * time.Millisecond
	acfg.Timings.TombstoneTimeout = 1500 * time.Millisecond
	a := start(t, acfg)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir0, ch := a.m.SubscribeWithDirectory(ctx)
	fast := collect(ch, 0)
	slowDir, slowCh := a.m.SubscribeWithDirectory(ctx)
	slow := collect(slowCh, 5*time.Millisecond)

	bcfg := testConfig(t, "b", "us")
	bcfg.Seeds = []string{a.addr()}
	b := start(t, bcfg)
	ccfg := testConfig(t, "c", "ap")
	ccfg.Seeds = []string{a.addr()}
	c := start(t, ccfg)
	allSee(t, 10*time.Second, []*tnode{a}, []string{"a", "b", "c"}, StateAlive)

	// A subscriber that starts in the middle gets exactly what follows.
	midDir, midCh := a.m.SubscribeWithDirectory(ctx)
	mid := collect(midCh, 0)

	newAdv := bcfg.Advertise
	newAdv.Version = "v2"
	newAdv.QUIC = "127.0.0.1:7947"
	if err := b.m.UpdateAdvertise(ctxTimeout(t, 5*time.Second), newAdv); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a sees b's new tags", func() error {
		if n, _ := a.m.Directory().Node("b"); n.Version != "v2" || n.QUIC != "127.0.0.1:7947" {
			return fmt.Errorf("b is %+v", n)
		}
		return nil
	})
	c.kill()
	allSee(t, 10*time.Second, []*tnode{a}, []string{"c"}, StateFailed)
	if err := b.m.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a sees b gone", func() error {
		if n, ok := a.m.Directory().Node("b"); ok && n.State.Up() {
			return fmt.Errorf("b is %s", n.State)
		}
		return nil
	})
	waitFor(t, 10*time.Second, "b and c reaped", func() error {
		if n := len(a.m.Directory().Nodes); n != 1 {
			return fmt.Errorf("a still knows %d nodes", n)
		}
		return nil
	})

	final := a.m.Directory()
	for _, s := range []struct {
		name  string
		c     *collector
		start Directory
	}{{"fast", fast, dir0}, {"slow", slow, slowDir}, {"mid", mid, midDir}} {
		var events []Event
		waitFor(t, 10*time.Second, s.name+" subscriber caught up", func() error {
			events, _ = s.c.snapshot()
			if len(events) == 0 || events[len(events)-1].Seq != final.Seq {
				return fmt.Errorf("%d events", len(events))
			}
			return nil
		})
		for i, ev := range events {
			if want := s.start.Seq + uint64(i) + 1; ev.Seq != want {
				t.Fatalf("%s: event %d has seq %d, want %d (missed or repeated)", s.name, i, ev.Seq, want)
			}
		}
		checkChain(t, s.start, events)
		got := replay(s.start, events)
		want := replay(final, nil)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: replaying events gives %+v, directory is %+v", s.name, got, want)
		}
		if s.name == "mid" {
			if k := kindsOf(events, "b"); !strings.HasPrefix(k, "update ") || !strings.HasSuffix(k, " reap") {
				t.Errorf("mid: b events %q", k)
			}
			continue
		}
		// b leaves gracefully; on a starved machine its leave message can
		// be lost, and then a sees it fail (and perhaps the leave late).
		switch k := kindsOf(events, "b"); k {
		case "join update leave reap":
		case "join update failed reap", "join update failed leave reap":
			t.Logf("%s: b's leave was seen as a failure: %q", s.name, k)
		default:
			t.Errorf("%s: b events %q", s.name, k)
		}
		if k := kindsOf(events, "c"); k != "join failed reap" {
			t.Errorf("%s: c events %q", s.name, k)
		}
	}
	// Compare what both subscriptions cover.
	from := max(dir0.Seq, slowDir.Seq)
	after := func(evs []Event) []Event {
		return slices.DeleteFunc(evs, func(ev Event) bool { return ev.Seq <= from })
	}
	fastEvents, _ := fast.snapshot()
	slowEvents, _ := slow.snapshot()
	fastEvents, slowEvents = after(fastEvents), after(slowEvents)
	if len(fastEvents) != len(slowEvents) {
		t.Errorf("fast subscriber saw %d events, slow %d", len(fastEvents), len(slowEvents))
	}
	for i := range min(len(fastEvents), len(slowEvents)) {
		if f, s := fastEvents[i], slowEvents[i]; !reflect.DeepEqual(f, s) {
			t.Errorf("event %d: fast %+v, slow %+v", i, f, s)
		}
	}

	cancel()
	waitFor(t, 5*time.Second, "subscriptions close with their context", func() error {
		for _, c := range []*collector{fast, slow, mid} {
			if _, closed := c.snapshot(); !closed {
				return fmt.Errorf("still open")
			}
		}
		return nil
	})
}

func TestStalledSubscriberCannotBlockSerf(t *testing.T) {
	acfg := testConfig(t, "a", "eu")
	acfg.SubscriberBuffer = 4
	a := start(t, acfg)
	ctx := ctxTimeout(t, 30*time.Second)
	stalledDir, stalled := a.m.SubscribeWithDirectory(ctx) // never read until the end
	live := collect(a.m.Subscribe(ctx), 0)

	bcfg := testConfig(t, "b", "us")
	bcfg.Seeds = []string{a.addr()}
	b := start(t, bcfg)
	allSee(t, 10*time.Second, []*tnode{a}, []string{"b"}, StateAlive)
	const updates = 7 // more than SubscriberBuffer+1 events while stalled
	for i := range updates {
		adv := bcfg.Advertise
		adv.Version = fmt.Sprintf("v%d", i)
		if err := b.m.UpdateAdvertise(ctxTimeout(t, 5*time.Second), adv); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "a sees "+adv.Version, func() error {
			if n, _ := a.m.Directory().Node("b"); n.Version != adv.Version {
				return fmt.Errorf("b at %q", n.Version)
			}
			return nil
		})
	}
	events, _ := live.snapshot()
	if k := kindsOf(events, "b"); k != "join"+strings.Repeat(" update", updates) {
		t.Errorf("live subscriber: b events %q", k)
	}

	// The stalled one holds the first event, then learns it overflowed.
	var got []Event
	for ev := range stalled {
		got = append(got, ev)
	}
	if len(got) < 2 || got[len(got)-1].Kind != EventOverflow || got[0].Seq != stalledDir.Seq+1 {
		t.Fatalf("stalled subscriber got %v", got)
	}
	for _, ev := range got[:len(got)-1] {
		if ev.Kind == EventOverflow {
			t.Fatalf("overflow before the end: %v", got)
		}
	}
}

func TestSubscribeAfterClose(t *testing.T) {
	a := start(t, testConfig(t, "a", "eu"))
	a.m.Close()
	dir, ch := a.m.SubscribeWithDirectory(context.Background())
	if _, open := <-ch; open {
		t.Fatal("subscription after Close is open")
	}
	if dir.LocalNode != "a" {
		t.Fatalf("directory %+v", dir)
	}
}
