package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/twmb/murmur3"

	"github.com/ternmq/tern/internal/testcluster"
)

// TestPulsarExclusive: a second consumer on an exclusive subscription is
// refused while the first is attached, and accepted once it left.
func TestPulsarExclusive(t *testing.T) {
	c := testcluster.Start(t)
	cl := newClient(t, c.Node(0))
	topic := newTopic(t, "excl")
	opts := pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Exclusive}
	first, err := cl.Subscribe(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Subscribe(opts); err == nil || !containsAny(err.Error(), "ConsumerBusy", "already has consumer") {
		t.Fatalf("second exclusive consumer: %v", err)
	}
	p := mustProducer(t, cl, pulsar.ProducerOptions{Topic: topic})
	send(t, p, &pulsar.ProducerMessage{Payload: []byte("one")})
	if m := receive(t, first, 10*time.Second); string(m.Payload()) != "one" {
		t.Fatalf("got %q", m.Payload())
	}
	first.Close() // not acknowledged: the next consumer gets it
	second := mustSubscribe(t, cl, opts)
	if m := receive(t, second, 10*time.Second); string(m.Payload()) != "one" {
		t.Fatalf("after the first consumer left: %q", m.Payload())
	}
}

func containsAny(s string, subs ...string) bool {
	return slices.ContainsFunc(subs, func(x string) bool { return strings.Contains(s, x) })
}

// TestPulsarShared spreads messages over two consumers; together they see
// each message exactly once.
func TestPulsarShared(t *testing.T) {
	c := testcluster.Start(t)
	cl := newClient(t, c.Node(0))
	topic := newTopic(t, "shared")
	opts := pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared, ReceiverQueueSize: 10}
	a := mustSubscribe(t, cl, opts)
	b := mustSubscribe(t, cl, opts)
	p := mustProducer(t, cl, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	n := 200
	sendAsyncAll(t, p, n, func(i int) *pulsar.ProducerMessage { return &pulsar.ProducerMessage{Payload: []byte(strconv.Itoa(i))} })
	seen := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	counts := map[string]int{}
	for name, cons := range map[string]pulsar.Consumer{"a": a, "b": b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				m, err := cons.Receive(ctx)
				cancel()
				if err != nil {
					return
				}
				_ = cons.Ack(m)
				mu.Lock()
				if prev, dup := seen[string(m.Payload())]; dup {
					t.Errorf("message %s delivered to %s and %s", m.Payload(), prev, name)
				}
				seen[string(m.Payload())] = name
				counts[name]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("received %d distinct messages of %d", len(seen), n)
	}
	if counts["a"] == 0 || counts["b"] == 0 {
		t.Fatalf("one consumer got nothing: %v", counts)
	}
}

// activity records a Failover consumer's activation notices.
type activity struct {
	mu     sync.Mutex
	events []string
}

func (a *activity) BecameActive(_ pulsar.Consumer, topic string, partition int32) {
	a.mu.Lock()
	a.events = append(a.events, "active")
	a.mu.Unlock()
}

func (a *activity) BecameInactive(_ pulsar.Consumer, topic string, partition int32) {
	a.mu.Lock()
	a.events = append(a.events, "inactive")
	a.mu.Unlock()
}

func (a *activity) last() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.events) == 0 {
		return ""
	}
	return a.events[len(a.events)-1]
}

// TestPulsarFailover: the active consumer gets everything; when it closes
// the standby becomes active and gets the rest.
func TestPulsarFailover(t *testing.T) {
	c := testcluster.Start(t)
	cl := newClient(t, c.Node(0))
	topic := newTopic(t, "failover")
	evA, evB := &activity{}, &activity{}
	a := mustSubscribe(t, cl, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Failover, Name: "a", EventListener: evA})
	b := mustSubscribe(t, cl, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Failover, Name: "b", EventListener: evB})
	testcluster.WaitFor(t, 10*time.Second, "activation notices", func() bool { return evA.last() == "active" && evB.last() == "inactive" })
	p := mustProducer(t, cl, pulsar.ProducerOptions{Topic: topic})
	for i := 0; i < 10; i++ {
		send(t, p, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprint("first-", i))})
	}
	for i, m := range receiveN(t, a, 10, true) {
		if string(m.Payload()) != fmt.Sprint("first-", i) {
			t.Fatalf("active consumer got %q at %d", m.Payload(), i)
		}
	}
	expectNone(t, b, 300*time.Millisecond)
	a.Close()
	testcluster.WaitFor(t, 10*time.Second, "the standby to become active", func() bool { return evB.last() == "active" })
	for i := 0; i < 10; i++ {
		send(t, p, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprint("second-", i))})
	}
	for i, m := range receiveN(t, b, 10, true) {
		if string(m.Payload()) != fmt.Sprint("second-", i) {
			t.Fatalf("new active consumer got %q at %d", m.Payload(), i)
		}
	}
}

// keyedLog records received Key_Shared messages in the order consumers
// acknowledge them.
type keyedLog struct {
	mu    sync.Mutex
	order map[string][]int // key -> sequence numbers in record order
	owner map[string]map[string]bool
	total int
}

func (l *keyedLog) consume(t *testing.T, name string, cons pulsar.Consumer, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		m, err := cons.Receive(ctx)
		cancel()
		if err != nil {
			select {
			case <-stop:
				return
			default:
				continue
			}
		}
		seq, _ := strconv.Atoi(m.Properties()["seq"])
		l.mu.Lock()
		l.order[m.Key()] = append(l.order[m.Key()], seq)
		if l.owner[m.Key()] == nil {
			l.owner[m.Key()] = map[string]bool{}
		}
		l.owner[m.Key()][name] = true
		l.total++
		l.mu.Unlock()
		_ = cons.Ack(m)
	}
}

// TestPulsarKeySharedOrder: keys spread over consumers, each key's
// messages arrive in order even as consumers join and leave.
func TestPulsarKeySharedOrder(t *testing.T) {
	c := testcluster.Start(t)
	cl := newClient(t, c.Node(0))
	topic := newTopic(t, "keyshared")
	opts := func(name string) pulsar.ConsumerOptions {
		return pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.KeyShared, Name: name, ReceiverQueueSize: 20, AckWithResponse: true, EnableBatchIndexAcknowledgment: true,
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest}
	}
	log := &keyedLog{order: map[string][]int{}, owner: map[string]map[string]bool{}}
	var wg sync.WaitGroup
	type running struct {
		cons pulsar.Consumer
		stop chan struct{}
		done chan struct{}
	}
	start := func(name string) running {
		cons, err := cl.Subscribe(opts(name))
		if err != nil {
			t.Fatal(err)
		}
		r := running{cons: cons, stop: make(chan struct{}), done: make(chan struct{})}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(r.done)
			log.consume(t, name, cons, r.stop)
		}()
		return r
	}
	// leave stops a consumer's loop before closing it, and acks (one per
	// message, batch-index acks inside batches) wait for the broker's
	// answer, so nothing recorded is still unacknowledged when a consumer
	// leaves (that would legitimately come back).
	leave := func(r running) {
		close(r.stop)
		<-r.done
		r.cons.Close()
	}
	a := start("a")
	b := start("b")
	p := mustProducer(t, cl, pulsar.ProducerOptions{Topic: topic, BatcherBuilderType: pulsar.KeyBasedBatchBuilder, BatchingMaxPublishDelay: 2 * time.Millisecond})
	keys := 20
	next := make([]int, keys)
	produce := func(n int) {
		sendAsyncAll(t, p, n, func(i int) *pulsar.ProducerMessage {
			k := i % keys
			next[k]++
			return &pulsar.ProducerMessage{Key: fmt.Sprint("key-", k), Payload: []byte("x"), Properties: map[string]string{"seq": strconv.Itoa(next[k])}}
		})
	}
	produce(300)
	c3 := start("c") // joins mid-stream
	produce(300)
	leave(a) // leaves mid-stream
	produce(300)
	testcluster.WaitFor(t, 30*time.Second, "all messages", func() bool {
		log.mu.Lock()
		defer log.mu.Unlock()
		n := 0
		for k := 0; k < keys; k++ {
			n += countDistinct(log.order[fmt.Sprint("key-", k)])
		}
		return n == 900
	})
	leave(b)
	leave(c3)
	wg.Wait()
	log.mu.Lock()
	defer log.mu.Unlock()
	owners := map[string]bool{}
	for k, seqs := range log.order {
		for i := 1; i < len(seqs); i++ {
			if seqs[i] < seqs[i-1] {
				t.Fatalf("key %s out of order: %v", k, seqs)
			}
		}
		for o := range log.owner[k] {
			owners[o] = true
		}
	}
	if len(owners) < 2 {
		t.Fatalf("keys went to %d consumers; want them spread", len(owners))
	}
}

func countDistinct(xs []int) int {
	m := map[int]bool{}
	for _, x := range xs {
		m[x] = true
	}
	return len(m)
}

// stickyHash is Pulsar's sticky key hash.
func stickyHash(key string) int {
	return int((murmur3.Sum32([]byte(key)) & 0x7fffffff) % 65536)
}

// TestPulsarKeySharedSticky: consumers with declared hash ranges get
// exactly the keys that hash into them; overlapping ranges are refused.
func TestPulsarKeySharedSticky(t *testing.T) {
	c := testcluster.Start(t)
	cl := newClient(t, c.Node(0))
	topic := newTopic(t, "sticky")
	sticky := func(ranges ...int) pulsar.ConsumerOptions {
		pol, err := pulsar.NewKeySharedPolicySticky(ranges)
		if err != nil {
			t.Fatal(err)
		}
		return pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.KeyShared, KeySharedPolicy: pol}
	}
	low := mustSubscribe(t, cl, sticky(0, 32767))
	high := mustSubscribe(t, cl, sticky(32768, 65535))
	if _, err := cl.Subscribe(sticky(30000, 40000)); err == nil {
		t.Fatal("an overlapping sticky range was accepted")
	}
	p := mustProducer(t, cl, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	n := 100
	sendAsyncAll(t, p, n, func(i int) *pulsar.ProducerMessage {
		return &pulsar.ProducerMessage{Key: fmt.Sprint("k", i), Payload: []byte(fmt.Sprint(i))}
	})
	got := 0
	for name, cons := range map[string]pulsar.Consumer{"low": low, "high": high} {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			m, err := cons.Receive(ctx)
			cancel()
			if err != nil {
				break
			}
			_ = cons.Ack(m)
			got++
			h := stickyHash(m.Key())
			if (name == "low") != (h <= 32767) {
				t.Fatalf("key %s (hash %d) went to %s", m.Key(), h, name)
			}
		}
	}
	if got != n {
		t.Fatalf("received %d of %d", got, n)
	}
}
