package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ternmq/tern/internal/testcluster"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkKafkaProduce measures franz-go producing 1 KiB records with
// acks=all (idempotent, no compression, kgo's defaults otherwise) to 1 and
// 16 partitions of a tern node with sync durability (fsync before every
// ack) and, in the same run as the peer, of franz-go's in-memory kfake
// cluster. The machine is shared and noisy, so after a warm-up round each
// benchmark runs several rounds of b.N records, alternating tern and
// kfake, and reports the medians: records/s and MB/s of each, tern's throughput relative to
// kfake's, and p50/p99 produce latency (from Produce to its promise, so it
// includes the time a record waits in the client's buffer while the
// producer runs flat out). It also reports the latency of producing one
// record at a time (ProduceSync, nothing else in flight), which for tern
// is dominated by the fsync.
//
//	go test ./e2e -run=NONE -bench=KafkaProduce -benchtime=100000x
func BenchmarkKafkaProduce(b *testing.B) {
	rounds := 5
	if testing.Short() {
		rounds = 1
	}
	for _, parts := range []int{1, 16} {
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) {
			targets := []string{"tern", "kfake"}
			addrs := map[string]string{}
			for _, t := range targets {
				addrs[t] = benchTarget(b, t, parts)
			}
			res := map[string][]produceResult{}
			// One unmeasured round each: connections, producer ids and the
			// storage engine's first memtables are set up before measuring.
			for _, t := range targets {
				benchProduce(b, addrs[t])
			}
			b.ResetTimer()
			for range rounds {
				for _, t := range targets {
					res[t] = append(res[t], benchProduce(b, addrs[t]))
				}
			}
			b.StopTimer()
			med := map[string]produceResult{}
			for _, t := range targets {
				med[t] = median(res[t])
				b.ReportMetric(med[t].rps, t+"-rec/s")
				b.ReportMetric(med[t].rps*1024/1e6, t+"-MB/s")
				b.ReportMetric(med[t].p50, t+"-p50-ms")
				b.ReportMetric(med[t].p99, t+"-p99-ms")
			}
			b.ReportMetric(med["tern"].rps/med["kfake"].rps, "tern/kfake")
			// Latency without queueing: one record at a time.
			for _, t := range targets {
				p50, p99 := benchSyncLatency(b, addrs[t])
				b.ReportMetric(p50, t+"-1by1-p50-ms")
				b.ReportMetric(p99, t+"-1by1-p99-ms")
			}
			if b.N >= 1000 { // not the framework's one-record probe
				for _, t := range targets {
					b.Logf("%s rounds (rec/s): %v", t, rates(res[t]))
				}
			}
		})
	}
}

type produceResult struct{ rps, p50, p99 float64 }

func median(rs []produceResult) produceResult {
	pick := func(f func(produceResult) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return produceResult{
		rps: pick(func(r produceResult) float64 { return r.rps }),
		p50: pick(func(r produceResult) float64 { return r.p50 }),
		p99: pick(func(r produceResult) float64 { return r.p99 }),
	}
}

func rates(rs []produceResult) []int {
	out := make([]int, len(rs))
	for i, r := range rs {
		out[i] = int(r.rps)
	}
	return out
}

// benchTarget starts the cluster to measure and returns its address.
func benchTarget(b *testing.B, target string, parts int) string {
	b.Helper()
	const topic = "bench"
	switch target {
	case "tern":
		node := testcluster.Start(b).Node(0)
		// Stop the node before the data directory is removed (cleanups run
		// last-registered first, and the directory was registered after
		// the cluster).
		b.Cleanup(node.Stop)
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

// benchProduce produces b.N records and returns the round's figures.
func benchProduce(b *testing.B, addr string) produceResult {
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
	if firstErr != nil {
		b.Fatalf("produce: %v", firstErr)
	}
	slices.Sort(lat)
	return produceResult{
		rps: float64(b.N) / elapsed.Seconds(),
		p50: float64(lat[len(lat)/2].Microseconds()) / 1000,
		p99: float64(lat[len(lat)*99/100].Microseconds()) / 1000,
	}
}

// benchSyncLatency produces records one at a time and returns the p50 and
// p99 latency in milliseconds.
func benchSyncLatency(b *testing.B, addr string) (float64, float64) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("bench"),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	value := make([]byte, 1024)
	ctx := context.Background()
	n := 1000
	if b.N < 1000 {
		n = 10
	}
	lat := make([]time.Duration, 0, n)
	for i := 0; i <= n; i++ {
		t0 := time.Now()
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			b.Fatal(err)
		}
		if i > 0 { // the first one sets up the connection
			lat = append(lat, time.Since(t0))
		}
	}
	slices.Sort(lat)
	return float64(lat[len(lat)/2].Microseconds()) / 1000, float64(lat[len(lat)*99/100].Microseconds()) / 1000
}
