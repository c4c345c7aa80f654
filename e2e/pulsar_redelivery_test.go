package e2e

import (
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/ternmq/tern/internal/testcluster"
)

// TestPulsarNackDeadLetter: a message that is always negatively
// acknowledged comes back with a growing redelivery count and, after
// MaxDeliveries, lands in the dead-letter topic; the others are delivered
// once.
func TestPulsarNackDeadLetter(t *testing.T) {
	c := testcluster.Start(t)
	cl := newClient(t, c.Node(0))
	topic := newTopic(t, "nack")
	dlq := topic + "-DLQ"
	dead := mustSubscribe(t, cl, pulsar.ConsumerOptions{Topic: dlq, SubscriptionName: "dlq-reader", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	cons := mustSubscribe(t, cl, pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
		NackRedeliveryDelay: 50 * time.Millisecond,
		DLQ:                 &pulsar.DLQPolicy{MaxDeliveries: 3, DeadLetterTopic: dlq},
	})
	p := mustProducer(t, cl, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	for _, s := range []string{"a", "poison", "b"} {
		send(t, p, &pulsar.ProducerMessage{Payload: []byte(s), Properties: map[string]string{"name": s}})
	}
	var counts []uint32
	others := map[string]int{}
	deadline := time.Now().Add(20 * time.Second)
	for len(counts) < 3 || others["a"] == 0 || others["b"] == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("poison deliveries %v, others %v", counts, others)
		}
		m := receive(t, cons, 10*time.Second)
		if string(m.Payload()) == "poison" {
			counts = append(counts, m.RedeliveryCount())
			cons.Nack(m)
			continue
		}
		others[string(m.Payload())]++
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	for i, n := range counts {
		if n != uint32(i) {
			t.Fatalf("redelivery counts %v; want 0, 1, 2", counts)
		}
	}
	m := receive(t, dead, 20*time.Second)
	if string(m.Payload()) != "poison" || m.Properties()["name"] != "poison" {
		t.Fatalf("dead letter %q %v", m.Payload(), m.Properties())
	}
	expectNone(t, cons, 500*time.Millisecond)
	if others["a"] != 1 || others["b"] != 1 {
		t.Fatalf("acknowledged messages came back: %v", others)
	}
}

// TestPulsarAckTimeout: with the ackTimeoutMillis consumer property the
// broker redelivers what the consumer leaves unacknowledged, counting a
// redelivery, and stops once it is acknowledged.
func TestPulsarAckTimeout(t *testing.T) {
	c := testcluster.Start(t)
	cl := newClient(t, c.Node(0))
	topic := newTopic(t, "acktimeout")
	cons := mustSubscribe(t, cl, pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
		Properties:      map[string]string{"ackTimeoutMillis": "300"},
		AckWithResponse: true,
	})
	p := mustProducer(t, cl, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	send(t, p, &pulsar.ProducerMessage{Payload: []byte("slow")})
	start := time.Now()
	m := receive(t, cons, 10*time.Second)
	if m.RedeliveryCount() != 0 {
		t.Fatalf("first delivery has redelivery count %d", m.RedeliveryCount())
	}
	m = receive(t, cons, 10*time.Second)
	if string(m.Payload()) != "slow" || m.RedeliveryCount() != 1 {
		t.Fatalf("after the timeout: %q with count %d", m.Payload(), m.RedeliveryCount())
	}
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Fatalf("redelivered after %v; the timeout is 300ms", waited)
	}
	if err := cons.Ack(m); err != nil {
		t.Fatal(err)
	}
	expectNone(t, cons, 800*time.Millisecond)
}
