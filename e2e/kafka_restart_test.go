package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaRestartMidStream: a producer and a group consumer keep running
// while the node restarts between two halves of the data. Committed
// offsets and data survive: the consumer resumes after its commit, with no
// loss and no duplicates, and the idempotent producer's sequence state is
// loaded back so its next batches are accepted, not taken for gaps.
func TestKafkaRestartMidStream(t *testing.T) {
	node := startKafka(t)
	addr := node.KafkaAddr()
	const topic = "restart"
	createTopic(t, addr, topic, 3, nil)
	n := recordsPerCase()
	half := n / 2
	prod := kgoClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(time.Millisecond))
	cons := kgoClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumerGroup("g-restart"), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.Balancers(kgo.CooperativeStickyBalancer()))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	produce := func(from, to int) {
		t.Helper()
		var rs []*kgo.Record
		for i := from; i < to; i++ {
			rs = append(rs, &kgo.Record{Value: payload(topic, i)})
		}
		if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("produce %d-%d: %v", from, to, err)
		}
	}
	l := newLedger(topic, n)
	consume := func(until int) {
		t.Helper()
		for l.count() < until && ctx.Err() == nil {
			fs := cons.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) { l.add(r.Partition, r.Offset, r.Value) })
			if err := cons.CommitUncommittedOffsets(ctx); err != nil {
				t.Logf("commit: %v (retried by the next poll)", err)
			}
		}
	}
	produce(0, half)
	consume(half)
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit before restart: %v", err)
	}
	before := highWatermarks(t, node, topic, 3)

	node.Restart()
	if after := highWatermarks(t, node, topic, 3); !equalInt64s(before, after) {
		t.Fatalf("high watermarks %v before the restart, %v after", before, after)
	}

	produce(half, n)
	consume(n)
	l.check(t)

	// Everything is still there from the start, read by a fresh client.
	all := newLedger(topic, n)
	fresh := kgoClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for all.count() < n && ctx.Err() == nil {
		fresh.PollFetches(ctx).EachRecord(func(r *kgo.Record) { all.add(r.Partition, r.Offset, r.Value) })
	}
	all.check(t)
}

func equalInt64s(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
