package proxy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ternmq/tern/internal/testcluster"
	"github.com/ternmq/tern/localstore"
	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/proxy"
)

// testSink records what a subscription pushes to one consumer.
type testSink struct {
	deliveries chan protocols.Delivery
	active     chan bool
	ended      chan error
}

func newSink() *testSink {
	return &testSink{deliveries: make(chan protocols.Delivery, 1000), active: make(chan bool, 100), ended: make(chan error, 1)}
}

// Deliver keeps a copy of the delivery and releases its read buffer, as
// the Pulsar front end does once it has encoded it. With every freed
// buffer overwritten (TestMain), a subscription that freed a buffer its
// entries still point into would deliver the damage, and the tests that
// check keys and values would see it.
func (s *testSink) Deliver(d protocols.Delivery) { s.deliveries <- ownDelivery(d) }

// ownDelivery copies everything of d that lies in its read buffer, then
// releases the buffer.
func ownDelivery(d protocols.Delivery) protocols.Delivery {
	msgs := make([]protocols.Message, len(d.Messages))
	for i, m := range d.Messages {
		m.Key, m.Value = bytes.Clone(m.Key), bytes.Clone(m.Value)
		var hs []protocols.Header
		for _, h := range m.Headers {
			hs = append(hs, protocols.Header{Key: h.Key, Value: bytes.Clone(h.Value)})
		}
		m.Headers = hs
		msgs[i] = m
	}
	extras := make([]protocols.MessageExtras, len(d.Extras))
	for i, x := range d.Extras {
		x.OrderingKey = bytes.Clone(x.OrderingKey)
		extras[i] = x
	}
	env := d.Envelope
	env.SchemaVersion = bytes.Clone(env.SchemaVersion)
	env.Visited = slices.Clone(env.Visited)
	env.Attrs = nil
	for _, a := range d.Envelope.Attrs {
		env.Attrs = append(env.Attrs, protocols.Attr{Key: a.Key, Value: bytes.Clone(a.Value)})
	}
	if d.Buffer != nil {
		d.Buffer.Release()
	}
	d.Messages, d.Extras, d.Envelope, d.Buffer = msgs, extras, env, nil
	return d
}

func (s *testSink) ActiveChanged(a bool) { s.active <- a }
func (s *testSink) Ended(err error)      { s.ended <- err }

func (s *testSink) next(t *testing.T) protocols.Delivery {
	t.Helper()
	select {
	case d := <-s.deliveries:
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery within 10s")
	}
	return protocols.Delivery{}
}

func (s *testSink) none(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case got := <-s.deliveries:
		t.Fatalf("unexpected delivery at offset %d (%d messages)", got.Offset, len(got.Messages))
	case <-time.After(d):
	}
}

func (s *testSink) endedWith(t *testing.T, want error) {
	t.Helper()
	select {
	case err := <-s.ended:
		if !errors.Is(err, want) {
			t.Fatalf("ended with %v, want %v", err, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("not ended within 10s (want %v)", want)
	}
}

func (s *testSink) activeIs(t *testing.T, want bool) {
	t.Helper()
	select {
	case a := <-s.active:
		if a != want {
			t.Fatalf("active notice %v, want %v", a, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no active notice (want %v)", want)
	}
}

// subFixture is a node with one non-partitioned topic.
type subFixture struct {
	n    *proxy.Node
	node *testcluster.Node
	p    protocols.Partition
}

func newSubFixture(t *testing.T) *subFixture {
	c := testcluster.Start(t)
	name, _ := protocols.ParseTopicName(fmt.Sprintf("subs-%d", time.Now().UnixNano()), "public/default")
	if _, err := c.Node(0).Proxy().CreateTopic(context.Background(), name, 0, nil); err != nil {
		t.Fatal(err)
	}
	return &subFixture{n: c.Node(0).Proxy(), node: c.Node(0), p: protocols.Partition{Topic: name, Index: -1}}
}

// produce appends one entry with the given keys (one message each) and
// envelope attributes.
func (f *subFixture) produce(t *testing.T, env protocols.Envelope, keys ...string) protocols.ProduceResult {
	t.Helper()
	msgs := make([]protocols.Message, len(keys))
	for i, k := range keys {
		msgs[i] = protocols.Message{Key: []byte(k), Value: []byte("v-" + k), Timestamp: 1000}
	}
	b, err := protocols.AppendBatch(nil, protocols.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, msgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.n.Produce(context.Background(), f.p, protocols.ProduceRequest{Envelope: env, Batch: b})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func (f *subFixture) subscribe(t *testing.T, req protocols.SubscribeRequest, s *testSink) protocols.Consumer {
	t.Helper()
	if req.Subscription == "" {
		req.Subscription = "s"
	}
	c, err := f.n.Subscribe(context.Background(), f.p, req, s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var earliest = protocols.StartPosition{Kind: protocols.StartEarliest}

func keysOf(d protocols.Delivery) []string {
	out := make([]string, len(d.Messages))
	for i, m := range d.Messages {
		out[i] = string(m.Key)
	}
	return out
}

// TestPermits: nothing is pushed before the first Flow, a delivery of n
// messages uses n permits (the last may overdraw), and delivery resumes
// only when permits are positive again.
func TestPermits(t *testing.T) {
	f := newSubFixture(t)
	f.produce(t, protocols.Envelope{}, "a", "b", "c", "d", "e")
	f.produce(t, protocols.Envelope{}, "f")
	s := newSink()
	c := f.subscribe(t, protocols.SubscribeRequest{Type: protocols.SubExclusive, Durable: true, Start: earliest}, s)
	s.activeIs(t, true)
	s.none(t, 100*time.Millisecond)
	c.Flow(1)
	if d := s.next(t); d.Offset != 0 || len(d.Messages) != 5 || d.EntryCount != 5 {
		t.Fatalf("first delivery at %d with %d messages", d.Offset, len(d.Messages))
	}
	c.Flow(4) // back to zero after the overdraw of 4
	s.none(t, 100*time.Millisecond)
	c.Flow(1)
	if d := s.next(t); d.Offset != 5 || keysOf(d)[0] != "f" {
		t.Fatalf("second delivery %+v", d)
	}
	// New entries are pushed as they land.
	c.Flow(10)
	f.produce(t, protocols.Envelope{}, "g")
	if d := s.next(t); d.Offset != 6 {
		t.Fatalf("live delivery at %d", d.Offset)
	}
}

// TestAcksAndRedelivery: individual acks by delivery, by batch index and by
// Pulsar's ack-set bits; what is left comes back on redelivery, counted,
// as runs of the unacknowledged messages only.
func TestAcksAndRedelivery(t *testing.T) {
	f := newSubFixture(t)
	f.produce(t, protocols.Envelope{}, "a", "b", "c", "d", "e", "f", "g", "h")
	s := newSink()
	c := f.subscribe(t, protocols.SubscribeRequest{Type: protocols.SubShared, Durable: true, Start: earliest}, s)
	c.Flow(100)
	d := s.next(t)
	ctx := context.Background()
	// Bits set = still unacked: 0b11111100 acks offsets 0 and 1.
	must(t, c.Ack(ctx, []protocols.AckPosition{{Offset: d.Offset, BatchIndex: -1, Unacked: []uint64{0b11111100}}}, false))
	must(t, c.Ack(ctx, []protocols.AckPosition{{Offset: d.Offset, BatchIndex: 4}}, false))
	if md, _ := c.MarkDelete(ctx); md != 2 {
		t.Fatalf("mark-delete %d after acking 0, 1 and 4", md)
	}
	must(t, c.Redeliver(ctx, []int64{d.Offset}))
	got := map[int64][]string{}
	for len(got) < 2 {
		r := s.next(t)
		if r.RedeliveryCount != 1 {
			t.Fatalf("redelivery count %d", r.RedeliveryCount)
		}
		got[r.Offset] = keysOf(r)
	}
	if fmt.Sprint(got[2]) != "[c d]" || fmt.Sprint(got[5]) != "[f g h]" {
		t.Fatalf("redelivered runs %v", got)
	}
	// Acking a run by its own first offset acknowledges exactly that run.
	must(t, c.Ack(ctx, []protocols.AckPosition{{Offset: 2, BatchIndex: -1}}, false))
	must(t, c.Ack(ctx, []protocols.AckPosition{{Offset: 5, BatchIndex: -1}}, false))
	if md, _ := c.MarkDelete(ctx); md != 8 {
		t.Fatalf("mark-delete %d after acking everything", md)
	}
	if err := c.Ack(ctx, []protocols.AckPosition{{Offset: 0, BatchIndex: -1}}, true); !errors.Is(err, protocols.ErrInvalidAck) {
		t.Fatalf("cumulative ack on Shared: %v", err)
	}
}

// TestCumulativeAck on an exclusive subscription.
func TestCumulativeAck(t *testing.T) {
	f := newSubFixture(t)
	f.produce(t, protocols.Envelope{}, "a", "b", "c")
	f.produce(t, protocols.Envelope{}, "d", "e")
	s := newSink()
	c := f.subscribe(t, protocols.SubscribeRequest{Type: protocols.SubExclusive, Durable: true, Start: earliest}, s)
	c.Flow(100)
	s.next(t)
	s.next(t)
	ctx := context.Background()
	must(t, c.Ack(ctx, []protocols.AckPosition{{Offset: 3, BatchIndex: 0}}, true))
	if md, _ := c.MarkDelete(ctx); md != 4 {
		t.Fatalf("mark-delete %d after a cumulative ack of offset 3", md)
	}
	// The Go client's "entry before" form: entry id - 1.
	must(t, c.Ack(ctx, []protocols.AckPosition{{Offset: 2, BatchIndex: -1}}, true))
	must(t, c.Ack(ctx, []protocols.AckPosition{{Offset: 3, BatchIndex: -1}}, true))
	if md, _ := c.MarkDelete(ctx); md != 5 {
		t.Fatalf("mark-delete %d after acking the last delivery cumulatively", md)
	}
}

// TestFailover: one active consumer; when it leaves, the other becomes
// active and gets what the first left unacknowledged.
func TestFailover(t *testing.T) {
	f := newSubFixture(t)
	a, b := newSink(), newSink()
	ca := f.subscribe(t, protocols.SubscribeRequest{Type: protocols.SubFailover, ConsumerName: "a", Durable: true, Start: earliest}, a)
	a.activeIs(t, true)
	cb := f.subscribe(t, protocols.SubscribeRequest{Type: protocols.SubFailover, ConsumerName: "b", Durable: true, Start: earliest}, b)
	b.activeIs(t, false)
	ca.Flow(10)
	cb.Flow(10)
	f.produce(t, protocols.Envelope{}, "x")
	if d := a.next(t); keysOf(d)[0] != "x" {
		t.Fatal("the active consumer did not get the message")
	}
	b.none(t, 100*time.Millisecond)
	must(t, ca.Close())
	b.activeIs(t, true)
	if d := b.next(t); keysOf(d)[0] != "x" || d.RedeliveryCount != 0 {
		t.Fatalf("the new active consumer got %v (count %d)", keysOf(d), d.RedeliveryCount)
	}
}

// TestKeySharedJoin: a consumer that joins gets none of the messages read
// after it joined until everything read before is acknowledged, so no key
// is delivered out of order.
func TestKeySharedJoin(t *testing.T) {
	f := newSubFixture(t)
	keys := make([]string, 40)
	for i := range keys {
		keys[i] = fmt.Sprint("key-", i)
	}
	a := newSink()
	ca := f.subscribe(t, protocols.SubscribeRequest{Type: protocols.SubKeyShared, ConsumerName: "a", Durable: true, Start: earliest}, a)
	ca.Flow(1000)
	f.produce(t, protocols.Envelope{}, keys...)
	first := a.next(t)
	if len(first.Messages) != 40 {
		t.Fatalf("the only consumer got %d of 40 messages", len(first.Messages))
	}
	c := newSink()
	cc := f.subscribe(t, protocols.SubscribeRequest{Type: protocols.SubKeyShared, ConsumerName: "c", Durable: true, Start: earliest}, c)
	cc.Flow(1000)
	f.produce(t, protocols.Envelope{}, keys...)
	// a gets its own keys of the second entry; c gets nothing yet.
	gotA := 0
	for gotA < 40 {
		select {
		case d := <-a.deliveries:
			gotA += len(d.Messages)
			continue
		case <-time.After(300 * time.Millisecond):
		}
		break
	}
	if gotA == 40 {
		t.Fatal("every key stayed with the first consumer; the ring gave the new one nothing")
	}
	c.none(t, 200*time.Millisecond)
	must(t, ca.Ack(context.Background(), []protocols.AckPosition{{Offset: 0, BatchIndex: -1}}, false))
	gotC := 0
	for gotC+gotA < 40 {
		d := c.next(t)
		if d.Offset < 40 {
			t.Fatalf("the new consumer got offset %d, read before it joined", d.Offset)
		}
		gotC += len(d.Messages)
	}
}

// TestDelayedDelivery: on a Shared subscription an entry with a delivery
// time waits for it; others pass it.
func TestDelayedDelivery(t *testing.T) {
	f := newSubFixture(t)
	var env protocols.Envelope
	// Delivery times are milliseconds: compare at that resolution.
	at := time.Now().Add(400 * time.Millisecond).Truncate(time.Millisecond)
	protocols.SetDeliverAt(&env, at.UnixMilli())
	f.produce(t, env, "later")
	f.produce(t, protocols.Envelope{}, "now")
	s := newSink()
	c := f.subscribe(t, protocols.SubscribeRequest{Type: protocols.SubShared, Durable: true, Start: earliest}, s)
	c.Flow(10)
	if d := s.next(t); keysOf(d)[0] != "now" {
		t.Fatalf("first delivery %v", keysOf(d))
	}
	d := s.next(t)
	if keysOf(d)[0] != "later" || time.Now().Before(at) {
		t.Fatalf("delayed message %v delivered %v early", keysOf(d), time.Until(at))
	}
}

// TestAckTimeout: the broker redelivers what a consumer with an ack timeout
// leaves unacknowledged, counting a redelivery.
func TestAckTimeout(t *testing.T) {
	f := newSubFixture(t)
	f.produce(t, protocols.Envelope{}, "slow")
	s := newSink()
	c := f.subscribe(t, protocols.SubscribeRequest{Type: protocols.SubShared, Durable: true, Start: earliest, AckTimeout: 150 * time.Millisecond}, s)
	c.Flow(10)
	if d := s.next(t); d.RedeliveryCount != 0 {
		t.Fatal("first delivery counted as a redelivery")
	}
	d := s.next(t)
	if d.RedeliveryCount != 1 {
		t.Fatalf("after the timeout: count %d", d.RedeliveryCount)
	}
	must(t, c.Ack(context.Background(), []protocols.AckPosition{{Offset: d.Offset, BatchIndex: -1}}, false))
	s.none(t, 400*time.Millisecond)
}

// TestAckTimeoutAfterRedeliver: a delivery handed back before its ack
// timeout and delivered again gets a whole new timeout; the first
// delivery's deadline does not take the second back early. (A WebSocket
// session hands back what its own ack timer expired, and with the old
// deadline still armed the node took the new delivery back too, so the
// client saw the message a third time after acknowledging it.)
func TestAckTimeoutAfterRedeliver(t *testing.T) {
	const timeout = 600 * time.Millisecond
	f := newSubFixture(t)
	f.produce(t, protocols.Envelope{}, "held")
	s := newSink()
	c := f.subscribe(t, protocols.SubscribeRequest{Type: protocols.SubShared, Durable: true, Start: earliest, AckTimeout: timeout}, s)
	c.Flow(10)
	first := s.next(t)
	time.Sleep(timeout / 2)
	handedBack := time.Now()
	must(t, c.Redeliver(context.Background(), []int64{first.Offset}))
	if d := s.next(t); d.Offset != first.Offset || d.RedeliveryCount != 1 {
		t.Fatalf("after the hand-back: offset %d, count %d", d.Offset, d.RedeliveryCount)
	}
	third := s.next(t)
	// The second delivery came after the hand-back, so its deadline is at
	// least a timeout after it.
	if early := handedBack.Add(timeout).Sub(time.Now()); early > 0 {
		t.Fatalf("delivered a third time %v before the second delivery's ack timeout", early.Round(time.Millisecond))
	}
	if third.RedeliveryCount != 2 {
		t.Fatalf("third delivery: count %d", third.RedeliveryCount)
	}
}

// TestSeekAndRestart: a seek ends every consumer; the cursor, individual
// acks included, survives a node restart.
func TestSeekAndRestart(t *testing.T) {
	f := newSubFixture(t)
	for i := 0; i < 6; i++ {
		f.produce(t, protocols.Envelope{}, fmt.Sprint(i))
	}
	s, o := newSink(), newSink()
	c := f.subscribe(t, protocols.SubscribeRequest{Type: protocols.SubShared, Durable: true, Start: earliest}, s)
	other := f.subscribe(t, protocols.SubscribeRequest{Type: protocols.SubShared, Durable: true, Start: earliest}, o)
	_ = other
	ctx := context.Background()
	must(t, c.Seek(ctx, protocols.SeekTarget{Offset: 2}))
	s.endedWith(t, protocols.ErrSubscriptionReset)
	o.endedWith(t, protocols.ErrSubscriptionReset)
	s = newSink()
	c = f.subscribe(t, protocols.SubscribeRequest{Type: protocols.SubShared, Durable: true}, s)
	c.Flow(100)
	if d := s.next(t); d.Offset != 2 {
		t.Fatalf("after seeking to 2 the first delivery is %d", d.Offset)
	}
	for i := 3; i < 6; i++ {
		s.next(t)
	}
	must(t, c.Ack(ctx, []protocols.AckPosition{{Offset: 3, BatchIndex: -1}, {Offset: 5, BatchIndex: -1}}, false))
	must(t, c.Close())
	f.node.Restart()
	f.n = f.node.Proxy()
	s = newSink()
	c = f.subscribe(t, protocols.SubscribeRequest{Type: protocols.SubShared, Durable: true}, s)
	c.Flow(100)
	var got []int64
	for len(got) < 2 {
		got = append(got, s.next(t).Offset)
	}
	if fmt.Sprint(got) != "[2 4]" {
		t.Fatalf("after a restart redelivered %v, want [2 4]", got)
	}
	s.none(t, 200*time.Millisecond)
}

// TestReaderAndUnsubscribe: a non-durable subscription starts with the
// entry holding its start offset and ends with its consumer; unsubscribing
// a shared subscription needs force while others are attached.
func TestReaderAndUnsubscribe(t *testing.T) {
	f := newSubFixture(t)
	f.produce(t, protocols.Envelope{}, "a", "b", "c")
	s := newSink()
	r := f.subscribe(t, protocols.SubscribeRequest{Subscription: "reader", Type: protocols.SubExclusive,
		Start: protocols.StartPosition{Kind: protocols.StartAtOffset, Offset: 1}}, s)
	r.Flow(10)
	if d := s.next(t); d.Offset != 0 || len(d.Messages) != 3 {
		t.Fatalf("reader from offset 1 got the delivery at %d with %d messages; want the whole entry", d.Offset, len(d.Messages))
	}
	if n := f.n.LoadedSubscriptions(); n != 1 {
		t.Fatalf("%d subscriptions counted loaded with the reader's; want 1", n)
	}
	must(t, r.Close())
	for deadline := time.Now().Add(5 * time.Second); f.n.LoadedSubscriptions() != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d subscriptions counted loaded 5 s after the reader closed; want 0", f.n.LoadedSubscriptions())
		}
	}
	// The reader's subscription ended with it: a new one starts afresh.
	s2 := newSink()
	r2 := f.subscribe(t, protocols.SubscribeRequest{Subscription: "reader", Type: protocols.SubExclusive,
		Start: protocols.StartPosition{Kind: protocols.StartLatest}}, s2)
	r2.Flow(10)
	s2.none(t, 100*time.Millisecond)

	a, b := newSink(), newSink()
	ca := f.subscribe(t, protocols.SubscribeRequest{Subscription: "shared", Type: protocols.SubShared, Durable: true}, a)
	f.subscribe(t, protocols.SubscribeRequest{Subscription: "shared", Type: protocols.SubShared, Durable: true}, b)
	ctx := context.Background()
	if err := ca.Unsubscribe(ctx, false); !errors.Is(err, protocols.ErrConsumerBusy) {
		t.Fatalf("unsubscribe with another consumer attached: %v", err)
	}
	must(t, ca.Unsubscribe(ctx, true))
	b.endedWith(t, protocols.ErrSubscriptionDeleted)
	pid, _ := f.n.Incarnation(ctx, f.p)
	if _, ok, _ := f.node.Proxy().Store().LoadCursor(localPID(pid), "shared"); ok {
		t.Fatal("the cursor outlived the unsubscribe")
	}
}

// TestTopicDeletionEndsConsumers.
func TestTopicDeletionEndsConsumers(t *testing.T) {
	f := newSubFixture(t)
	s := newSink()
	c := f.subscribe(t, protocols.SubscribeRequest{Type: protocols.SubShared, Durable: true}, s)
	c.Flow(10)
	must(t, f.n.DeleteTopic(context.Background(), f.p.Topic))
	s.endedWith(t, protocols.ErrTopicNotFound)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func localPID(p int64) localstore.PartitionID { return localstore.PartitionID(p) }

// TestSubscriptionReadsABacklogAhead: a subscription behind the high
// watermark has its next reads started ahead, as a Kafka consumer's are,
// and gets every entry, in order, as written.
func TestSubscriptionReadsABacklogAhead(t *testing.T) {
	f := newSubFixture(t)
	const entries = 40 // of 256 KiB: four to a read
	for i := range entries {
		v := bytes.Repeat([]byte{byte(i)}, 256<<10)
		b, err := protocols.AppendBatch(nil, protocols.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
			[]protocols.Message{{Key: []byte(fmt.Sprint(i)), Value: v, Timestamp: 1000}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.n.Produce(context.Background(), f.p, protocols.ProduceRequest{Batch: b}); err != nil {
			t.Fatal(err)
		}
	}
	before := f.n.Store().Metrics().ReadAheadHits
	s := newSink()
	c := f.subscribe(t, protocols.SubscribeRequest{Type: protocols.SubExclusive, Durable: true, Start: earliest}, s)
	s.activeIs(t, true)
	c.Flow(entries)
	for i := range entries {
		d := s.next(t)
		if d.Offset != int64(i) || len(d.Messages) != 1 || !bytes.Equal(d.Messages[0].Value, bytes.Repeat([]byte{byte(i)}, 256<<10)) {
			t.Fatalf("delivery %d: offset %d, %d messages; want entry %d as written", i, d.Offset, len(d.Messages), i)
		}
	}
	// Ten reads: all but the first and the last few, which have less than
	// another read's worth behind them, are served ahead.
	if hits := f.n.Store().Metrics().ReadAheadHits - before; hits < 6 {
		t.Errorf("%d reads served ahead, want at least 6 of the 10", hits)
	}
}
