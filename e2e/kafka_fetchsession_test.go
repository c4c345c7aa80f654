package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ternmq/tern/configs"
	"github.com/ternmq/tern/internal/testcluster"
)

// sessionFetch is a v12 fetch on session id at epoch, naming parts
// (partition -> fetch offset) of topic.
func sessionFetch(topic string, id, epoch int32, maxWait time.Duration, parts map[int32]int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.SessionID, req.SessionEpoch = id, epoch
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = int32(maxWait.Milliseconds()), 1, 1<<20
	if len(parts) > 0 {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		for p := range int32(16) {
			if off, ok := parts[p]; ok {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, off, 1<<20
				rt.Partitions = append(rt.Partitions, rp)
			}
		}
		req.Topics = []kmsg.FetchRequestTopic{rt}
	}
	return req
}

// partitionsOf gives an answer's partitions and their high watermarks,
// and fails on an error in any.
func partitionsOf(t *testing.T, resp *kmsg.FetchResponse) map[int32]int64 {
	t.Helper()
	if resp.ErrorCode != 0 {
		t.Fatalf("fetch: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	out := map[int32]int64{}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("partition %d: %v", p.Partition, kerr.ErrorForCode(p.ErrorCode))
			}
			out[p.Partition] = p.HighWatermark
		}
	}
	return out
}

// TestKafkaFetchSession: a full fetch at epoch 0 opens a session; an
// incremental fetch on another connection names nothing, long-polls on
// every partition of the session, and hears only of the partition a
// record went to; epochs must follow on, and epoch -1 closes the session.
func TestKafkaFetchSession(t *testing.T) {
	node := startKafka(t)
	addr := node.KafkaAddr()
	const topic = "sessions"
	createTopic(t, addr, topic, 3, nil)
	prod := kgoClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceTo := func(p int32) {
		t.Helper()
		if err := prod.ProduceSync(ctxT(t), &kgo.Record{Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for p := range int32(3) {
		produceTo(p)
	}

	rc := dialRaw(t, addr)
	resp := rc.roundTrip(sessionFetch(topic, 0, 0, 0, map[int32]int64{0: 1, 1: 1, 2: 1})).(*kmsg.FetchResponse)
	id := resp.SessionID
	if got := partitionsOf(t, resp); id == 0 || len(got) != 3 || got[0] != 1 || got[2] != 1 {
		t.Fatalf("full fetch: session %d, partitions %v", id, got)
	}

	produceTo(2)
	other := dialRaw(t, addr) // sessions are the node's, not a connection's
	resp = other.roundTrip(sessionFetch(topic, id, 1, 5*time.Second, nil)).(*kmsg.FetchResponse)
	if got := partitionsOf(t, resp); resp.SessionID != id || len(got) != 1 || got[2] != 2 {
		t.Fatalf("incremental fetch after a record to partition 2: session %d, partitions %v", resp.SessionID, got)
	}
	if len(resp.Topics[0].Partitions[0].RecordBatches) == 0 {
		t.Fatal("partition 2 answered without its record")
	}

	// Moved on in partition 2, nothing new: the fetch waits its MaxWait
	// and hears of nothing.
	start := time.Now()
	resp = other.roundTrip(sessionFetch(topic, id, 2, 300*time.Millisecond, map[int32]int64{2: 2})).(*kmsg.FetchResponse)
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Fatalf("a fetch with nothing new returned after %v, before its 300ms MaxWait", waited)
	}
	if got := partitionsOf(t, resp); len(got) != 0 {
		t.Fatalf("nothing new, but answered %v", got)
	}

	// A record to partition 0, which this fetch does not name, wakes it.
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(200 * time.Millisecond)
		_ = prod.ProduceSync(context.Background(), &kgo.Record{Partition: 0, Value: []byte("wake")}).FirstErr()
	}()
	start = time.Now()
	resp = rc.roundTrip(sessionFetch(topic, id, 3, 20*time.Second, nil)).(*kmsg.FetchResponse)
	<-done
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("the session's fetch was not woken by a record to partition 0: %v", waited)
	}
	if got := partitionsOf(t, resp); len(got) != 1 || got[0] != 2 {
		t.Fatalf("woken: partitions %v, want partition 0 at 2", got)
	}

	if resp := rc.roundTrip(sessionFetch(topic, id, 3, 0, nil)).(*kmsg.FetchResponse); resp.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("epoch 3 again: %v, want INVALID_FETCH_SESSION_EPOCH", kerr.ErrorForCode(resp.ErrorCode))
	}
	if got := scrapeValue(t, node, "tern_kafka_fetch_sessions"); got != 1 {
		t.Fatalf("tern_kafka_fetch_sessions %v, want 1", got)
	}
	if got := scrapeValue(t, node, "tern_kafka_incremental_fetches_total"); got != 3 {
		t.Fatalf("tern_kafka_incremental_fetches_total %v, want 3", got)
	}
	resp = rc.roundTrip(sessionFetch(topic, id, -1, 0, map[int32]int64{0: 2})).(*kmsg.FetchResponse)
	if got := partitionsOf(t, resp); resp.SessionID != 0 || len(got) != 1 {
		t.Fatalf("closing fetch: session %d, partitions %v", resp.SessionID, got)
	}
	if resp := rc.roundTrip(sessionFetch(topic, id, 4, 0, nil)).(*kmsg.FetchResponse); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("fetch on the closed session: %v, want FETCH_SESSION_ID_NOT_FOUND", kerr.ErrorForCode(resp.ErrorCode))
	}
	if got := scrapeValue(t, node, "tern_kafka_fetch_sessions"); got != 0 {
		t.Fatalf("tern_kafka_fetch_sessions %v after closing, want 0", got)
	}
}

// TestKafkaFranzConsumesManyPartitionsOverASession: franz-go, which uses
// fetch sessions where the broker offers them, reads every record of a
// 32-partition topic once and in order while a producer goes on writing,
// on a node with sessions (its fetches are incremental) and on one
// keeping none (it sends full fetches).
func TestKafkaFranzConsumesManyPartitionsOverASession(t *testing.T) {
	for _, slots := range []int{1000, 0} {
		t.Run(fmt.Sprintf("slots=%d", slots), func(t *testing.T) {
			node := testcluster.Start(t, testcluster.Spec{Tweak: func(c *configs.Node) { c.Kafka.FetchSessionSlots = slots }}).Node(0)
			addr := node.KafkaAddr()
			const topic, parts = "many", 32
			createTopic(t, addr, topic, parts, nil)
			n := recordsPerCase() * 4
			tag := fmt.Sprintf("sess%d", slots)
			l := newLedger(tag, n)
			cons := kgoClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
			ctx := ctxT(t)
			consumed := make(chan struct{})
			go func() {
				defer close(consumed)
				for l.count() < n && ctx.Err() == nil {
					cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) { l.add(r.Partition, r.Offset, r.Value) })
				}
			}()
			// Records go to one partition at a time, a few at a time,
			// so most fetches find news in few of the partitions.
			prod := kgoClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			for i := range n {
				r := &kgo.Record{Partition: int32(i/5) % parts, Value: payload(tag, i)}
				if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case <-consumed:
			case <-time.After(60 * time.Second):
				t.Fatalf("consumed %d of %d records in 60s", l.count(), n)
			}
			l.check(t)
			incremental := scrapeValue(t, node, "tern_kafka_incremental_fetches_total")
			sessions := scrapeValue(t, node, "tern_kafka_fetch_sessions")
			fetches := familyValue(scrape(t, node), `tern_kafka_requests_total{api="Fetch"}`)
			t.Logf("%v fetches, %v incremental, %v sessions open", fetches, incremental, sessions)
			if slots == 0 {
				if incremental != 0 || sessions != 0 {
					t.Fatalf("a node keeping no sessions served %v incremental fetches, %v sessions", incremental, sessions)
				}
				return
			}
			if sessions != 1 || incremental < fetches/2 {
				t.Fatalf("%v sessions and %v incremental fetches of %v: want one session serving most fetches", sessions, incremental, fetches)
			}
			if got := scrapeValue(t, node, "tern_kafka_fetch_session_partitions"); got != parts {
				t.Fatalf("the session holds %v partitions, want %d", got, parts)
			}
		})
	}
}
