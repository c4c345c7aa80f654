package e2e

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ternmq/tern/internal/testcluster"
	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/regions"
	"github.com/ternmq/tern/replicator"
)

// peerTransport starts a bare replication transport with the test mesh's credentials, for a
// node the test plays by hand.
func peerTransport(t *testing.T, name, region string, h replicator.Handler) *replicator.Transport {
	t.Helper()
	cfg := replicator.DefaultConfig()
	cfg.ListenAddr = "127.0.0.1:0"
	cfg.NodeName, cfg.Region = name, region
	cfg.TLS.MeshSecret = testcluster.TestMeshSecret
	cfg.HeartbeatInterval, cfg.HeartbeatTimeout = 200*time.Millisecond, 2*time.Second
	cfg.ReconnectInitial, cfg.ReconnectMax = 50*time.Millisecond, time.Second
	cfg.Logger = quietLogger()
	tr, err := replicator.New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

// extra is the replication header of OPEN: version 1, no flags, the origin epoch.
func extra(epoch int64) []byte { return binary.BigEndian.AppendUint64([]byte{1, 0}, uint64(epoch)) }

// originEntry builds an entry as a sender stamps it: origin region and offset, epoch, visited.
func originEntry(t *testing.T, origin string, off, epoch int64, vals ...string) []byte {
	t.Helper()
	msgs := make([]protocols.Message, len(vals))
	for i, v := range vals {
		msgs[i] = protocols.Message{Timestamp: 1, Value: []byte(v)}
	}
	b, err := protocols.AppendBatch(nil, protocols.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, msgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	env := protocols.Envelope{OriginRegion: origin, OriginOffset: off, Visited: []string{origin}}
	protocols.SetOriginEpoch(&env, epoch)
	e, err := protocols.AppendEntry(nil, &env, b)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestReplDuplicatePathsDropped: the same origin entries arriving at a region by two paths (two
// senders with their own offsets), resent after a reconnect, or from an older incarnation of
// the origin partition are appended once; a newer incarnation starts afresh.
func TestReplDuplicatePathsDropped(t *testing.T) {
	c := regionsCluster(t, "eu")
	eu := c.Node(0)
	name := topicName(t, "paths")
	p := protocols.Partition{Topic: name, Index: -1}
	// Origin "ap" wrote 12 entries of 2 messages (origin offsets 0, 2, ... 22), epoch 5.
	var origin []replicator.Entry
	var want []string
	for i := 0; i < 12; i++ {
		vals := []string{"ap/" + string(rune('a'+i)) + "1", "ap/" + string(rune('a'+i)) + "2"}
		want = append(want, vals...)
		origin = append(origin, replicator.Entry{Offset: int64(2 * i), Count: 2, Value: originEntry(t, "ap", int64(2*i), 5, vals...)})
	}
	send := func(tr *replicator.Transport, entries []replicator.Entry, epoch int64) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := tr.OpenPartitionStream(ctx, "eu-1", replicator.OpenRequest{Topic: name.String(), DestRegion: "eu", StartOffset: entries[0].Offset, Extra: extra(epoch)})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := s.Send(ctx, entries); err != nil {
			t.Fatal(err)
		}
		end := entries[len(entries)-1].End()
		for {
			a, err := s.NextAck(ctx)
			if err != nil {
				t.Fatalf("waiting for the ACK of %d: %v", end, err)
			}
			if a >= end {
				return
			}
		}
	}
	relay := func(name, region string) *replicator.Transport {
		tr := peerTransport(t, name, region, nil)
		if err := tr.AddPeer(replicator.Peer{Name: "eu-1", Region: "eu", Addr: eu.Config.Mesh.MeshAddr}); err != nil {
			t.Fatal(err)
		}
		return tr
	}
	hub1, hub2 := relay("hub1-1", "hub1"), relay("hub2-1", "hub2")
	// Path 1 delivers the first 8 entries, in its own offsets (origin offset + 1000).
	shift := func(es []replicator.Entry, by int64) []replicator.Entry {
		out := make([]replicator.Entry, len(es))
		for i, e := range es {
			out[i] = replicator.Entry{Offset: e.Offset + by, Count: e.Count, Value: e.Value}
		}
		return out
	}
	send(hub1, shift(origin[:8], 1000), 5)
	// Path 2 delivers everything from the start; path 1 resends its last 3 after a "reconnect".
	send(hub2, shift(origin, 7), 5)
	send(hub1, shift(origin[5:8], 1000), 5)
	checkExactlyOnce(t, "eu", waitCount(t, eu, p, 24, 10*time.Second), map[string][]string{"ap": want})
	// An entry of an older incarnation is stale; one of a newer incarnation is new.
	send(hub1, []replicator.Entry{{Offset: 5000, Count: 1, Value: originEntry(t, "ap", 100, 4, "ap/stale")}}, 4)
	send(hub2, []replicator.Entry{{Offset: 6000, Count: 1, Value: originEntry(t, "ap", 0, 6, "ap/reborn")}}, 6)
	got := waitCount(t, eu, p, 25, 10*time.Second)
	if got[24] != "ap/reborn" {
		t.Fatalf("last message %q, want ap/reborn", got[24])
	}
	var dups uint64
	for _, in := range eu.Proxy().Replication().Status().Inbound {
		if in.Topic == name.String() {
			dups += in.Duplicates
		}
	}
	if dups != 8+3+1 {
		t.Fatalf("eu dropped %d duplicate entries, want 12 (8 by the second path, 3 resent, 1 stale)", dups)
	}
}

// TestReplStallIsReported: a destination that takes a stream and then stops acknowledging (a
// hung disk) leaves the link up; the stream turns "stalled" after stall_after, the summary is
// unhealthy and the metric says so.
func TestReplStallIsReported(t *testing.T) {
	c := regionsCluster(t, "us")
	us := c.Node(0)
	name := topicName(t, "stuck")
	// The eu node is played by hand: it acknowledges the policy topic but never the data.
	h := replicator.HandlerFunc(func(ctx context.Context, rs *replicator.RecvStream) error {
		if strings.HasSuffix(rs.Request().Topic, "/unopened") {
			<-ctx.Done() // never answers the OPEN
			return nil
		}
		if err := rs.Ack(rs.Request().StartOffset); err != nil {
			return err
		}
		for {
			b, err := rs.Recv(ctx)
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if rs.Request().Topic == replicator.SystemTopic {
				if err := rs.AckAndGrant(b.End(), b.Credit()); err != nil {
					return err
				}
			}
		}
	})
	tr := peerTransport(t, "eu-1", "eu", h)
	mcfg := regions.DefaultConfig()
	mcfg.NodeName, mcfg.Region = "eu-1", "eu"
	mcfg.BindAddr, mcfg.AdvertiseAddr = freePort(t), "127.0.0.1"
	mcfg.Seeds = []string{us.Config.Mesh.GossipAddr}
	mcfg.Timings = testcluster.FastTimings()
	mcfg.Advertise = regions.Advertise{QUIC: tr.Addr().String()}
	mcfg.Logger = quietLogger()
	m, err := regions.New(mcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	testcluster.WaitFor(t, 20*time.Second, "us to see eu", func() bool {
		n, ok := us.Proxy().Mesh().Directory().Node("eu-1")
		return ok && n.State == regions.StateAlive
	})
	putPolicy(t, us, map[string]any{"namespace": "public/default", "regions": []string{"us", "eu"}})
	if _, err := us.Proxy().CreateTopic(context.Background(), name, 0, nil); err != nil {
		t.Fatal(err)
	}
	p := protocols.Partition{Topic: name, Index: -1}
	produceMany(t, us, p, "us", "s", 0, 10, 1)
	testcluster.WaitFor(t, 20*time.Second, "the stream to be reported stalled", func() bool {
		s, ok := streamTo(us, name, -1, "eu")
		return ok && s.State == replicator.StreamStalled && s.LagMessages == 10 && s.LagSeconds >= 5
	})
	st := replStatus(t, us)
	if st.Summary.Healthy || st.Summary.ByState[replicator.StreamStalled] != 1 {
		t.Fatalf("summary: %+v", st.Summary)
	}
	for _, l := range st.Links {
		if l.Peer == "eu-1" && l.State != "up" {
			t.Fatalf("the link should be up while the stream stalls: %+v", l)
		}
	}
	resp, err := http.Get(us.HTTPURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	line := `tern_replication_stalled{destination="eu",node="us-1",partition="-1",region="us",topic="persistent://public/default/stuck"} 1`
	if !strings.Contains(string(body), line) {
		t.Fatalf("metrics lack %s", line)
	}
	// A destination that never accepts the stream at all, over a link that is up, is stalled too.
	unopened := topicName(t, "unopened")
	if _, err := us.Proxy().CreateTopic(context.Background(), unopened, 0, nil); err != nil {
		t.Fatal(err)
	}
	produceMany(t, us, protocols.Partition{Topic: unopened, Index: -1}, "us", "u", 0, 3, 1)
	testcluster.WaitFor(t, 20*time.Second, "the unopened stream to be reported stalled", func() bool {
		s, ok := streamTo(us, unopened, -1, "eu")
		return ok && s.State == replicator.StreamStalled && s.LagMessages == 3 && strings.Contains(s.LastError, "has not accepted the stream")
	})
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
