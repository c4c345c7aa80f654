package e2e

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ternmq/tern/internal/testcluster"
)

// Interop through Pulsar's WebSocket API: what a WebSocket producer writes
// reads back the same through Kafka and Pulsar clients, and the reverse:
// keys, payloads, properties (headers) and event times (record
// timestamps) intact.

// TestWebSocketToKafkaAndPulsar: a WebSocket producer writes to a topic
// created through Kafka; franz-go and a Pulsar consumer read it.
func TestWebSocketToKafkaAndPulsar(t *testing.T) {
	n := testcluster.Start(t).Node(0)
	topic := fmt.Sprintf("ws-out-%d", time.Now().UnixNano()%1e6)
	createTopic(t, n.KafkaAddr(), topic, 1, nil)
	cl := newClient(t, n)
	pcons := mustSubscribe(t, cl, pulsar.ConsumerOptions{Topic: "persistent://public/default/" + topic, SubscriptionName: "s",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	prod := wsDial(t, n, "/ws/v2/producer/persistent/public/default/"+topic)
	et := time.Date(2024, 3, 1, 10, 0, 0, 0, time.UTC)
	const total = 10
	for i := range total {
		prod.produce(t, map[string]any{
			"payload": b64s(fmt.Sprint("value-", i)), "key": fmt.Sprint("key-", i),
			"properties": map[string]string{"source": "websocket", "i": strconv.Itoa(i)},
			"eventTime":  et.Add(time.Duration(i) * time.Second).Format(time.RFC3339Nano),
		})
	}
	kc := kgoClient(t, n.KafkaAddr(), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var recs []*kgo.Record
	deadline := time.Now().Add(20 * time.Second)
	for len(recs) < total && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		fs := kc.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
	}
	if len(recs) != total {
		t.Fatalf("franz-go read %d records", len(recs))
	}
	for i, r := range recs {
		hs := map[string]string{}
		for _, h := range r.Headers {
			hs[h.Key] = string(h.Value)
		}
		if string(r.Key) != fmt.Sprint("key-", i) || string(r.Value) != fmt.Sprint("value-", i) ||
			hs["source"] != "websocket" || hs["i"] != strconv.Itoa(i) || !r.Timestamp.Equal(et.Add(time.Duration(i)*time.Second)) {
			t.Fatalf("record %d: key %q value %q headers %v timestamp %v", i, r.Key, r.Value, hs, r.Timestamp)
		}
	}
	for i, m := range receiveN(t, pcons, total, true) {
		if m.Key() != fmt.Sprint("key-", i) || string(m.Payload()) != fmt.Sprint("value-", i) ||
			m.Properties()["source"] != "websocket" || !m.EventTime().Equal(et.Add(time.Duration(i)*time.Second)) {
			t.Fatalf("pulsar message %d: key %q payload %q properties %v event time %v", i, m.Key(), m.Payload(), m.Properties(), m.EventTime())
		}
	}
}

// TestKafkaAndPulsarToWebSocket: franz-go and a batching Pulsar producer
// write; a WebSocket consumer and a WebSocket reader read every message
// with its key, properties and event time.
func TestKafkaAndPulsarToWebSocket(t *testing.T) {
	n := testcluster.Start(t).Node(0)
	topic := fmt.Sprintf("ws-in-%d", time.Now().UnixNano()%1e6)
	createTopic(t, n.KafkaAddr(), topic, 1, nil)
	cons := wsDial(t, n, "/ws/v2/consumer/persistent/public/default/"+topic+"/ws-sub?subscriptionType=Shared")
	// The subscription exists once the upgrade is done; now produce.
	kc := kgoClient(t, n.KafkaAddr(), kgo.DefaultProduceTopic(topic))
	ts := time.UnixMilli(1_700_000_000_000)
	for i := range 5 {
		kc.Produce(context.Background(), &kgo.Record{Key: []byte(fmt.Sprint("kk", i)), Value: []byte(fmt.Sprint("kafka-", i)),
			Timestamp: ts.Add(time.Duration(i) * time.Millisecond), Headers: []kgo.RecordHeader{{Key: "from", Value: []byte("kafka")}}}, nil)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := kc.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, n)
	p := mustProducer(t, cl, pulsar.ProducerOptions{Topic: "persistent://public/default/" + topic, BatchingMaxMessages: 5})
	sendAsyncAll(t, p, 5, func(i int) *pulsar.ProducerMessage {
		return &pulsar.ProducerMessage{Key: fmt.Sprint("pk", i), Payload: []byte(fmt.Sprint("pulsar-", i)),
			Properties: map[string]string{"from": "pulsar"}, EventTime: ts.Add(time.Duration(i) * time.Second)}
	})
	check := func(who string, ms []wsMessage) {
		t.Helper()
		for i, m := range ms {
			src, j, want := "kafka", i, ts.Add(time.Duration(i)*time.Millisecond)
			key := fmt.Sprint("kk", i)
			if i >= 5 {
				src, j, want, key = "pulsar", i-5, ts.Add(time.Duration(i-5)*time.Second), fmt.Sprint("pk", i-5)
			}
			et, err := time.Parse(time.RFC3339Nano, m.EventTime)
			if m.data(t) != fmt.Sprint(src, "-", j) || m.Key == nil || *m.Key != key || m.Properties["from"] != src || err != nil || !et.Equal(want) {
				t.Fatalf("%s message %d: %+v (%s)", who, i, m, m.data(t))
			}
		}
	}
	var got []wsMessage
	for range 10 {
		got = append(got, cons.receiveAck(t))
	}
	check("consumer", got)
	reader := wsDial(t, n, "/ws/v2/reader/persistent/public/default/"+topic+"?messageId=earliest")
	got = got[:0]
	for range 10 {
		got = append(got, reader.receiveAck(t))
	}
	check("reader", got)
}
