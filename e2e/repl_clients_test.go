package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ternmq/tern/internal/testcluster"
	"github.com/ternmq/tern/protocols"
)

// kafkaProduceOrigin produces n records per partition through franz-go (idempotent, batched,
// lz4) and returns the values per partition in the order produced.
func kafkaProduceOrigin(t *testing.T, ctx context.Context, n *testcluster.Node, topic string, parts, per int) map[int32][]string {
	t.Helper()
	cl := kgoClient(t, n.KafkaAddr(), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.Lz4Compression()), kgo.ProducerLinger(2*time.Millisecond))
	out := map[int32][]string{}
	for i := 0; i < per; i++ {
		for p := int32(0); p < int32(parts); p++ {
			v := fmt.Sprintf("%s/p%d-%06d", n.Region, p, i)
			out[p] = append(out[p], v)
			cl.Produce(ctx, &kgo.Record{Partition: p, Key: []byte(v), Value: []byte(v)}, func(r *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce %s: %v", r.Value, err)
				}
			})
		}
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return out
}

// kafkaConsumeAll reads every partition of a topic from the start through franz-go until want
// records arrived, returning the values per partition in offset order.
func kafkaConsumeAll(t *testing.T, ctx context.Context, n *testcluster.Node, topic string, parts, want int) map[int32][]string {
	t.Helper()
	offsets := map[int32]kgo.Offset{}
	for p := int32(0); p < int32(parts); p++ {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl := kgoClient(t, n.KafkaAddr(), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	got := map[int32][]string{}
	total := 0
	for total < want && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(tp string, p int32, err error) {
			if ctx.Err() == nil {
				t.Errorf("fetch %s/%d from %s: %v", tp, p, n.Name, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			total++
		})
	}
	if total != want {
		t.Fatalf("%s: consumed %d records, want %d", n.Name, total, want)
	}
	return got
}

// TestReplActiveActiveKafka: franz-go producers in both regions write to the same topic at once;
// franz-go consumers in both regions see every record exactly once, in origin order per origin
// and partition.
func TestReplActiveActiveKafka(t *testing.T) {
	c := regionsCluster(t, "us", "eu")
	us, eu := c.Node(0), c.Node(1)
	ch := putPolicy(t, us, map[string]any{"namespace": "public/default", "regions": []string{"us", "eu"}})
	waitPolicy(t, c, nsKey("public/default"), ch.Policy.Version)
	const topic, parts, per = "kafka-aa", 3, 200
	createTopic(t, us.KafkaAddr(), topic, parts, nil)
	name := topicName(t, topic)
	testcluster.WaitFor(t, 20*time.Second, "replication to create the topic in eu", func() bool {
		info, err := eu.Proxy().Topic(context.Background(), name)
		return err == nil && info.Partitions == parts
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var mu sync.Mutex
	want := map[int32]map[string][]string{}
	var wg sync.WaitGroup
	for _, n := range []*testcluster.Node{us, eu} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			vals := kafkaProduceOrigin(t, ctx, n, topic, parts, per)
			mu.Lock()
			defer mu.Unlock()
			for p, vs := range vals {
				if want[p] == nil {
					want[p] = map[string][]string{}
				}
				want[p][n.Region] = vs
			}
		}()
	}
	wg.Wait()
	for _, n := range []*testcluster.Node{us, eu} {
		got := kafkaConsumeAll(t, ctx, n, topic, parts, 2*parts*per)
		for p := int32(0); p < parts; p++ {
			checkExactlyOnce(t, fmt.Sprintf("%s partition %d", n.Name, p), got[p], want[p])
		}
	}
	// The replicated batches kept their producer's identity: the eu copy of a us batch is the
	// same idempotent batch, and eu's own producer state was not touched by it.
	f, err := eu.Proxy().Fetch(ctx, protocols.Partition{Topic: name, Index: 0}, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var fromUS int
	for _, e := range f.Entries {
		de, err := protocols.DecodeEntry(e.Value)
		if err != nil {
			t.Fatal(err)
		}
		if de.Envelope.OriginRegion == "us" {
			fromUS++
			if de.Header.ProducerID < 0 {
				t.Fatalf("a replicated idempotent batch lost its producer id: %+v", de.Header)
			}
		}
	}
	if fromUS == 0 {
		t.Fatal("eu holds no entry from us in partition 0")
	}
}

// TestReplKafkaLinkCutAndReceiverCrash: a franz-go producer in us writes steadily while the link
// to eu is cut and healed and then eu crashes and restarts; a franz-go consumer in eu then reads
// every record exactly once, in order.
func TestReplKafkaLinkCutAndReceiverCrash(t *testing.T) {
	c := regionsCluster(t, "us", "eu")
	us, eu := c.Node(0), c.Node(1)
	ch := putPolicy(t, us, map[string]any{"namespace": "public/default", "regions": []string{"us", "eu"}})
	waitPolicy(t, c, nsKey("public/default"), ch.Policy.Version)
	const topic, parts, per = "kafka-faults", 2, 1500
	createTopic(t, us.KafkaAddr(), topic, parts, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cl := kgoClient(t, us.KafkaAddr(), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.SnappyCompression()), kgo.ProducerLinger(time.Millisecond))
	want := map[int32]map[string][]string{0: {}, 1: {}}
	produced := make(chan int, per)
	go func() {
		defer close(produced)
		for i := 0; i < per; i++ {
			for p := int32(0); p < parts; p++ {
				v := fmt.Sprintf("us/p%d-%06d", p, i)
				want[p]["us"] = append(want[p]["us"], v)
				cl.Produce(ctx, &kgo.Record{Partition: p, Value: []byte(v)}, func(r *kgo.Record, err error) {
					if err != nil {
						t.Errorf("produce %s: %v", r.Value, err)
					}
				})
			}
			if i%100 == 99 {
				if err := cl.Flush(ctx); err != nil {
					t.Error(err)
					return
				}
				produced <- i + 1
			}
		}
	}()
	waitProduced := func(n int) {
		for got := range produced {
			if got >= n {
				return
			}
		}
	}
	waitProduced(300)
	c.Partition(us, eu)
	waitProduced(700)
	c.Heal()
	waitProduced(1000)
	eu.Crash()
	waitProduced(1200)
	eu.Restart()
	waitProduced(per)
	got := kafkaConsumeAll(t, ctx, eu, topic, parts, parts*per)
	for p := int32(0); p < parts; p++ {
		checkExactlyOnce(t, fmt.Sprintf("eu partition %d", p), got[p], want[p])
	}
}
