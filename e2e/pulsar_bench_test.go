package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ternmq/tern/internal/testcluster"
	"github.com/ternmq/tern/protocols"
)

// BenchmarkProduce1KiB publishes 1 KiB messages to one node through three
// paths on the same workload, in one run so the figures compare:
//
//   - pulsar: pulsar-client-go, batching on, asynchronous sends;
//   - kafka: franz-go against the Kafka listener (skipped with a message
//     when this build has none), asynchronous produce, acks=all;
//
// Both clients batch alike: batches of up to 1 MiB (franz-go's default;
// pulsar-client-go's is 128 KiB) or 1000 messages, 10 ms linger, 10000
// messages in flight, no compression.
//   - log: the node's Broker.StartProduce with batches of 1000 one-KiB
//     records, as many in flight, no network and no protocol: the storage
//     limit both paths share.
//
// Each reports msgs/s, MB/s and the p50/p99 latency from handing a message
// to the client to its acknowledgement. Durability is the default (fsync
// before acknowledging, shared by concurrent appends).
func BenchmarkProduce1KiB(b *testing.B) {
	// Each measurement gets a fresh node, so none pays for the compactions
	// of the data another one wrote.
	fresh := func(b *testing.B) (*testcluster.Node, func()) {
		c := testcluster.Start(b)
		return c.Node(0), c.Close // closed before the data directory is removed
	}
	// Incompressible, and neither client compresses: the figures compare
	// protocol and storage paths, not codecs.
	payload := make([]byte, 1024)
	for i := range payload {
		payload[i] = byte(rand.Uint32())
	}
	b.Run("pulsar", func(b *testing.B) {
		n, stop := fresh(b)
		defer stop()
		cl, err := pulsar.NewClient(pulsar.ClientOptions{URL: n.PulsarURL(), Logger: clientLogger(b)})
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		topic := newTopic(b, "bench-pulsar")
		p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, MaxPendingMessages: 10000, BatchingMaxSize: 1 << 20, BatchingMaxMessages: 1000})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		lat := newLatencies(b.N)
		b.SetBytes(int64(len(payload)))
		b.ResetTimer()
		start := time.Now()
		var wg sync.WaitGroup
		wg.Add(b.N)
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: payload}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				if err != nil {
					b.Error(err)
				}
				lat.add(time.Since(t0))
				wg.Done()
			})
		}
		wg.Wait()
		lat.report(b, time.Since(start))
	})
	b.Run("kafka", func(b *testing.B) {
		n, stop := fresh(b)
		defer stop()
		conn, err := net.DialTimeout("tcp", n.KafkaAddr(), time.Second)
		if err != nil {
			b.Skipf("no Kafka listener on %s in this build (%v): the Kafka half of the comparison needs the Kafka front end", n.KafkaAddr(), err)
		}
		conn.Close()
		topic := fmt.Sprintf("bench-kafka-%d", time.Now().UnixNano())
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.DefaultProduceTopic(topic),
			kgo.AllowAutoTopicCreation(), kgo.MaxBufferedRecords(10000), kgo.ProducerLinger(10*time.Millisecond),
			kgo.ProducerBatchCompression(kgo.NoCompression()))
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		// Create the topic before timing.
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: payload}).FirstErr(); err != nil {
			b.Skipf("the Kafka listener does not accept produce: %v", err)
		}
		lat := newLatencies(b.N)
		b.SetBytes(int64(len(payload)))
		b.ResetTimer()
		start := time.Now()
		var wg sync.WaitGroup
		wg.Add(b.N)
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			cl.Produce(context.Background(), &kgo.Record{Value: payload}, func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
				lat.add(time.Since(t0))
				wg.Done()
			})
		}
		wg.Wait()
		lat.report(b, time.Since(start))
	})
	b.Run("log", func(b *testing.B) {
		n, stop := fresh(b)
		defer stop()
		topic := newTopic(b, "bench-log")
		createPulsarTopic(b, n, topic, 0)
		name, _ := protocols.ParseTopicName(topic, "")
		part := protocols.Partition{Topic: name, Index: -1}
		const per = 1000 // the clients' batch size
		msgs := make([]protocols.Message, per)
		for i := range msgs {
			msgs[i] = protocols.Message{Value: payload, Timestamp: time.Now().UnixMilli()}
		}
		batch, err := protocols.AppendBatch(nil, protocols.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, msgs, nil)
		if err != nil {
			b.Fatal(err)
		}
		batches := (b.N + per - 1) / per
		lat := newLatencies(batches * per)
		b.SetBytes(int64(len(payload)))
		b.ResetTimer()
		start := time.Now()
		// As many batches in flight as the Pulsar client keeps (10000
		// pending messages).
		sem := make(chan struct{}, 10000/per)
		var wg sync.WaitGroup
		for i := 0; i < batches; i++ {
			sem <- struct{}{}
			wg.Add(1)
			t0 := time.Now()
			pp, err := n.Proxy().StartProduce(context.Background(), part, protocols.ProduceRequest{Batch: batch})
			if err != nil {
				b.Fatal(err)
			}
			go func() {
				defer wg.Done()
				if _, err := pp.Wait(); err != nil {
					b.Error(err)
				}
				d := time.Since(t0)
				for j := 0; j < per; j++ {
					lat.add(d)
				}
				<-sem
			}()
		}
		wg.Wait()
		lat.report(b, time.Since(start))
	})
}

// latencies collects per-message latencies.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func newLatencies(n int) *latencies { return &latencies{d: make([]time.Duration, 0, n)} }

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) report(b *testing.B, elapsed time.Duration) {
	b.StopTimer()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return
	}
	slices.Sort(l.d)
	q := func(p float64) float64 { return float64(l.d[int(p*float64(len(l.d)-1))].Microseconds()) / 1000 }
	b.ReportMetric(float64(len(l.d))/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(q(0.50), "p50_ms")
	b.ReportMetric(q(0.99), "p99_ms")
}
