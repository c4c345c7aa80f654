package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ternmq/tern/configs"
	"github.com/ternmq/tern/internal/testcluster"
)

// quotaNode is a node whose retention pass (which applies backlog quotas)
// runs every 100 ms.
func quotaNode(t *testing.T) *testcluster.Node {
	return testcluster.Start(t, testcluster.Spec{Tweak: func(cfg *configs.Node) {
		cfg.Retention.CheckInterval = configs.Duration(100 * time.Millisecond)
	}}).Node(0)
}

// fillBacklog subscribes "slow", closes it and sends count 1 KiB messages
// that it leaves unacknowledged.
func fillBacklog(t *testing.T, cl pulsar.Client, topic string, count int) {
	t.Helper()
	sub := mustSubscribe(t, cl, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "slow"})
	sub.Close()
	p := mustProducer(t, cl, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	for i := range count {
		send(t, p, &pulsar.ProducerMessage{Payload: append(fmt.Appendf(nil, "m-%03d-", i), make([]byte, 1024)...)})
	}
	p.Close()
}

// refusedProducer waits until creating a producer on topic fails and
// returns the error.
func refusedProducer(t *testing.T, cl pulsar.Client, topic string) error {
	t.Helper()
	var perr error
	testcluster.WaitFor(t, 15*time.Second, "a new producer refused by the quota", func() bool {
		p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, SendTimeout: 2 * time.Second})
		if err == nil {
			p.Close()
			return false
		}
		perr = err
		return true
	})
	return perr
}

// TestPulsarBacklogQuotaProducerException sets a destination_storage quota
// with producer_exception below a subscription's backlog: new Pulsar
// producers are refused with ProducerBlockedQuotaExceededException and a
// Kafka producer with POLICY_VIOLATION; once the subscription acknowledges,
// producers are accepted again.
func TestPulsarBacklogQuotaProducerException(t *testing.T) {
	n := quotaNode(t)
	a := newAdmin(t, n)
	topic := "persistent://public/default/quota-exception"
	cl := newClient(t, n)
	fillBacklog(t, cl, topic, 50)

	must(t, a.Namespaces().SetBacklogQuota("public/default",
		utils.NewBacklogQuota(20<<10, -1, utils.ProducerException), utils.DestinationStorage))
	perr := refusedProducer(t, cl, topic)
	if !strings.Contains(perr.Error(), "ProducerBlockedQuotaExceededException") || !strings.Contains(perr.Error(), "destination_storage") {
		t.Fatalf("producer refused with %q, want ProducerBlockedQuotaExceededException naming the quota", perr)
	}
	kc := kgoClient(t, n.KafkaAddr(), kgo.RecordRetries(1))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := kc.ProduceSync(ctx, &kgo.Record{Topic: "quota-exception", Value: []byte("from kafka")}).FirstErr()
	if !errors.Is(err, kerr.PolicyViolation) {
		t.Fatalf("Kafka produce into the blocked topic: %v, want POLICY_VIOLATION", err)
	}
	if got := len(fetchAll(t, n, topic)); got != 50 {
		t.Fatalf("the log holds %d entries, want the 50 written before the quota", got)
	}

	cons := mustSubscribe(t, cl, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "slow"})
	receiveN(t, cons, 50, true)
	testcluster.WaitFor(t, 15*time.Second, "producers accepted once the backlog is acknowledged", func() bool {
		p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic})
		if err != nil {
			return false
		}
		defer p.Close()
		_, err = p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("after")})
		return err == nil
	})
}

// TestPulsarBacklogQuotaEviction sets a destination_storage quota with
// consumer_backlog_eviction: the slow subscription loses its oldest
// backlog until it fits, keeps the newest, and producers are never refused.
func TestPulsarBacklogQuotaEviction(t *testing.T) {
	n := quotaNode(t)
	a := newAdmin(t, n)
	topic := "persistent://public/default/quota-eviction"
	tn, err := utils.GetTopicName(topic)
	must(t, err)
	cl := newClient(t, n)
	fillBacklog(t, cl, topic, 50)

	must(t, a.Namespaces().SetBacklogQuota("public/default",
		utils.NewBacklogQuota(20<<10, -1, utils.ConsumerBacklogEviction), utils.DestinationStorage))
	var backlog int64
	testcluster.WaitFor(t, 15*time.Second, "the backlog evicted down to the quota", func() bool {
		st, err := a.Topics().GetStats(*tn)
		backlog = st.Subscriptions["slow"].MsgBacklog
		return err == nil && backlog < 50
	})
	// 20 KiB holds at most 19 messages of 1 KiB and their framing.
	if backlog == 0 || backlog > 19 {
		t.Fatalf("backlog after eviction is %d messages, want between 1 and 19", backlog)
	}
	p := mustProducer(t, cl, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	send(t, p, &pulsar.ProducerMessage{Payload: []byte("after")})
	cons := mustSubscribe(t, cl, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "slow"})
	first := receive(t, cons, 10*time.Second)
	if want := fmt.Sprintf("m-%03d-", 50-backlog); !strings.HasPrefix(string(first.Payload()), want) {
		t.Fatalf("after eviction the subscription starts at %.6q, want the oldest kept message %q", first.Payload(), want)
	}
}

// TestPulsarBacklogQuotaMessageAgeHold sets a message_age quota of one
// second with producer_request_hold: once the unacknowledged messages are
// older, a new producer is refused with ProducerBlockedQuotaExceededError
// (the code on which Pulsar clients hold their messages and retry), and the
// log keeps everything.
func TestPulsarBacklogQuotaMessageAgeHold(t *testing.T) {
	n := quotaNode(t)
	a := newAdmin(t, n)
	topic := "persistent://public/default/quota-age"
	cl := newClient(t, n)
	fillBacklog(t, cl, topic, 5)
	must(t, a.Namespaces().SetBacklogQuota("public/default",
		utils.NewBacklogQuota(-1, 1, utils.ProducerRequestHold), utils.MessageAge))
	perr := refusedProducer(t, cl, topic)
	if !strings.Contains(perr.Error(), "ProducerBlockedQuotaExceededError") || !strings.Contains(perr.Error(), "message_age") {
		t.Fatalf("producer refused with %q, want ProducerBlockedQuotaExceededError naming the quota", perr)
	}
	if got := len(fetchAll(t, n, topic)); got != 5 {
		t.Fatalf("the log holds %d entries, want 5", got)
	}
}
