package e2e

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/ternmq/tern/internal/testcluster"
	"github.com/ternmq/tern/protocols"
)

// TestPulsarProduceConsumeBasic produces with batching off and on and
// consumes everything back in order with keys, properties and event times.
func TestPulsarProduceConsumeBasic(t *testing.T) {
	c := testcluster.Start(t)
	cl := newClient(t, c.Node(0))
	for _, batching := range []bool{false, true} {
		t.Run(fmt.Sprintf("batching=%v", batching), func(t *testing.T) {
			topic := newTopic(t, "basic")
			cons := mustSubscribe(t, cl, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
			p := mustProducer(t, cl, pulsar.ProducerOptions{Topic: topic, DisableBatching: !batching})
			et := time.UnixMilli(1_700_000_000_000)
			n := 50
			sendAsyncAll(t, p, n, func(i int) *pulsar.ProducerMessage {
				return &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("m%d", i)), Key: fmt.Sprintf("k%d", i%3),
					Properties: map[string]string{"i": fmt.Sprint(i)}, EventTime: et.Add(time.Duration(i) * time.Millisecond)}
			})
			ms := receiveN(t, cons, n, true)
			for i, m := range ms {
				if string(m.Payload()) != fmt.Sprintf("m%d", i) || m.Key() != fmt.Sprintf("k%d", i%3) ||
					m.Properties()["i"] != fmt.Sprint(i) || !m.EventTime().Equal(et.Add(time.Duration(i)*time.Millisecond)) {
					t.Fatalf("message %d: payload %q key %q props %v event %v", i, m.Payload(), m.Key(), m.Properties(), m.EventTime())
				}
				if m.PublishTime().IsZero() || m.ProducerName() != p.Name() {
					t.Fatalf("message %d: publish time %v producer %q (want %q)", i, m.PublishTime(), m.ProducerName(), p.Name())
				}
			}
			expectNone(t, cons, 300*time.Millisecond)
		})
	}
}

// TestPulsarCompressionTypes produces with every compression type, batching
// on and off, and reads everything back.
func TestPulsarCompressionTypes(t *testing.T) {
	c := testcluster.Start(t)
	cl := newClient(t, c.Node(0))
	types := map[string]pulsar.CompressionType{"none": pulsar.NoCompression, "lz4": pulsar.LZ4, "zlib": pulsar.ZLib, "zstd": pulsar.ZSTD, "snappy": pulsar.SNAPPY}
	stored := map[string]protocols.Codec{"none": protocols.CodecNone, "lz4": protocols.CodecLZ4, "zlib": protocols.CodecGzip, "zstd": protocols.CodecZstd, "snappy": protocols.CodecSnappy}
	for name, ct := range types {
		for _, batching := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/batching=%v", name, batching), func(t *testing.T) {
				topic := newTopic(t, "comp-"+name)
				cons := mustSubscribe(t, cl, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
				p := mustProducer(t, cl, pulsar.ProducerOptions{Topic: topic, DisableBatching: !batching, CompressionType: ct})
				n := 40
				body := func(i int) string { return fmt.Sprintf("%03d-%s", i, strings.Repeat("compressible ", 20+i)) }
				sendAsyncAll(t, p, n, func(i int) *pulsar.ProducerMessage {
					return &pulsar.ProducerMessage{Payload: []byte(body(i)), Key: fmt.Sprint(i)}
				})
				ms := receiveN(t, cons, n, true)
				for i, m := range ms {
					if string(m.Payload()) != body(i) || m.Key() != fmt.Sprint(i) {
						t.Fatalf("message %d: %.20q key %q", i, m.Payload(), m.Key())
					}
				}
				// The log keeps the producer's compression family.
				for _, e := range fetchAll(t, c.Node(0), topic) {
					if e.Header.Codec() != stored[name] {
						t.Fatalf("entry stored with codec %v, want %v", e.Header.Codec(), stored[name])
					}
				}
			})
		}
	}
}

// TestPulsarChunkedMessages sends messages larger than a chunk, with and
// without compression, and reads them back whole.
func TestPulsarChunkedMessages(t *testing.T) {
	c := testcluster.Start(t)
	cl := newClient(t, c.Node(0))
	for _, ct := range []pulsar.CompressionType{pulsar.NoCompression, pulsar.LZ4} {
		t.Run(fmt.Sprint(ct), func(t *testing.T) {
			topic := newTopic(t, "chunk")
			cons := mustSubscribe(t, cl, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
			p := mustProducer(t, cl, pulsar.ProducerOptions{Topic: topic, DisableBatching: true, EnableChunking: true, ChunkMaxMessageSize: 10_000, CompressionType: ct})
			r := rand.New(rand.NewPCG(1, uint64(ct)))
			var bodies [][]byte
			for i := 0; i < 3; i++ {
				b := make([]byte, 35_000+i*1000)
				for j := range b {
					b[j] = byte('a' + r.IntN(4))
				}
				bodies = append(bodies, b)
				send(t, p, &pulsar.ProducerMessage{Payload: b, Key: fmt.Sprint(i), Properties: map[string]string{"n": fmt.Sprint(i)}})
			}
			// Each message is cut into chunks (two or more even compressed),
			// each chunk its own entry.
			es := fetchAll(t, c.Node(0), topic)
			if len(es) < 6 {
				t.Fatalf("%d entries for three chunked messages", len(es))
			}
			for _, e := range es {
				if _, ok := protocols.Chunk(&e.Envelope); !ok {
					t.Fatalf("entry at %d is not marked as a chunk", e.Header.BaseOffset)
				}
			}
			for i := range bodies {
				m := receive(t, cons, 20*time.Second)
				if !bytes.Equal(m.Payload(), bodies[i]) || m.Properties()["n"] != fmt.Sprint(i) {
					t.Fatalf("chunked message %d: %d bytes, props %v", i, len(m.Payload()), m.Properties())
				}
				if err := cons.Ack(m); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestPulsarLargeReceiverQueue: a consumer with 20000 permits is sent
// megabytes per wake-up, which the connection writes in 1 MiB pieces;
// every message still arrives whole and in order.
func TestPulsarLargeReceiverQueue(t *testing.T) {
	c := testcluster.Start(t)
	cl := newClient(t, c.Node(0))
	topic := newTopic(t, "bigqueue")
	p := mustProducer(t, cl, pulsar.ProducerOptions{Topic: topic, BatchingMaxMessages: 1000, BatchingMaxSize: 1 << 20, MaxPendingMessages: 10000})
	const n, size = 30000, 1000
	payload := func(i int) []byte {
		b := bytes.Repeat([]byte{byte(i)}, size)
		copy(b, fmt.Sprintf("m%d/", i))
		return b
	}
	sendAsyncAll(t, p, n, func(i int) *pulsar.ProducerMessage { return &pulsar.ProducerMessage{Payload: payload(i)} })
	cons := mustSubscribe(t, cl, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", ReceiverQueueSize: 20000,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	for i := 0; i < n; i++ {
		m := receive(t, cons, 20*time.Second)
		if !bytes.Equal(m.Payload(), payload(i)) {
			t.Fatalf("message %d: %q...", i, m.Payload()[:min(len(m.Payload()), 12)])
		}
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	expectNone(t, cons, 300*time.Millisecond)
}
