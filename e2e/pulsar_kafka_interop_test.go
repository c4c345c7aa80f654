package e2e

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ternmq/tern/internal/testcluster"
)

// Interop between real clients of both protocols on one topic: the Kafka
// key is the Pulsar partition key, the value the payload, headers the
// properties, the record timestamp the event time; the Pulsar publish time
// is the append time.

// TestPulsarInteropFranzToPulsar: franz-go produces, a Pulsar consumer reads.
func TestPulsarInteropFranzToPulsar(t *testing.T) {
	c := testcluster.Start(t)
	n := c.Node(0)
	topic := fmt.Sprintf("franz-to-pulsar-%d", time.Now().UnixNano()%1e6)
	createTopic(t, n.KafkaAddr(), topic, 1, nil)
	cl := newClient(t, n)
	cons := mustSubscribe(t, cl, pulsar.ConsumerOptions{Topic: "persistent://public/default/" + topic, SubscriptionName: "s",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	kc := kgoClient(t, n.KafkaAddr(), kgo.DefaultProduceTopic(topic))
	ts := time.UnixMilli(1_650_000_000_000)
	const total = 20
	for i := 0; i < total; i++ {
		r := &kgo.Record{Key: []byte(fmt.Sprint("key-", i)), Value: []byte(fmt.Sprint("value-", i)), Timestamp: ts.Add(time.Duration(i) * time.Second),
			Headers: []kgo.RecordHeader{{Key: "source", Value: []byte("kafka")}, {Key: "i", Value: []byte(strconv.Itoa(i))}}}
		kc.Produce(context.Background(), r, nil)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := kc.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Minute)
	for i, m := range receiveN(t, cons, total, true) {
		if m.Key() != fmt.Sprint("key-", i) || string(m.Payload()) != fmt.Sprint("value-", i) ||
			m.Properties()["source"] != "kafka" || m.Properties()["i"] != strconv.Itoa(i) ||
			!m.EventTime().Equal(ts.Add(time.Duration(i)*time.Second)) {
			t.Fatalf("message %d: key %q payload %q properties %v event time %v", i, m.Key(), m.Payload(), m.Properties(), m.EventTime())
		}
		if m.PublishTime().Before(before) {
			t.Fatalf("message %d: publish time %v is not the append time", i, m.PublishTime())
		}
	}
}

// TestPulsarInteropPulsarToFranz: a Pulsar producer writes to a
// non-partitioned topic, which Kafka clients see as a topic with one
// partition; franz-go reads it.
func TestPulsarInteropPulsarToFranz(t *testing.T) {
	c := testcluster.Start(t)
	n := c.Node(0)
	local := fmt.Sprintf("pulsar-to-franz-%d", time.Now().UnixNano()%1e6)
	cl := newClient(t, n)
	p := mustProducer(t, cl, pulsar.ProducerOptions{Topic: "persistent://public/default/" + local, BatchingMaxMessages: 4, CompressionType: pulsar.LZ4})
	et := time.UnixMilli(1_600_000_000_000)
	const total = 12
	sendAsyncAll(t, p, total, func(i int) *pulsar.ProducerMessage {
		return &pulsar.ProducerMessage{Key: fmt.Sprint("k", i), Payload: []byte(fmt.Sprint("v", i)),
			Properties: map[string]string{"source": "pulsar"}, EventTime: et.Add(time.Duration(i) * time.Millisecond)}
	})
	kc := kgoClient(t, n.KafkaAddr(), kgo.ConsumeTopics(local), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []*kgo.Record
	deadline := time.Now().Add(20 * time.Second)
	for len(got) < total && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		fs := kc.PollFetches(ctx)
		cancel()
		for _, e := range fs.Errors() {
			if e.Err != context.DeadlineExceeded {
				t.Fatalf("fetch: %v", e.Err)
			}
		}
		got = append(got, fs.Records()...)
	}
	if len(got) != total {
		t.Fatalf("franz-go read %d records of %d", len(got), total)
	}
	for i, r := range got {
		if string(r.Key) != fmt.Sprint("k", i) || string(r.Value) != fmt.Sprint("v", i) || r.Offset != int64(i) ||
			!r.Timestamp.Equal(et.Add(time.Duration(i)*time.Millisecond)) ||
			len(r.Headers) != 1 || r.Headers[0].Key != "source" || string(r.Headers[0].Value) != "pulsar" {
			t.Fatalf("record %d: key %q value %q offset %d timestamp %v headers %v", i, r.Key, r.Value, r.Offset, r.Timestamp, r.Headers)
		}
	}
}

// TestPulsarInteropKcat: kcat (librdkafka) produces with a key and headers
// for a Pulsar consumer, and consumes what a Pulsar producer wrote with
// key, headers and timestamp intact.
func TestPulsarInteropKcat(t *testing.T) {
	bin := kcatPath(t)
	c := testcluster.Start(t)
	n := c.Node(0)
	addr := n.KafkaAddr()
	cl := newClient(t, n)

	k2p := fmt.Sprintf("kcat-to-pulsar-%d", time.Now().UnixNano()%1e6)
	createTopic(t, addr, k2p, 1, nil)
	cons := mustSubscribe(t, cl, pulsar.ConsumerOptions{Topic: "persistent://public/default/" + k2p, SubscriptionName: "s",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	var in bytes.Buffer
	for i := 0; i < 5; i++ {
		fmt.Fprintf(&in, "key%d\tvalue%d\n", i, i)
	}
	runKcat(t, bin, in.Bytes(), "-b", addr, "-P", "-t", k2p, "-K", "\t", "-H", "via=kcat", "-X", "linger.ms=5")
	start := time.Now().Add(-time.Minute)
	for i, m := range receiveN(t, cons, 5, true) {
		if m.Key() != fmt.Sprint("key", i) || string(m.Payload()) != fmt.Sprint("value", i) || m.Properties()["via"] != "kcat" ||
			m.EventTime().Before(start) {
			t.Fatalf("message %d from kcat: key %q payload %q properties %v event time %v", i, m.Key(), m.Payload(), m.Properties(), m.EventTime())
		}
	}

	p2k := fmt.Sprintf("pulsar-to-kcat-%d", time.Now().UnixNano()%1e6)
	p := mustProducer(t, cl, pulsar.ProducerOptions{Topic: "persistent://public/default/" + p2k, DisableBatching: true})
	et := time.UnixMilli(1_600_000_000_000)
	for i := 0; i < 5; i++ {
		send(t, p, &pulsar.ProducerMessage{Key: fmt.Sprint("pk", i), Payload: []byte(fmt.Sprint("pv", i)),
			Properties: map[string]string{"from": "pulsar"}, EventTime: et.Add(time.Duration(i) * time.Second)})
	}
	out := runKcat(t, bin, nil, "-b", addr, "-C", "-t", p2k, "-o", "beginning", "-c", "5", "-e",
		"-f", "%k|%s|%h|%T\n")
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 5 {
		t.Fatalf("kcat read %d lines:\n%s", len(lines), out)
	}
	for i, line := range lines {
		want := fmt.Sprintf("pk%d|pv%d|from=pulsar|%d", i, i, et.Add(time.Duration(i)*time.Second).UnixMilli())
		if line != want {
			t.Fatalf("kcat line %d: %q, want %q", i, line, want)
		}
	}
}
