package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ternmq/tern/internal/testcluster"
	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/replicator"
)

// twoRegions starts us and eu with the namespace policy [us, eu] and a topic of two partitions
// created in us.
func twoRegions(t *testing.T, topic string) (*testcluster.Cluster, protocols.TopicName) {
	t.Helper()
	c := regionsCluster(t, "us", "eu")
	ch := putPolicy(t, c.Node(0), map[string]any{"namespace": "public/default", "regions": []string{"us", "eu"}})
	waitPolicy(t, c, nsKey("public/default"), ch.Policy.Version)
	name := topicName(t, topic)
	if _, err := c.Node(0).Proxy().CreateTopic(context.Background(), name, 2, nil); err != nil {
		t.Fatal(err)
	}
	return c, name
}

// streamTo returns n's stream status for a partition and destination.
func streamTo(n *testcluster.Node, topic protocols.TopicName, part int, dest string) (replicator.StreamStatus, bool) {
	px := n.Proxy()
	if px == nil {
		return replicator.StreamStatus{}, false
	}
	for _, s := range px.Replication().Status().Streams {
		if s.Topic == topic.String() && s.Partition == part && s.Destination == dest {
			return s, true
		}
	}
	return replicator.StreamStatus{}, false
}

// TestReplLinkSeveredWhileProducing: both regions keep producing while their link is cut; the
// status says so (disconnected, lag growing, not healthy); after healing every message arrives
// once in each region.
func TestReplLinkSeveredWhileProducing(t *testing.T) {
	c, name := twoRegions(t, "sever")
	us, eu := c.Node(0), c.Node(1)
	want := map[int]map[string][]string{0: {}, 1: {}}
	var mu sync.Mutex
	produce := func(n *testcluster.Node, round int) {
		var wg sync.WaitGroup
		for part := 0; part < 2; part++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := protocols.Partition{Topic: name, Index: part}
				vals := produceMany(t, n, p, n.Region, "s", round*1000, 50, 4)
				mu.Lock()
				want[part][n.Region] = append(want[part][n.Region], vals...)
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	produce(us, 0)
	testcluster.WaitFor(t, 20*time.Second, "eu to create the topic by replication", func() bool {
		return hw(eu, protocols.Partition{Topic: name, Index: 1}) > 0
	})
	produce(eu, 0)

	c.Partition(us, eu)
	produce(us, 1)
	produce(eu, 1)
	// The cut shows: the stream leaves the active state and the lag is the backlog.
	testcluster.WaitFor(t, 15*time.Second, "us to report the cut link", func() bool {
		s, ok := streamTo(us, name, 0, "eu")
		return ok && s.State == replicator.StreamDisconnected && s.LagMessages > 0 && s.LastError != ""
	})
	st := replStatus(t, us)
	if st.Summary.Healthy {
		t.Fatalf("summary healthy while cut with a backlog: %+v", st.Summary)
	}
	produce(us, 2)
	c.Heal()
	produce(eu, 2)
	for part := 0; part < 2; part++ {
		p := protocols.Partition{Topic: name, Index: part}
		for _, n := range c.Nodes() {
			checkExactlyOnce(t, n.Name, waitCount(t, n, p, 2*3*200, 30*time.Second), want[part])
		}
	}
	waitCaughtUp(t, us, 10*time.Second)
	if s, _ := streamTo(us, name, 0, "eu"); s.State != replicator.StreamActive || s.Opens < 2 {
		t.Fatalf("after healing: %+v", s)
	}
}

// crashMidStream waits until the destination holds part of the source's backlog and then
// crashes victim; it fails if the backlog was fully replicated before it could.
func crashMidStream(t *testing.T, victim, dst *testcluster.Node, p protocols.Partition, from, total int64) int64 {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		got := hw(dst, p)
		if got > from && got < total {
			victim.Crash()
			return got
		}
		if got >= total {
			t.Fatalf("the backlog of %d messages replicated before the crash; the test needs a larger one", total)
		}
		time.Sleep(200 * time.Microsecond)
	}
	t.Fatalf("%s never received any of the backlog", dst.Name)
	return 0
}

// TestReplReceiverCrashRestart: the destination crashes while a backlog streams to it and
// comes back; every message arrives exactly once.
func TestReplReceiverCrashRestart(t *testing.T) {
	c, name := twoRegions(t, "rcrash")
	us, eu := c.Node(0), c.Node(1)
	p := protocols.Partition{Topic: name, Index: 0}
	first := produceMany(t, us, p, "us", "r", 0, 10, 1)
	waitCount(t, eu, p, len(first), 20*time.Second)
	c.Partition(us, eu)
	backlog := produceMany(t, us, p, "us", "r", 10, 20000, 2)
	total := int64(len(first) + len(backlog))
	c.Heal()
	at := crashMidStream(t, eu, eu, p, int64(len(first)), total)
	t.Logf("eu crashed holding %d of %d messages", at, total)
	more := produceMany(t, us, p, "us", "r", 100000, 100, 3)
	testcluster.WaitFor(t, 15*time.Second, "us to see eu gone", func() bool {
		s, ok := streamTo(us, name, 0, "eu")
		return ok && s.State != replicator.StreamActive && s.LagMessages > 0
	})
	eu.Restart()
	want := map[string][]string{"us": append(append(first, backlog...), more...)}
	checkExactlyOnce(t, "eu", waitCount(t, eu, p, len(want["us"]), 60*time.Second), want)
	waitCaughtUp(t, us, 10*time.Second)
	for _, in := range eu.Proxy().Replication().Status().Inbound {
		if in.Topic == name.String() {
			t.Logf("eu received from %s: %d entries appended, %d duplicates dropped, %d stream opens", in.FromNode, in.Entries, in.Duplicates, in.Opens)
		}
	}
}

// TestReplSenderCrashRestart: the source crashes while its backlog streams out (entries in
// flight, acknowledgements lost) and comes back; it resends from its cursor and the
// destination drops what it already holds.
func TestReplSenderCrashRestart(t *testing.T) {
	c, name := twoRegions(t, "scrash")
	us, eu := c.Node(0), c.Node(1)
	p := protocols.Partition{Topic: name, Index: 1}
	first := produceMany(t, us, p, "us", "c", 0, 10, 1)
	waitCount(t, eu, p, len(first), 20*time.Second)
	c.Partition(us, eu)
	backlog := produceMany(t, us, p, "us", "c", 10, 20000, 2)
	total := int64(len(first) + len(backlog))
	c.Heal()
	at := crashMidStream(t, us, eu, p, int64(len(first)), total)
	t.Logf("us crashed when eu held %d of %d messages", at, total)
	us.Restart()
	more := produceMany(t, us, p, "us", "c", 100000, 100, 3)
	want := map[string][]string{"us": append(append(first, backlog...), more...)}
	checkExactlyOnce(t, "eu", waitCount(t, eu, p, len(want["us"]), 60*time.Second), want)
	waitCaughtUp(t, us, 10*time.Second)
	for _, in := range eu.Proxy().Replication().Status().Inbound {
		if in.Topic == name.String() {
			t.Logf("eu received from %s: %d entries appended, %d duplicates dropped, %d stream opens", in.FromNode, in.Entries, in.Duplicates, in.Opens)
		}
	}
}
