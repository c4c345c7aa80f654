package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/ternmq/tern/internal/testcluster"
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
