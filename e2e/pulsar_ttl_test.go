package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/ternmq/tern/configs"
	"github.com/ternmq/tern/internal/testcluster"
)

// TestPulsarMessageTTL sets a namespace's message TTL through pulsaradmin:
// what a durable subscription leaves unacknowledged past the TTL counts as
// acknowledged (its backlog drops to 0 and a consumer gets only newer
// messages), while the log keeps the entries for retention to remove.
func TestPulsarMessageTTL(t *testing.T) {
	c := testcluster.Start(t, testcluster.Spec{Tweak: func(cfg *configs.Node) {
		cfg.Retention.CheckInterval = configs.Duration(100 * time.Millisecond)
	}})
	n := c.Node(0)
	a := newAdmin(t, n)
	must(t, a.Namespaces().CreateNamespace("public/ttl"))
	topic := "persistent://public/ttl/expiring"
	tn, err := utils.GetTopicName(topic)
	must(t, err)

	cl := newClient(t, n)
	sub := mustSubscribe(t, cl, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "slow"})
	sub.Close()
	p := mustProducer(t, cl, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	for i := range 5 {
		send(t, p, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "old-%d", i)})
	}
	var st utils.TopicStats
	testcluster.WaitFor(t, 10*time.Second, "backlog of 5 before the TTL is set", func() bool {
		st, err = a.Topics().GetStats(*tn)
		return err == nil && st.Subscriptions["slow"].MsgBacklog == 5
	})

	must(t, a.Namespaces().SetNamespaceMessageTTL("public/ttl", 1))
	testcluster.WaitFor(t, 15*time.Second, "backlog expired by the TTL", func() bool {
		st, err = a.Topics().GetStats(*tn)
		return err == nil && st.Subscriptions["slow"].MsgBacklog == 0
	})
	if got := len(fetchAll(t, n, topic)); got != 5 {
		t.Fatalf("the log holds %d entries after expiry, want the 5 retention keeps", got)
	}

	send(t, p, &pulsar.ProducerMessage{Payload: []byte("new")})
	cons := mustSubscribe(t, cl, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "slow"})
	m := receive(t, cons, 10*time.Second)
	if string(m.Payload()) != "new" {
		t.Fatalf("after expiry the subscription delivered %q first, want the message produced after it", m.Payload())
	}
	must(t, cons.Ack(m))
}
