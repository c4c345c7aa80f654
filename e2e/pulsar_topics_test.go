package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/ternmq/tern/internal/testcluster"
	"github.com/ternmq/tern/protocols"
)

func createPulsarTopic(t testing.TB, n *testcluster.Node, topic string, partitions int) {
	t.Helper()
	name, err := protocols.ParseTopicName(topic, "public/default")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Proxy().CreateTopic(context.Background(), name, partitions, nil); err != nil {
		t.Fatal(err)
	}
}

// TestPulsarPartitionedTopic: a producer spreads messages over the
// partitions of a partitioned topic; a consumer of the topic gets them all,
// and Failover consumers split the partitions between them.
func TestPulsarPartitionedTopic(t *testing.T) {
	c := testcluster.Start(t)
	cl := newClient(t, c.Node(0))
	topic := newTopic(t, "parts")
	createPulsarTopic(t, c.Node(0), topic, 3)
	parts, err := cl.TopicPartitions(topic)
	if err != nil || len(parts) != 3 || parts[2] != topic+"-partition-2" {
		t.Fatalf("partitions %v %v", parts, err)
	}
	all := mustSubscribe(t, cl, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "all", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	fa := mustSubscribe(t, cl, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "fo", Type: pulsar.Failover, Name: "a", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	fb := mustSubscribe(t, cl, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "fo", Type: pulsar.Failover, Name: "b", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	p := mustProducer(t, cl, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	n := 60
	sendAsyncAll(t, p, n, func(i int) *pulsar.ProducerMessage { return &pulsar.ProducerMessage{Payload: []byte(fmt.Sprint(i))} })
	perPart := map[string]int{}
	for _, m := range receiveN(t, all, n, true) {
		perPart[m.Topic()]++
	}
	if len(perPart) != 3 {
		t.Fatalf("messages per partition: %v", perPart)
	}
	got := map[string]int{}
	for name, cons := range map[string]pulsar.Consumer{"a": fa, "b": fb} {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			m, err := cons.Receive(ctx)
			cancel()
			if err != nil {
				break
			}
			_ = cons.Ack(m)
			got[name]++
		}
	}
	if got["a"]+got["b"] != n || got["a"] == 0 || got["b"] == 0 {
		t.Fatalf("failover consumers of a 3-partition topic received %v", got)
	}
}

// TestPulsarRegexConsumer: a pattern consumer reads the matching topics of
// a namespace and discovers new ones.
func TestPulsarRegexConsumer(t *testing.T) {
	c := testcluster.Start(t)
	cl := newClient(t, c.Node(0))
	stem := strings.TrimPrefix(newTopic(t, "rx"), "persistent://public/default/")
	a, b := "persistent://public/default/"+stem+"-a", "persistent://public/default/"+stem+"-b"
	other := newTopic(t, "other")
	createPulsarTopic(t, c.Node(0), a, 0)
	createPulsarTopic(t, c.Node(0), b, 2)
	createPulsarTopic(t, c.Node(0), other, 0)
	cons := mustSubscribe(t, cl, pulsar.ConsumerOptions{
		TopicsPattern: "persistent://public/default/" + stem + "-.*", SubscriptionName: "s",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, AutoDiscoveryPeriod: 200 * time.Millisecond,
	})
	for _, topic := range []string{a, b, other} {
		p := mustProducer(t, cl, pulsar.ProducerOptions{Topic: topic})
		send(t, p, &pulsar.ProducerMessage{Payload: []byte(topic)})
	}
	got := map[string]bool{}
	for _, m := range receiveN(t, cons, 2, true) {
		got[string(m.Payload())] = true
	}
	if !got[a] || !got[b] {
		t.Fatalf("pattern consumer got %v", got)
	}
	expectNone(t, cons, 300*time.Millisecond)
	late := "persistent://public/default/" + stem + "-late"
	createPulsarTopic(t, c.Node(0), late, 0)
	p := mustProducer(t, cl, pulsar.ProducerOptions{Topic: late})
	send(t, p, &pulsar.ProducerMessage{Payload: []byte("late")})
	if m := receive(t, cons, 20*time.Second); string(m.Payload()) != "late" {
		t.Fatalf("after discovery: %q", m.Payload())
	}
}
