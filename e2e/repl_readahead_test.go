package e2e

import (
	"testing"
	"time"

	"github.com/ternmq/tern/configs"
	"github.com/ternmq/tern/internal/testcluster"
	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/replicator"
)

// TestReplReadAheadPlacesComeBack: senders catching up on a backlog read runs ahead of their
// sending within the node's read-ahead places, and a receiver that crashes mid-stream ends their
// sessions with runs read and not sent; those places come back, so once everything has arrived
// (exactly once) the node holds none, and a later backlog again streams with runs read ahead.
func TestReplReadAheadPlacesComeBack(t *testing.T) {
	// Small reads: a backlog of a few MiB is many runs, and the places are in use all along.
	tweak := func(cfg *configs.Node) { cfg.Replication.ReadBytes = configs.Bytes(16 << 10) }
	c := testcluster.Start(t, testcluster.Spec{Name: "us-1", Region: "us", Tweak: tweak},
		testcluster.Spec{Name: "eu-1", Region: "eu", Tweak: tweak})
	c.WaitMesh(20 * time.Second)
	us, eu := c.Node(0), c.Node(1)
	ch := putPolicy(t, us, map[string]any{"namespace": "public/default", "regions": []string{"us", "eu"}})
	waitPolicy(t, c, nsKey("public/default"), ch.Policy.Version)
	name := topicName(t, "places")
	if _, err := us.Proxy().CreateTopic(t.Context(), name, 2, nil); err != nil {
		t.Fatal(err)
	}
	parts := []protocols.Partition{{Topic: name, Index: 0}, {Topic: name, Index: 1}}
	want := map[int][]string{}
	for i, p := range parts {
		want[i] = produceMany(t, us, p, "us", "w", 0, 10, 1)
		waitCount(t, eu, p, len(want[i]), 20*time.Second)
	}

	c.Partition(us, eu)
	for i, p := range parts {
		want[i] = append(want[i], produceMany(t, us, p, "us", "b", 0, 3000, 2)...)
	}
	c.Heal()
	var used int
	testcluster.WaitFor(t, 20*time.Second, "the senders to read runs ahead", func() bool {
		used = max(used, replStatus(t, us).Summary.ReadAheadRuns)
		return used > 0 || hw(eu, parts[0]) >= int64(len(want[0]))
	})
	if used == 0 {
		t.Fatal("the backlog arrived with no run read ahead; the test needs a larger one")
	}
	eu.Crash()
	testcluster.WaitFor(t, 15*time.Second, "us to see eu gone", func() bool {
		s, ok := streamTo(us, name, 0, "eu")
		return ok && s.State != replicator.StreamActive
	})
	eu.Restart()
	for i, p := range parts {
		checkExactlyOnce(t, "eu", waitCount(t, eu, p, len(want[i]), 60*time.Second), map[string][]string{"us": want[i]})
	}
	waitCaughtUp(t, us, 10*time.Second)
	testcluster.WaitFor(t, 10*time.Second, "the senders to give their read-ahead places back", func() bool {
		return replStatus(t, us).Summary.ReadAheadRuns == 0
	})
	t.Logf("up to %d runs read ahead during the catch-up", used)
}
