package e2e

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/ternmq/tern/internal/testcluster"
	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/proxy"
)

// enableDedup turns Pulsar producer deduplication on for public/default.
func enableDedup(t testing.TB, n *testcluster.Node) {
	t.Helper()
	on := true
	err := n.Proxy().UpdateNamespacePolicies(context.Background(), protocols.NamespaceName{Tenant: "public", Namespace: "default"},
		func(p *proxy.Policies) error { p.Deduplication = &on; return nil })
	if err != nil {
		t.Fatal(err)
	}
}

// countMessages is the number of messages stored in a topic.
func countMessages(t testing.TB, n *testcluster.Node, topic string) int {
	total := 0
	for _, e := range fetchAll(t, n, topic) {
		total += int(e.Header.NumRecords)
	}
	return total
}

// TestPulsarRestartRedelivery: across a node restart, acknowledged
// messages (batch-index acks inside batches) stay acknowledged and the
// others come back exactly.
func TestPulsarRestartRedelivery(t *testing.T) {
	c := testcluster.Start(t)
	n := c.Node(0)
	cl := newClient(t, n)
	topic := newTopic(t, "restart")
	cons := mustSubscribe(t, cl, pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
		EnableBatchIndexAcknowledgment: true, AckWithResponse: true,
	})
	p := mustProducer(t, cl, pulsar.ProducerOptions{Topic: topic, BatchingMaxMessages: 10})
	total := 100
	sendAsyncAll(t, p, total, func(i int) *pulsar.ProducerMessage { return &pulsar.ProducerMessage{Payload: []byte(strconv.Itoa(i))} })
	if es := fetchAll(t, n, topic); len(es) >= total {
		t.Fatalf("%d entries for %d messages: the producer did not batch", len(es), total)
	}
	for _, m := range receiveN(t, cons, total, false) {
		i, _ := strconv.Atoi(string(m.Payload()))
		if i%2 == 0 {
			if err := cons.Ack(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	n.Restart()
	got := map[int]int{}
	for len(got) < total/2 {
		m := receive(t, cons, 30*time.Second)
		i, _ := strconv.Atoi(string(m.Payload()))
		if i%2 == 0 {
			t.Fatalf("acknowledged message %d was redelivered after the restart", i)
		}
		got[i]++
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	for i, k := range got {
		if k != 1 {
			t.Fatalf("message %d redelivered %d times", i, k)
		}
	}
	expectNone(t, cons, 500*time.Millisecond)
}

// TestPulsarRestartDedup: with deduplication on, a producer resumes from
// its last persisted sequence id after reconnecting and after a restart,
// resends are answered without a second copy, and a stream of sends across
// a restart is stored exactly once.
func TestPulsarRestartDedup(t *testing.T) {
	c := testcluster.Start(t)
	n := c.Node(0)
	enableDedup(t, n)
	cl := newClient(t, n)
	topic := newTopic(t, "dedup")

	p1, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "fixed", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		send(t, p1, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprint(i))})
	}
	p1.Close()
	n.Restart()
	p2 := mustProducer(t, cl, pulsar.ProducerOptions{Topic: topic, Name: "fixed", DisableBatching: true})
	send(t, p2, &pulsar.ProducerMessage{Payload: []byte("10")})
	if last := p2.LastSequenceID(); last != 10 {
		t.Fatalf("after a restart the producer continued with sequence id %d, want 10", last)
	}
	// Resends of sequence ids already stored: receipts, no copies.
	for _, seq := range []int64{3, 9} {
		s := seq
		send(t, p2, &pulsar.ProducerMessage{Payload: []byte("again"), SequenceID: &s})
	}
	if got := countMessages(t, n, topic); got != 11 {
		t.Fatalf("%d messages stored after resends; want 11", got)
	}

	// A stream of asynchronous sends with a restart in the middle.
	stream := newTopic(t, "dedup-stream")
	ps := mustProducer(t, cl, pulsar.ProducerOptions{Topic: stream, Name: "streamer", BatchingMaxMessages: 20, SendTimeout: 60 * time.Second})
	const total = 3000
	var wg sync.WaitGroup
	var failed atomic.Int64
	wg.Add(total)
	restarted := make(chan struct{})
	go func() {
		for i := 0; i < total; i++ {
			if i == total/2 {
				<-restarted
			}
			ps.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: []byte(strconv.Itoa(i))}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				if err != nil {
					failed.Add(1)
				}
				wg.Done()
			})
			if i == total/2-1 {
				go func() { n.Restart(); close(restarted) }()
			}
		}
	}()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		t.Fatal("sends across the restart did not all complete")
	}
	if f := failed.Load(); f != 0 {
		t.Fatalf("%d sends failed", f)
	}
	seen := map[int]int{}
	for _, e := range fetchAll(t, n, stream) {
		msgs, err := protocols.Records(e.Batch, e.Header, &protocols.Decompressor{})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			i, _ := strconv.Atoi(string(m.Value))
			seen[i]++
		}
	}
	var dups []int
	for i, k := range seen {
		if k != 1 {
			dups = append(dups, i)
		}
	}
	sort.Ints(dups)
	if len(seen) != total || len(dups) > 0 {
		t.Fatalf("stored %d distinct messages of %d; duplicated: %v", len(seen), total, dups)
	}
}
