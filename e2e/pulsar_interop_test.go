package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/ternmq/tern/internal/testcluster"
	"github.com/ternmq/tern/protocols"
)

// The Kafka half of these tests writes and reads through the node's Broker
// interface (protocols.Log), the same calls the Kafka front end makes with
// the record batches Kafka clients send, byte for byte.

// kafkaProduce appends one Kafka record batch to a partition.
func kafkaProduce(t testing.TB, n *testcluster.Node, p protocols.Partition, codec protocols.Codec, msgs []protocols.Message) {
	t.Helper()
	batch, err := protocols.AppendBatch(nil, protocols.BatchSpec{Codec: codec, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, msgs, &protocols.Compressor{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Proxy().Produce(context.Background(), p, protocols.ProduceRequest{Batch: batch}); err != nil {
		t.Fatal(err)
	}
}

// TestPulsarInteropKafkaToPulsar: records written the Kafka way (plain and
// compressed batches, keys, headers, timestamps, a null value) read back
// through a Pulsar consumer with key = partition key, value = payload,
// headers = properties, record timestamp = event time, append time =
// publish time.
func TestPulsarInteropKafkaToPulsar(t *testing.T) {
	c := testcluster.Start(t)
	n := c.Node(0)
	topic := newTopic(t, "k2p")
	createPulsarTopic(t, n, topic, 1) // Kafka topics are partitioned topics
	name, _ := protocols.ParseTopicName(topic, "")
	part := protocols.Partition{Topic: name, Index: 0}
	cl := newClient(t, n)
	cons := mustSubscribe(t, cl, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})

	ts := int64(1_650_000_000_000)
	var want []protocols.Message
	for _, codec := range []protocols.Codec{protocols.CodecNone, protocols.CodecGzip, protocols.CodecSnappy, protocols.CodecLZ4, protocols.CodecZstd} {
		var batch []protocols.Message
		for i := 0; i < 3; i++ {
			m := protocols.Message{
				Key:       []byte(fmt.Sprintf("%v-key-%d", codec, i)),
				Value:     []byte(fmt.Sprintf("%v-value-%d", codec, i)),
				Timestamp: ts + int64(len(want)),
				Headers:   []protocols.Header{{Key: "codec", Value: []byte(codec.String())}, {Key: "i", Value: []byte(fmt.Sprint(i))}},
			}
			batch = append(batch, m)
			want = append(want, m)
		}
		kafkaProduce(t, n, part, codec, batch)
	}
	tomb := protocols.Message{Key: []byte("gone"), Value: nil, Timestamp: ts + 100}
	kafkaProduce(t, n, part, protocols.CodecNone, []protocols.Message{tomb})
	want = append(want, tomb)

	before := time.Now().Add(-time.Minute)
	for i, m := range receiveN(t, cons, len(want), true) {
		w := want[i]
		if m.Key() != string(w.Key) || string(m.Payload()) != string(w.Value) || !m.EventTime().Equal(time.UnixMilli(w.Timestamp)) {
			t.Fatalf("message %d: key %q payload %q event %v; want %q %q %v", i, m.Key(), m.Payload(), m.EventTime(), w.Key, w.Value, time.UnixMilli(w.Timestamp))
		}
		for _, h := range w.Headers {
			if m.Properties()[h.Key] != string(h.Value) {
				t.Fatalf("message %d: properties %v, want header %s=%s", i, m.Properties(), h.Key, h.Value)
			}
		}
		if m.PublishTime().Before(before) || m.PublishTime().After(time.Now().Add(time.Second)) {
			t.Fatalf("message %d: publish time %v is not the append time", i, m.PublishTime())
		}
		if m.Index() == nil || *m.Index() != uint64(i) {
			t.Fatalf("message %d: broker index %v, want the offset %d", i, m.Index(), i)
		}
	}
}

// TestPulsarInteropPulsarToKafka: messages a Pulsar producer sends (batched
// and not, compressed, with and without event time) read back the Kafka way
// with key, value, headers and timestamps intact.
func TestPulsarInteropPulsarToKafka(t *testing.T) {
	c := testcluster.Start(t)
	n := c.Node(0)
	topic := newTopic(t, "p2k")
	createPulsarTopic(t, n, topic, 1)
	cl := newClient(t, n)
	p := mustProducer(t, cl, pulsar.ProducerOptions{Topic: topic, CompressionType: pulsar.ZSTD, BatchingMaxMessages: 5})
	et := time.UnixMilli(1_600_000_000_000)
	start := time.Now().Add(-time.Second).UnixMilli()
	sendAsyncAll(t, p, 10, func(i int) *pulsar.ProducerMessage {
		m := &pulsar.ProducerMessage{Key: fmt.Sprint("k", i), Payload: []byte(fmt.Sprint("v", i)), Properties: map[string]string{"n": fmt.Sprint(i)}}
		if i%2 == 0 {
			m.EventTime = et.Add(time.Duration(i) * time.Second)
		}
		return m
	})
	end := time.Now().Add(time.Second).UnixMilli()
	var got []protocols.Message
	for _, e := range fetchAll(t, n, topic+"-partition-0") {
		msgs, err := protocols.Records(e.Batch, e.Header, &protocols.Decompressor{})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, msgs...)
	}
	if len(got) != 10 {
		t.Fatalf("%d records, want 10", len(got))
	}
	for i, m := range got {
		if string(m.Key) != fmt.Sprint("k", i) || string(m.Value) != fmt.Sprint("v", i) || m.Offset != int64(i) ||
			len(m.Headers) != 1 || m.Headers[0].Key != "n" || string(m.Headers[0].Value) != fmt.Sprint(i) {
			t.Fatalf("record %d: %+v", i, m)
		}
		if i%2 == 0 && m.Timestamp != et.Add(time.Duration(i)*time.Second).UnixMilli() {
			t.Fatalf("record %d: timestamp %d, want the event time", i, m.Timestamp)
		}
		if i%2 == 1 && (m.Timestamp < start || m.Timestamp > end) {
			t.Fatalf("record %d without event time: timestamp %d is not the publish time", i, m.Timestamp)
		}
	}
}
