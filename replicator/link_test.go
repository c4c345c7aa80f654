package replicator

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// stateRecorder polls a link's stats and records each change of state.
type stateRecorder struct {
	mu     sync.Mutex
	seen   []LinkStats
	stop   chan struct{}
	done   chan struct{}
	stopMu sync.Once
}

func recordStates(n *testNode, peer string) *stateRecorder {
	r := &stateRecorder{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			st, _ := n.LinkStats(peer)
			r.mu.Lock()
			if len(r.seen) == 0 || r.seen[len(r.seen)-1].State != st.State {
				r.seen = append(r.seen, st)
			}
			r.mu.Unlock()
			select {
			case <-r.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return r
}

// states stops the recorder and returns the changes, ending with the state at the call.
func (r *stateRecorder) states(n *testNode, peer string) []LinkStats {
	r.stopMu.Do(func() { close(r.stop) })
	<-r.done
	st, _ := n.LinkStats(peer)
	if len(r.seen) == 0 || r.seen[len(r.seen)-1].State != st.State {
		r.seen = append(r.seen, st)
	}
	return r.seen
}

func TestSeverAndHeal(t *testing.T) {
	cfgA, logsA := testConfig(t, "a1", "us")
	cfgB, logsB := testConfig(t, "b1", "eu")
	sink := newSink()
	a := startNode(t, cfgA, logsA, nil)
	b := startNode(t, cfgB, logsB, sink)
	if err := a.AddPeer(b.peer()); err != nil {
		t.Fatal(err)
	}
	if err := b.AddPeer(a.peer()); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 60*time.Second)
	s, err := a.OpenPartitionStream(ctx, "b1", openReq("t", 0))
	if err != nil {
		t.Fatal(err)
	}
	first := entriesOf(0, 10, 100)
	if _, err := s.Send(ctx, first); err != nil {
		t.Fatal(err)
	}
	if ack, err := s.NextAck(ctx); err != nil || ack > first[9].End() {
		t.Fatalf("NextAck = %d, %v", ack, err)
	}
	rec := recordStates(a, "b1")

	// Cut the link at a only: a's socket drops packets both to and from b.
	a.pc.Sever(b.addrPort())
	waitFor(t, 10*time.Second, "a sees the link down", func() bool {
		st := linkState(a, "b1")
		return st.State != LinkUp && st.LastError != ""
	})
	waitFor(t, 10*time.Second, "b sees the link down", func() bool { return linkState(b, "a1").State != LinkUp })
	if _, err := s.NextAck(ctx); err == nil {
		t.Fatal("stream outlived its connection")
	} else {
		t.Logf("stream error: %v", err)
	}
	if _, err := s.Send(ctx, entriesOf(100, 1, 10)); err == nil {
		t.Fatal("Send succeeded on a lost stream")
	}
	s.Close()
	// While severed, redials fail and the link stays down.
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = a.OpenPartitionStream(short, "b1", openReq("t", 1))
	cancel()
	if err == nil {
		t.Fatal("opened a stream across a severed link")
	}
	if st := linkState(a, "b1"); st.Connects != 1 {
		t.Fatalf("link came up while severed: %+v", st)
	}

	a.pc.HealAll()
	waitUp(t, a, "b1")
	waitUp(t, b, "a1")
	states := rec.states(a, "b1")
	var seq []string
	sawDownWithErr := false
	for _, st := range states {
		seq = append(seq, st.State.String())
		if st.State == LinkDown && st.LastError != "" {
			sawDownWithErr = true
		}
	}
	t.Logf("a's link states: %s", strings.Join(seq, " -> "))
	if seq[0] != "up" || seq[len(seq)-1] != "up" || !sawDownWithErr {
		t.Fatalf("states %v: want up, then down with an error, then up", seq)
	}
	st := linkState(a, "b1")
	if !strings.Contains(st.LastError, "heartbeat") && !strings.Contains(st.LastError, "timeout") {
		t.Fatalf("last error %q does not say the link timed out", st.LastError)
	}
	if st.Connects < 2 {
		t.Fatalf("connects %d after a heal", st.Connects)
	}

	// Streams reopen and replicate again.
	s2, err := a.OpenPartitionStream(ctx, "b1", openReq("t", 0))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	second := entriesOf(1000, 10, 100)
	if _, err := s2.Send(ctx, second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "entries after the heal", func() bool { return len(sink.entries("t/0")) == 20 })
	sameEntries(t, sink.entries("t/0"), append(first, second...))
}

// Both nodes dial each other at once, repeatedly: they settle on one connection, agree on which,
// and stay on it.
func TestBothSidesDialSettleOnOneConnection(t *testing.T) {
	for i := range 5 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			cfgA, logsA := testConfig(t, "a1", "us")
			cfgB, logsB := testConfig(t, "b1", "eu")
			sinkA, sinkB := newSink(), newSink()
			a := startNode(t, cfgA, logsA, sinkA)
			b := startNode(t, cfgB, logsB, sinkB)
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); _ = a.AddPeer(b.peer()) }()
			go func() { defer wg.Done(); _ = b.AddPeer(a.peer()) }()
			wg.Wait()
			ctx := testCtx(t, 20*time.Second)
			// Streams opened as soon as each side reports up must not land on a connection
			// that loses the race.
			sendSome(t, ctx, a, "b1", "eu", sinkB, 0)
			sendSome(t, ctx, b, "a1", "us", sinkA, 0)
			// Let any concurrent dial finish and be settled, then check both sides agree.
			waitFor(t, 10*time.Second, "both sides agree on one connection", func() bool {
				sa, sb := linkState(a, "b1"), linkState(b, "a1")
				return sa.State == LinkUp && sb.State == LinkUp && sa.DialedByLocal != sb.DialedByLocal
			})
			sa := linkState(a, "b1")
			if sa.Connects > 1 && !sa.DialedByLocal {
				t.Fatalf("a replaced a connection but did not keep its own dial (the lower name's): %+v", sa)
			}
			before, beforeB := sa.Connects, linkState(b, "a1").Connects
			// Stable: many heartbeat intervals pass without another switch, and both directions work.
			for j := range 10 {
				if _, err := a.Ping(ctx, "b1"); err != nil {
					t.Fatal(err)
				}
				if _, err := b.Ping(ctx, "a1"); err != nil {
					t.Fatal(err)
				}
				_ = j
			}
			sendSome(t, ctx, a, "b1", "eu", sinkB, 1)
			sendSome(t, ctx, b, "a1", "us", sinkA, 1)
			if linkState(a, "b1").Connects != before || linkState(b, "a1").Connects != beforeB {
				t.Fatalf("link switched connections after settling: %+v / %+v", linkState(a, "b1"), linkState(b, "a1"))
			}
		})
	}
}

func sendSome(t *testing.T, ctx context.Context, from *testNode, to, region string, sink *sinkHandler, part int32) {
	t.Helper()
	req := openReq("race", part)
	req.DestRegion = region
	s, err := from.OpenPartitionStream(ctx, to, req)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := entriesOf(0, 5, 10)
	if _, err := s.Send(ctx, want); err != nil {
		t.Fatal(err)
	}
	if ack, err := s.NextAck(ctx); err != nil {
		t.Fatalf("stream from %s failed: %v", from.cfg.NodeName, err)
	} else if ack != want[4].End() {
		if ack, err = s.NextAck(ctx); err != nil || ack != want[4].End() {
			t.Fatalf("NextAck = %d, %v", ack, err)
		}
	}
	k := fmt.Sprintf("race/%d", part)
	waitFor(t, 5*time.Second, "entries arrive", func() bool { return len(sink.entries(k)) == 5 })
}

func TestRemovePeerClosesLink(t *testing.T) {
	cfgA, logsA := testConfig(t, "a1", "us")
	cfgB, logsB := testConfig(t, "b1", "eu")
	a := startNode(t, cfgA, logsA, nil)
	b := startNode(t, cfgB, logsB, newSink())
	if err := a.AddPeer(b.peer()); err != nil {
		t.Fatal(err)
	}
	waitUp(t, a, "b1")
	waitFor(t, 5*time.Second, "b sees a", func() bool { return linkState(b, "a1").State == LinkUp })
	a.RemovePeer("b1")
	if _, ok := a.LinkStats("b1"); ok {
		t.Fatal("link still listed after RemovePeer")
	}
	waitFor(t, 5*time.Second, "b sees a leave", func() bool { return linkState(b, "a1").State == LinkDown })
	if st := linkState(b, "a1"); !strings.Contains(st.LastError, "shutting down") {
		t.Fatalf("b's last error %q", st.LastError)
	}
	// b has no address for a (passive link): it waits rather than dialing.
	if st := linkState(b, "a1"); st.Addr != "" {
		t.Fatalf("passive link has an address: %+v", st)
	}
	if err := a.AddPeer(Peer{Name: "a1", Addr: "127.0.0.1:1"}); err == nil {
		t.Fatal("AddPeer accepted this node's own name")
	}
	if err := a.AddPeer(Peer{Name: "x", Addr: "no-port"}); err == nil {
		t.Fatal("AddPeer accepted an address without a port")
	}
}

// A peer whose address answers with another node's name is reported, not adopted.
func TestDialWrongNodeReported(t *testing.T) {
	cfgA, logsA := testConfig(t, "a1", "us")
	cfgB, logsB := testConfig(t, "b1", "eu")
	a := startNode(t, cfgA, logsA, nil)
	b := startNode(t, cfgB, logsB, nil)
	if err := a.AddPeer(Peer{Name: "c1", Region: "ap", Addr: b.Addr().String()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a reports the mismatch", func() bool {
		return strings.Contains(linkState(a, "c1").LastError, "different node")
	})
	t.Logf("a: %s", linkState(a, "c1").LastError)
}

// A peer's address change (membership update) redials at once; a restarted peer is seen as a
// new incarnation on the same link.
func TestAddressUpdateAndPeerRestart(t *testing.T) {
	cfgA, logsA := testConfig(t, "a1", "us")
	cfgB, logsB := testConfig(t, "b1", "eu")
	a := startNode(t, cfgA, logsA, nil)
	b := startNode(t, cfgB, logsB, newSink())
	// A stale address first: nothing answers there.
	dead, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.LocalAddr().String()
	dead.Close()
	if err := a.AddPeer(Peer{Name: "b1", Region: "eu", Addr: deadAddr}); err != nil {
		t.Fatal(err)
	}
	if st := linkState(a, "b1"); st.State == LinkUp {
		t.Fatal("up against a dead address")
	}
	if err := a.AddPeer(b.peer()); err != nil {
		t.Fatal(err)
	}
	waitUp(t, a, "b1")
	first := linkState(a, "b1")
	if first.Addr != b.Addr().String() {
		t.Fatalf("link address %q, want %q", first.Addr, b.Addr())
	}

	// Restart b on the same address.
	addr := b.Addr().String()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "a sees b go", func() bool { return linkState(a, "b1").State != LinkUp })
	if st := linkState(a, "b1"); !strings.Contains(st.LastError, "shutting down") {
		t.Fatalf("last error %q does not say the peer shut down", st.LastError)
	}
	cfgB2, logsB2 := testConfig(t, "b1", "eu")
	cfgB2.ListenAddr = addr
	startNode(t, cfgB2, logsB2, newSink())
	waitUp(t, a, "b1")
	second := linkState(a, "b1")
	if second.PeerIncarnation == first.PeerIncarnation || second.Connects != first.Connects+1 {
		t.Fatalf("restart not visible: before %+v, after %+v", first, second)
	}
}
