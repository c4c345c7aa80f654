package proxy_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ternmq/tern/configs"
	"github.com/ternmq/tern/dedup"
	"github.com/ternmq/tern/internal/testcluster"
	"github.com/ternmq/tern/localstore"
	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/proxy"
)

func idemBatch(t *testing.T, pid int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	msgs := make([]protocols.Message, n)
	for i := range msgs {
		msgs[i] = protocols.Message{Timestamp: int64(i), Value: []byte{byte(seq), byte(i)}}
	}
	b, err := protocols.AppendBatch(nil, protocols.BatchSpec{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq}, msgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestIdempotentResendsRace: the same idempotent batches sent many times
// at once (a producer retrying on new connections while the first sends
// are still being written) are written once each, in order, and every
// send learns the original offsets.
func TestIdempotentResendsRace(t *testing.T) {
	n := testcluster.Start(t).Node(0)
	ctx := context.Background()
	name, _ := protocols.ParseTopicName("idem", "public/default")
	if _, err := n.Proxy().CreateTopic(ctx, name, 1, nil); err != nil {
		t.Fatal(err)
	}
	p := protocols.Partition{Topic: name, Index: 0}
	pid, err := n.Proxy().NewProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const batches, senders = 20, 8
	for b := 0; b < batches; b++ {
		batch := idemBatch(t, pid, 0, int32(3*b), 3)
		var wg sync.WaitGroup
		bases := make([]int64, senders)
		for s := 0; s < senders; s++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := n.Proxy().Produce(ctx, p, protocols.ProduceRequest{Batch: append([]byte(nil), batch...)})
				if err != nil {
					t.Errorf("batch %d sender %d: %v", b, s, err)
					return
				}
				bases[s] = r.BaseOffset
			}()
		}
		wg.Wait()
		for s, base := range bases {
			if base != int64(3*b) {
				t.Fatalf("batch %d sender %d: base offset %d, want %d", b, s, base, 3*b)
			}
		}
	}
	off, err := n.Proxy().Offsets(ctx, p)
	if err != nil || off.HighWatermark != 3*batches {
		t.Fatalf("high watermark %d (%v), want %d: resends were written", off.HighWatermark, err, 3*batches)
	}

	// After a restart the state is loaded back: the last batch is still a
	// duplicate, the next one in sequence is accepted, a gap is refused,
	// and producer ids are not handed out again.
	n.Restart()
	last := idemBatch(t, pid, 0, int32(3*(batches-1)), 3)
	if r, err := n.Proxy().Produce(ctx, p, protocols.ProduceRequest{Batch: last}); err != nil || !r.Duplicate || r.BaseOffset != 3*(batches-1) {
		t.Fatalf("resend after restart: %+v %v", r, err)
	}
	if _, err := n.Proxy().Produce(ctx, p, protocols.ProduceRequest{Batch: idemBatch(t, pid, 0, int32(3*batches+1), 1)}); !errors.Is(err, protocols.ErrOutOfOrderSequence) {
		t.Fatalf("gap after restart: %v", err)
	}
	if r, err := n.Proxy().Produce(ctx, p, protocols.ProduceRequest{Batch: idemBatch(t, pid, 0, int32(3*batches), 1)}); err != nil || r.Duplicate || r.BaseOffset != 3*batches {
		t.Fatalf("next batch after restart: %+v %v", r, err)
	}
	seen := map[int64]bool{pid: true}
	for i := 0; i < 5; i++ {
		id, err := n.Proxy().NewProducerID(ctx)
		if err != nil || seen[id] {
			t.Fatalf("producer id %d (%v) handed out twice", id, err)
		}
		seen[id] = true
	}
}

// TestIdempotenceExpiry: the state of a producer idle past the expiry is
// deleted from storage by a later append to the partition, in that
// append's write.
func TestIdempotenceExpiry(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	cfg := configs.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Log.Level = "warn"
	n, err := proxy.New(cfg, proxy.Options{Now: func() time.Time { return time.UnixMilli(clock.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	ctx := context.Background()
	name, _ := protocols.ParseTopicName("expiry", "public/default")
	if _, err := n.CreateTopic(ctx, name, 1, nil); err != nil {
		t.Fatal(err)
	}
	p := protocols.Partition{Topic: name, Index: 0}
	pid, err := n.Store().LookupPartition(name.String(), 0)
	if err != nil {
		t.Fatal(err)
	}
	stored := func(producer int64) bool {
		_, ok, err := n.Store().Get(localstore.ProducerKey(pid, dedup.KindKafka, dedup.ProducerKey(producer)))
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if _, err := n.Produce(ctx, p, protocols.ProduceRequest{Batch: idemBatch(t, 100, 0, 0, 1)}); err != nil {
		t.Fatal(err)
	}
	if !stored(100) {
		t.Fatal("producer state not written with the entry")
	}
	clock.Add((dedup.DefaultExpiry + 2*time.Minute).Milliseconds())
	if _, err := n.Produce(ctx, p, protocols.ProduceRequest{Batch: idemBatch(t, 200, 0, 0, 1)}); err != nil {
		t.Fatal(err)
	}
	if stored(100) || !stored(200) {
		t.Fatalf("after the expiry: producer 100 stored=%v (want false), 200 stored=%v (want true)", stored(100), stored(200))
	}
}

// TestDeleteTopicForgetsDedupState: deleting a topic drops the in-memory
// Kafka idempotence tables of its partitions, and producing to a topic of
// the same name afterwards starts from an empty table.
func TestDeleteTopicForgetsDedupState(t *testing.T) {
	n := testcluster.Start(t).Node(0)
	ctx := context.Background()
	name, _ := protocols.ParseTopicName("gone", "public/default")
	keep, _ := protocols.ParseTopicName("kept", "public/default")
	for _, tn := range []protocols.TopicName{name, keep} {
		if _, err := n.Proxy().CreateTopic(ctx, tn, 2, nil); err != nil {
			t.Fatal(err)
		}
	}
	pid, err := n.Proxy().NewProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	produce := func(tn protocols.TopicName, part int) protocols.ProduceResult {
		t.Helper()
		r, err := n.Proxy().Produce(ctx, protocols.Partition{Topic: tn, Index: part}, protocols.ProduceRequest{Batch: idemBatch(t, pid, 0, 0, 2)})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// Pulsar producers dedup by name where the namespace asks for it.
	on := true
	if err := n.Proxy().UpdateNamespacePolicies(ctx, name.NamespaceName(), func(p *proxy.Policies) error { p.Deduplication = &on; return nil }); err != nil {
		t.Fatal(err)
	}
	pulsarSend := func(tn protocols.TopicName, part int) {
		t.Helper()
		env := protocols.Envelope{ProducerName: "p-" + tn.Local, SequenceFirst: 7, SequenceLast: 7}
		if _, err := n.Proxy().Produce(ctx, protocols.Partition{Topic: tn, Index: part}, protocols.ProduceRequest{Envelope: env, Batch: batchOf(t, "x")}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tn := range []protocols.TopicName{name, keep} {
		produce(tn, 0)
		produce(tn, 1)
		pulsarSend(tn, 0)
	}
	if k, p, _ := n.Proxy().CachedPartitionStates(); k != 4 || p != 2 {
		t.Fatalf("%d Kafka idempotence tables and %d Pulsar dedup states cached after producing to 4 partitions (Pulsar to 2)", k, p)
	}
	if err := n.Proxy().DeleteTopic(ctx, name); err != nil {
		t.Fatal(err)
	}
	if k, p, _ := n.Proxy().CachedPartitionStates(); k != 2 || p != 1 {
		t.Fatalf("%d Kafka idempotence tables and %d Pulsar dedup states cached after deleting a topic, want 2 and 1", k, p)
	}
	// The kept topic still knows the producer: a resend is a duplicate.
	if r := produce(keep, 0); r.BaseOffset != 0 {
		t.Fatalf("resend to the kept topic landed at %d, want the original offset 0", r.BaseOffset)
	}
	if _, err := n.Proxy().CreateTopic(ctx, name, 2, nil); err != nil {
		t.Fatal(err)
	}
	if r := produce(name, 0); r.BaseOffset != 0 {
		t.Fatalf("first batch to the recreated topic at %d", r.BaseOffset)
	}
}
