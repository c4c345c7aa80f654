package websocket_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/protocols/pulsar"
)

// produceN produces m0..m(n-1) with the given prefix.
func produceN(t testing.TB, c *wsConn, prefix string, n int) {
	t.Helper()
	for i := range n {
		produceOK(t, c, fmt.Sprintf("%s%d", prefix, i), nil)
	}
}

// TestConsumeMessageShape: a pushed message has Pulsar's fields: id,
// base64 payload, properties ({} when none), publish time, redelivery
// count, event time and key when the producer gave them.
func TestConsumeMessageShape(t *testing.T) {
	n := startNode(t)
	topic := topicName("shape")
	cons := dial(t, n, consumerPath(topic, "s", ""))
	prod := dial(t, n, producerPath(topic, ""))
	id := produceOK(t, prod, "one", map[string]any{"key": "k", "properties": map[string]string{"p": "q"}, "eventTime": "2024-01-02T03:04:05.006Z"})
	produceOK(t, prod, "two", nil)
	m := receive(t, cons)
	if m.MessageID != id || m.text(t) != "one" || m.Key == nil || *m.Key != "k" || m.Properties["p"] != "q" ||
		m.EventTime != "2024-01-02T03:04:05.006Z" || m.RedeliveryCount != 0 {
		t.Fatalf("first: %+v", m)
	}
	if _, err := time.Parse(time.RFC3339Nano, m.PublishTime); err != nil {
		t.Fatalf("publishTime %q: %v", m.PublishTime, err)
	}
	raw, err := tryRead(cons, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"properties":{}`, `"redeliveryCount":0`} {
		if !strings.Contains(string(raw), field) {
			t.Fatalf("second message %s lacks %s", raw, field)
		}
	}
	if strings.Contains(string(raw), `"key"`) || strings.Contains(string(raw), `"eventTime"`) {
		t.Fatalf("second message %s has a key or event time it was not given", raw)
	}
}

// TestConsumePushFlow: in push mode the session stops at
// receiverQueueSize unacknowledged messages; each ack lets one more
// through; acks of unknown ids do not.
func TestConsumePushFlow(t *testing.T) {
	n := startNode(t)
	topic := topicName("push")
	cons := dial(t, n, consumerPath(topic, "s", "receiverQueueSize=3"))
	prod := dial(t, n, producerPath(topic, ""))
	produceN(t, prod, "m", 10)
	var got []msg
	for range 3 {
		got = append(got, receive(t, cons))
	}
	expectNothing(t, cons, 300*time.Millisecond)
	// An id the session never sent frees nothing.
	other := dial(t, n, producerPath(topicName("other"), ""))
	writeJSON(t, cons, map[string]any{"messageId": produceOK(t, other, "x", nil)})
	expectNothing(t, cons, 300*time.Millisecond)
	ackMsg(t, cons, got[0])
	got = append(got, receive(t, cons))
	expectNothing(t, cons, 300*time.Millisecond)
	for _, m := range got[1:] {
		ackMsg(t, cons, m)
	}
	for len(got) < 10 {
		m := receive(t, cons)
		ackMsg(t, cons, m)
		got = append(got, m)
	}
	for i, m := range got {
		if m.text(t) != fmt.Sprint("m", i) {
			t.Fatalf("message %d is %q", i, m.text(t))
		}
	}
}

// TestConsumePullMode: with pullMode the session sends exactly what the
// client permits, whatever it acknowledges.
func TestConsumePullMode(t *testing.T) {
	n := startNode(t)
	topic := topicName("pull")
	cons := dial(t, n, consumerPath(topic, "s", "pullMode=true"))
	prod := dial(t, n, producerPath(topic, ""))
	produceN(t, prod, "m", 6)
	expectNothing(t, cons, 300*time.Millisecond)
	writeJSON(t, cons, map[string]any{"type": "permit", "permitMessages": 2})
	a, b := receive(t, cons), receive(t, cons)
	expectNothing(t, cons, 300*time.Millisecond)
	ackMsg(t, cons, a)
	ackMsg(t, cons, b)
	expectNothing(t, cons, 300*time.Millisecond)
	writeJSON(t, cons, map[string]any{"type": "permit", "permitMessages": 10})
	var rest []string
	for range 4 {
		rest = append(rest, receive(t, cons).text(t))
	}
	if a.text(t) != "m0" || b.text(t) != "m1" || strings.Join(rest, ",") != "m2,m3,m4,m5" {
		t.Fatalf("got %s %s %v", a.text(t), b.text(t), rest)
	}
	// Six permits remain: new messages flow at once.
	produceOK(t, prod, "m6", nil)
	if m := receive(t, cons); m.text(t) != "m6" {
		t.Fatalf("got %s", m.text(t))
	}
}

// TestNackRedelivery: a negative ack brings the message back after
// negativeAckRedeliveryDelay with its redelivery count raised; the
// message acknowledged beside it stays acknowledged.
func TestNackRedelivery(t *testing.T) {
	n := startNode(t)
	topic := topicName("nack")
	cons := dial(t, n, consumerPath(topic, "s", "subscriptionType=Shared&negativeAckRedeliveryDelay=200"))
	prod := dial(t, n, producerPath(topic, ""))
	produceN(t, prod, "m", 2)
	m0, m1 := receive(t, cons), receive(t, cons)
	ackMsg(t, cons, m0)
	start := time.Now()
	writeJSON(t, cons, map[string]any{"type": "negativeAcknowledge", "messageId": m1.MessageID})
	again := receive(t, cons)
	if again.text(t) != "m1" || again.RedeliveryCount != 1 || again.MessageID != m1.MessageID {
		t.Fatalf("redelivered %+v", again)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Fatalf("redelivered after %v; the delay is 200ms", d)
	}
	ackMsg(t, cons, again)
	expectNothing(t, cons, 400*time.Millisecond)
}

// TestAckTimeoutFreesSlot: a message left unacknowledged past
// ackTimeoutMillis is redelivered, and its slot is given back: with a
// receiver queue of one, the redelivery can only arrive if the first
// delivery stopped counting (Pulsar #2731 stalled here).
func TestAckTimeoutFreesSlot(t *testing.T) {
	n := startNode(t)
	topic := topicName("acktimeout")
	cons := dial(t, n, consumerPath(topic, "s", "receiverQueueSize=1&ackTimeoutMillis=1000"))
	prod := dial(t, n, producerPath(topic, ""))
	produceN(t, prod, "m", 2)
	first := receive(t, cons)
	if first.text(t) != "m0" {
		t.Fatalf("first %s", first.text(t))
	}
	again := receive(t, cons)
	if again.text(t) != "m0" || again.RedeliveryCount != 1 {
		t.Fatalf("after the ack timeout: %s (redelivery %d)", again.text(t), again.RedeliveryCount)
	}
	ackMsg(t, cons, again)
	if m := receive(t, cons); m.text(t) != "m1" {
		t.Fatalf("then %s", m.text(t))
	}
}

// TestAckTimeoutTooShort: Pulsar refuses ack timeouts under a second.
func TestAckTimeoutTooShort(t *testing.T) {
	n := startNode(t)
	body := dialRefused(t, n, consumerPath(topicName("short"), "s", "ackTimeoutMillis=10"), http.StatusBadRequest)
	if !strings.Contains(body, "1000 ms") {
		t.Fatalf("body %q", body)
	}
}

// TestBatchAcks: messages of one entry (a batch from a Pulsar client)
// carry their own ids; acknowledging some of them leaves exactly the others
// to be delivered again (Pulsar #12530 needed a cache for this).
func TestBatchAcks(t *testing.T) {
	n := startNode(t)
	topic := topicName("batch")
	cons := dial(t, n, consumerPath(topic, "s", ""))
	client, err := pulsarClient(n)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	sendBatch(t, client, "persistent://public/default/"+topic, 5)
	var got []msg
	for range 5 {
		got = append(got, receive(t, cons))
	}
	ids := map[string]bool{}
	for i, m := range got {
		id, err := pulsar.ParseMessageID(m.MessageID)
		if err != nil {
			t.Fatal(err)
		}
		if id.GetEntryId() != 0 || id.GetBatchIndex() != int32(i) || id.GetBatchSize() != 5 {
			t.Fatalf("message %d id %v", i, id)
		}
		ids[m.MessageID] = true
	}
	if len(ids) != 5 {
		t.Fatalf("ids not distinct: %v", ids)
	}
	for _, i := range []int{0, 2, 4} {
		ackMsg(t, cons, got[i])
	}
	// Acks are applied in order on the session; an isEndOfTopic round
	// trip makes sure they are in before the session closes.
	writeJSON(t, cons, map[string]any{"type": "isEndOfTopic"})
	var eot map[string]bool
	readJSON(t, cons, 10*time.Second, &eot)
	_ = cons.Close(websocket.StatusNormalClosure, "")
	again := waitDial(t, n, consumerPath(topic, "s", ""))
	var left []string
	for range 2 {
		left = append(left, receive(t, again).text(t))
	}
	slices.Sort(left)
	if strings.Join(left, ",") != "b1,b3" {
		t.Fatalf("redelivered %v; want b1,b3", left)
	}
	expectNothing(t, again, 300*time.Millisecond)
}

// TestDeadLetter: past maxRedeliverCount redeliveries a message goes to
// the dead-letter topic with REAL_TOPIC and ORIGIN_MESSAGE_ID, and leaves
// the subscription.
func TestDeadLetter(t *testing.T) {
	n := startNode(t)
	topic := topicName("dlq")
	cons := dial(t, n, consumerPath(topic, "s", "subscriptionType=Shared&maxRedeliverCount=2&negativeAckRedeliveryDelay=0"))
	prod := dial(t, n, producerPath(topic, ""))
	produceOK(t, prod, "poison", map[string]any{"key": "pk", "properties": map[string]string{"x": "y"}})
	for want := 0; want <= 2; want++ {
		m := receive(t, cons)
		if m.text(t) != "poison" || m.RedeliveryCount != want {
			t.Fatalf("delivery %d: %+v", want, m)
		}
		writeJSON(t, cons, map[string]any{"type": "negativeAcknowledge", "messageId": m.MessageID})
	}
	expectNothing(t, cons, 500*time.Millisecond)
	dlq := protocols.Partition{Topic: protocols.TopicName{Tenant: "public", Namespace: "default", Local: topic + "-s-DLQ"}, Index: -1}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := n.Proxy().Topic(context.Background(), dlq.Topic); err == nil {
			if msgs := logMessages(t, n, dlq); len(msgs) == 1 {
				m := msgs[0]
				props := map[string]string{}
				for _, h := range m.Headers {
					props[h.Key] = string(h.Value)
				}
				if string(m.Value) != "poison" || string(m.Key) != "pk" || props["x"] != "y" ||
					props["REAL_TOPIC"] != "persistent://public/default/"+topic || !strings.HasSuffix(props["ORIGIN_MESSAGE_ID"], ":0:-1") {
					t.Fatalf("dead letter %+v %v", m, props)
				}
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no dead letter")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The original is acknowledged: a new consumer gets nothing.
	_ = cons.CloseNow()
	again := waitDial(t, n, consumerPath(topic, "s", "subscriptionType=Shared"))
	expectNothing(t, again, 300*time.Millisecond)
}

// TestSharedSessions: two Shared sessions split the messages; each
// message goes to one of them.
func TestSharedSessions(t *testing.T) {
	n := startNode(t)
	topic := topicName("shared")
	a := dial(t, n, consumerPath(topic, "s", "subscriptionType=Shared&receiverQueueSize=5"))
	b := dial(t, n, consumerPath(topic, "s", "subscriptionType=Shared&receiverQueueSize=5"))
	prod := dial(t, n, producerPath(topic, ""))
	produceN(t, prod, "m", 10)
	seen := map[string]int{}
	for _, c := range []*wsConn{a, b} {
		for range 5 {
			m := receive(t, c)
			seen[m.text(t)]++
			ackMsg(t, c, m)
		}
	}
	if len(seen) != 10 {
		t.Fatalf("seen %v", seen)
	}
}

// TestExclusiveBusy: a second Exclusive consumer is refused with 409.
func TestExclusiveBusy(t *testing.T) {
	n := startNode(t)
	topic := topicName("excl")
	dial(t, n, consumerPath(topic, "s", ""))
	dialRefused(t, n, consumerPath(topic, "s", ""), http.StatusConflict)
}

// TestUnsubscribe: unsubscribe deletes the subscription and closes the
// session normally; isEndOfTopic answers false.
func TestUnsubscribe(t *testing.T) {
	n := startNode(t)
	topic := topicName("unsub")
	cons := dial(t, n, consumerPath(topic, "gone", ""))
	writeJSON(t, cons, map[string]any{"type": "isEndOfTopic"})
	var eot map[string]any
	readJSON(t, cons, 10*time.Second, &eot)
	if v, ok := eot["endOfTopic"]; !ok || v != false {
		t.Fatalf("isEndOfTopic: %v", eot)
	}
	writeJSON(t, cons, map[string]any{"type": "unsubscribe"})
	expectClose(t, cons, websocket.StatusNormalClosure, "unsubscribed")
	resp, err := http.Get(n.HTTPURL() + "/admin/v2/persistent/public/default/" + topic + "/subscriptions")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var subs []string
	if err := jsonDecode(resp, &subs); err != nil || len(subs) != 0 {
		t.Fatalf("subscriptions after unsubscribe: %v %v", subs, err)
	}
}

// TestCursorReset: an admin reset of the cursor ends the node's consumer;
// the session subscribes again and delivers from the new position.
func TestCursorReset(t *testing.T) {
	n := startNode(t)
	topic := topicName("reset")
	cons := dial(t, n, consumerPath(topic, "s", ""))
	prod := dial(t, n, producerPath(topic, ""))
	produceN(t, prod, "m", 3)
	for range 3 {
		ackMsg(t, cons, receive(t, cons))
	}
	resp, err := http.Post(n.HTTPURL()+"/admin/v2/persistent/public/default/"+topic+"/subscription/s/resetcursor/0", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("reset: HTTP %d", resp.StatusCode)
	}
	var got []string
	for range 3 {
		m := receive(t, cons)
		got = append(got, m.text(t))
		ackMsg(t, cons, m)
	}
	if strings.Join(got, ",") != "m0,m1,m2" {
		t.Fatalf("after reset: %v", got)
	}
}

// TestPartitionedTopic: a producer routes keyed messages by key hash and
// a consumer consumes every partition; ids carry the partition.
func TestPartitionedTopic(t *testing.T) {
	n := startNode(t)
	topic := topicName("parts")
	name := protocols.TopicName{Tenant: "public", Namespace: "default", Local: topic}
	if _, err := n.Proxy().CreateTopic(context.Background(), name, 4, nil); err != nil {
		t.Fatal(err)
	}
	cons := dial(t, n, consumerPath(topic, "s", ""))
	prod := dial(t, n, producerPath(topic, "messageRoutingMode=RoundRobinPartition"))
	keyPart := map[string]int32{}
	for i := range 20 {
		k := fmt.Sprint("key-", i%5)
		id, err := pulsar.ParseMessageID(produceOK(t, prod, fmt.Sprint("v", i), map[string]any{"key": k}))
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := keyPart[k]; ok && p != id.GetPartition() {
			t.Fatalf("key %s went to partitions %d and %d", k, p, id.GetPartition())
		}
		keyPart[k] = id.GetPartition()
	}
	// Without a key, round robin covers every partition.
	parts := map[int32]bool{}
	for i := range 8 {
		id, _ := pulsar.ParseMessageID(produceOK(t, prod, fmt.Sprint("r", i), nil))
		parts[id.GetPartition()] = true
	}
	if len(parts) != 4 {
		t.Fatalf("round robin used partitions %v", parts)
	}
	seen := map[string]bool{}
	for range 28 {
		m := receive(t, cons)
		id, _ := pulsar.ParseMessageID(m.MessageID)
		if m.Key != nil && keyPart[*m.Key] != id.GetPartition() {
			t.Fatalf("%s from partition %d", *m.Key, id.GetPartition())
		}
		seen[m.text(t)] = true
		ackMsg(t, cons, m)
	}
	if len(seen) != 28 {
		t.Fatalf("consumed %d distinct", len(seen))
	}
	// One partition by name.
	one := dial(t, n, readerPath(topic+"-partition-2", "messageId=earliest"))
	m := receive(t, one)
	id, _ := pulsar.ParseMessageID(m.MessageID)
	if id.GetPartition() != 2 {
		t.Fatalf("partition-2 reader got a message of partition %d", id.GetPartition())
	}
}
