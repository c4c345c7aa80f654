package websocket_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/protocols/pulsar"
)

// readAll reads n messages and acknowledges each, returning payloads.
func readAll(t testing.TB, c *client, n int) []string {
	t.Helper()
	var out []string
	for range n {
		m := receive(t, c)
		out = append(out, m.text(t))
		ackMsg(t, c, m)
	}
	return out
}

// TestReaderEarliestLatest: messageId=earliest reads from the start,
// latest (the default) only what comes after the reader opens.
func TestReaderEarliestLatest(t *testing.T) {
	n := startNode(t)
	topic := topicName("reader")
	prod := dial(t, n, producerPath(topic, ""))
	produceN(t, prod, "m", 3)
	early := dial(t, n, readerPath(topic, "messageId=earliest"))
	late := dial(t, n, readerPath(topic, ""))
	if got := readAll(t, early, 3); strings.Join(got, ",") != "m0,m1,m2" {
		t.Fatalf("earliest: %v", got)
	}
	expectNothing(t, late, 200*time.Millisecond)
	produceOK(t, prod, "m3", nil)
	if got := readAll(t, late, 1); got[0] != "m3" {
		t.Fatalf("latest: %v", got)
	}
	if got := readAll(t, early, 1); got[0] != "m3" {
		t.Fatalf("earliest then: %v", got)
	}
}

// TestReaderFromMessageID: a reader given a message id starts after that
// message, on a plain message and on a message inside a batch.
func TestReaderFromMessageID(t *testing.T) {
	n := startNode(t)
	topic := topicName("fromid")
	prod := dial(t, n, producerPath(topic, ""))
	var ids []string
	for i := range 5 {
		ids = append(ids, produceOK(t, prod, fmt.Sprint("m", i), nil))
	}
	r := dial(t, n, readerPath(topic, "messageId="+ids[1]))
	if got := readAll(t, r, 3); strings.Join(got, ",") != "m2,m3,m4" {
		t.Fatalf("after m1: %v", got)
	}
	expectNothing(t, r, 200*time.Millisecond)

	// Inside a batch: ids come from a reader, which sees batch indexes.
	btopic := topicName("fromid-batch")
	client, err := pulsarClient(n)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	sendBatch(t, client, "persistent://public/default/"+btopic, 4)
	all := dial(t, n, readerPath(btopic, "messageId=earliest"))
	var batch []msg
	for range 4 {
		m := receive(t, all)
		batch = append(batch, m)
		ackMsg(t, all, m)
	}
	// The id travels in a URL: it may be escaped or not.
	for _, id := range []string{batch[1].MessageID, urlEscape(batch[1].MessageID)} {
		r2 := dial(t, n, readerPath(btopic, "messageId="+id))
		if got := readAll(t, r2, 2); strings.Join(got, ",") != "b2,b3" {
			t.Fatalf("after b1 (%s): %v", id, got)
		}
		expectNothing(t, r2, 200*time.Millisecond)
	}
	body := dialRefused(t, n, readerPath(btopic, "messageId=%25%25not-an-id"), http.StatusBadRequest)
	if !strings.Contains(body, "messageId") {
		t.Fatalf("body %q", body)
	}
}

func urlEscape(s string) string {
	r := strings.NewReplacer("+", "%2B", "/", "%2F", "=", "%3D")
	return r.Replace(s)
}

// TestReaderSlots: a reader stops at receiverQueueSize unacknowledged
// messages; any ack frees one slot, as in Pulsar.
func TestReaderSlots(t *testing.T) {
	n := startNode(t)
	topic := topicName("rslots")
	prod := dial(t, n, producerPath(topic, ""))
	produceN(t, prod, "m", 4)
	r := dial(t, n, readerPath(topic, "messageId=earliest&receiverQueueSize=2"))
	a, b := receive(t, r), receive(t, r)
	expectNothing(t, r, 300*time.Millisecond)
	writeJSON(t, r, map[string]any{"messageId": "not even an id"})
	if m := receive(t, r); m.text(t) != "m2" {
		t.Fatalf("got %s", m.text(t))
	}
	expectNothing(t, r, 300*time.Millisecond)
	ackMsg(t, r, a)
	if m := receive(t, r); m.text(t) != "m3" {
		t.Fatalf("got %s", m.text(t))
	}
	_ = b
}

// TestReaderPartitioned: a reader of a partitioned topic reads every
// partition; from a message id it starts after it in that partition and
// at the earliest in the others.
func TestReaderPartitioned(t *testing.T) {
	n := startNode(t)
	topic := topicName("rparts")
	name := protocols.TopicName{Tenant: "public", Namespace: "default", Local: topic}
	if _, err := n.Proxy().CreateTopic(context.Background(), name, 3, nil); err != nil {
		t.Fatal(err)
	}
	prod := dial(t, n, producerPath(topic, "messageRoutingMode=RoundRobinPartition"))
	idOf := map[string]string{}
	for i := range 9 {
		p := fmt.Sprint("m", i)
		idOf[p] = produceOK(t, prod, p, nil)
	}
	r := dial(t, n, readerPath(topic, "messageId=earliest"))
	seen := map[string]bool{}
	for _, p := range readAll(t, r, 9) {
		seen[p] = true
	}
	if len(seen) != 9 {
		t.Fatalf("read %v", seen)
	}
	// Start after the first message of some partition.
	var first string
	for p, id := range idOf {
		mid, _ := pulsar.ParseMessageID(id)
		if mid.GetEntryId() == 0 {
			first = p
			break
		}
	}
	r2 := dial(t, n, readerPath(topic, "messageId="+idOf[first]))
	got := readAll(t, r2, 8)
	for _, p := range got {
		if p == first {
			t.Fatalf("read %s, the start, again: %v", first, got)
		}
	}
	expectNothing(t, r2, 200*time.Millisecond)
	bad := dialRefused(t, n, readerPath(topic, "messageId="+urlEscape(idOfPartition(t, 7))), http.StatusBadRequest)
	if !strings.Contains(bad, "partition") {
		t.Fatalf("body %q", bad)
	}
}

// idOfPartition is a message id naming partition p.
func idOfPartition(t testing.TB, p int32) string {
	t.Helper()
	s, err := pulsar.FormatMessageID(pulsarID(1, 0, p))
	if err != nil {
		t.Fatal(err)
	}
	return s
}
