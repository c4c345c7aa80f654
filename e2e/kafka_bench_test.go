package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/ternmq/tern/internal/testcluster"
)

// BenchmarkKafkaProduce measures franz-go producing 1 KiB records with
// acks=all (idempotent, kgo's defaults otherwise, no compression) to 1 and
// 16 partitions, against a tern node with sync durability (fsync before
// every ack) and, in the same run as the peer, against franz-go's in-memory
// kfake cluster. It reports records/s, MB/s and p50/p99 produce latency,
// and logs tern's throughput relative to kfake's.
//
//	go test ./e2e -run=NONE -bench=KafkaProduce -benchtime=200000x
func BenchmarkKafkaProduce(b *testing.B) {
	results := map[string]float64{}
	for _, parts := range []int{1, 16} {
		for _, target := range []string{"tern", "kfake"} {
			name := fmt.Sprintf("%s/partitions=%d", target, parts)
			b.Run(name, func(b *testing.B) {
				addr := benchTarget(b, target, parts)
				results[name] = benchProduce(b, addr, parts)
			})
		}
		tern, peer := results[fmt.Sprintf("tern/partitions=%d", parts)], results[fmt.Sprintf("kfake/partitions=%d", parts)]
		if tern > 0 && peer > 0 {
			b.Logf("partitions=%d: tern %.0f rec/s, kfake %.0f rec/s: %.2fx", parts, tern, peer, tern/peer)
		}
	}
}

// benchTarget starts the cluster to measure and returns its address.
func benchTarget(b *testing.B, target string, parts int) string {
	b.Helper()
	const topic = "bench"
	switch target {
	case "tern":
		node := testcluster.Start(b).Node(0)
		if d := node.Config.Storage.Durability; d != "sync" {
			b.Fatalf("durability %q; the benchmark measures sync", d)
		}
		addr := node.KafkaAddr()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, int32(parts), 1
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil || resp.Topics[0].ErrorCode != 0 {
			b.Fatalf("create topic: %v %v", err, resp)
		}
		return addr
	default:
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(parts), topic))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.Close)
		return c.ListenAddrs()[0]
	}
}

// benchProduce produces b.N records and returns records/s.
func benchProduce(b *testing.B, addr string, parts int) float64 {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("bench"),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	value := make([]byte, 1024)
	_, _ = rand.Read(value)
	ctx := context.Background()
	// Warm up: metadata, producer id, connections.
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, b.N)
	var mu sync.Mutex
	var firstErr error
	b.SetBytes(1024)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			lat[i] = time.Since(t0)
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if firstErr != nil {
		b.Fatalf("produce: %v", firstErr)
	}
	slices.Sort(lat)
	rps := float64(b.N) / elapsed.Seconds()
	b.ReportMetric(rps, "rec/s")
	b.ReportMetric(rps*1024/1e6, "MB/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	_ = parts
	return rps
}
