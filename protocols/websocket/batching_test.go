package websocket_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	pulsarapi "github.com/apache/pulsar-client-go/pulsar"

	"github.com/ternmq/tern/internal/testcluster"
	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/protocols/pulsar"
)

// sendAll writes every message without waiting, then reads as many
// answers.
func sendAll(t *testing.T, c *client, msgs []map[string]any) []ack {
	t.Helper()
	for _, m := range msgs {
		writeJSON(t, c, m)
	}
	acks := make([]ack, len(msgs))
	for i := range acks {
		readJSON(t, c, 10*time.Second, &acks[i])
	}
	return acks
}

// entrySizes reads a log's entries and returns how many messages each
// holds.
func entrySizes(t *testing.T, n *testcluster.Node, p protocols.Partition) []int64 {
	t.Helper()
	var sizes []int64
	for off := int64(0); ; {
		res, err := n.Proxy().Fetch(context.Background(), p, off, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Entries) == 0 {
			return sizes
		}
		for _, e := range res.Entries {
			sizes = append(sizes, e.Count)
			off = e.BaseOffset + e.Count
		}
	}
}

// idOf decodes an answer's message id into (entry, batch index).
func idOf(t *testing.T, a ack) (int64, int32) {
	t.Helper()
	id, err := pulsar.ParseMessageID(a.MessageID)
	if err != nil {
		t.Fatalf("message id %q: %v", a.MessageID, err)
	}
	return int64(id.GetEntryId()), id.GetBatchIndex()
}

// numbered returns n messages with payload "m<i>" and context "c<i>".
func numbered(n int) []map[string]any {
	msgs := make([]map[string]any, n)
	for i := range msgs {
		msgs[i] = map[string]any{"payload": b64(fmt.Sprint("m", i)), "context": fmt.Sprint("c", i)}
	}
	return msgs
}

// okInOrder fails the test unless every answer is "ok" and answer i
// carries context "c<i>", the context its message was sent with.
func okInOrder(t *testing.T, acks []ack) {
	t.Helper()
	for i, a := range acks {
		if a.Result != "ok" || a.Context == nil || *a.Context != fmt.Sprint("c", i) {
			t.Fatalf("answer %d: %+v", i, a)
		}
	}
}

// TestBatchingGroupsMessages: with batchingEnabled, pipelined messages
// become batches of batchingMaxMessages, the last written after
// batchingMaxPublishDelay; each answer keeps its message's context and
// has its batch index; a Pulsar client reads every message with its key,
// properties and event time.
func TestBatchingGroupsMessages(t *testing.T) {
	n := startNode(t)
	topic := topicName("batching")
	c := dial(t, n, producerPath(topic, "batchingEnabled=true&batchingMaxMessages=4&batchingMaxPublishDelay=1000"))
	msgs := numbered(10)
	for i, m := range msgs {
		m["key"], m["properties"] = fmt.Sprint("k", i%3), map[string]string{"i": fmt.Sprint(i)}
		m["eventTime"] = time.UnixMilli(int64(1_700_000_000_000 + i)).UTC().Format("2006-01-02T15:04:05.000Z")
	}
	start := time.Now()
	acks := sendAll(t, c, msgs)
	if waited := time.Since(start); waited < 900*time.Millisecond {
		t.Errorf("the last, unfilled batch was answered after %v, before its 1s batchingMaxPublishDelay", waited)
	}
	okInOrder(t, acks)
	wantEntry := []int{0, 0, 0, 0, 4, 4, 4, 4, 8, 8}
	for i, a := range acks {
		entry, idx := idOf(t, a)
		if entry != int64(wantEntry[i]) || int(idx) != i-wantEntry[i] {
			t.Errorf("answer %d: entry %d batch index %d; want entry %d index %d", i, entry, idx, wantEntry[i], i-wantEntry[i])
		}
	}
	if got := fmt.Sprint(entrySizes(t, n, local(topic))); got != "[4 4 2]" {
		t.Fatalf("entries hold %s messages; want [4 4 2]", got)
	}

	client, err := pulsarClient(n)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	r, err := client.CreateReader(pulsarapi.ReaderOptions{Topic: "persistent://public/default/" + topic, StartMessageID: pulsarapi.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 10 {
		m, err := r.Next(ctx)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if string(m.Payload()) != fmt.Sprint("m", i) || m.Key() != fmt.Sprint("k", i%3) || m.Properties()["i"] != fmt.Sprint(i) ||
			m.EventTime().UnixMilli() != int64(1_700_000_000_000+i) || m.ID().BatchIdx() != int32(i-wantEntry[i]) {
			t.Fatalf("message %d: payload %q key %q properties %v event time %v batch index %d", i, m.Payload(), m.Key(), m.Properties(), m.EventTime(), m.ID().BatchIdx())
		}
	}
}

// TestBatchingEnds: a bad message, a delayed message and the end of the
// session each end the batch being filled; answers keep message order and
// a delayed message is stored alone.
func TestBatchingEnds(t *testing.T) {
	n := startNode(t)
	topic := topicName("batching-ends")
	c := dial(t, n, producerPath(topic, "batchingEnabled=true&batchingMaxPublishDelay=60000"))
	for i := range 2 {
		writeJSON(t, c, map[string]any{"payload": b64(fmt.Sprint("m", i)), "context": fmt.Sprint("c", i)})
	}
	writeText(t, c, `{"payload": "not base64!", "context": "bad"}`)
	writeJSON(t, c, map[string]any{"payload": b64("m2"), "context": "c2"})
	writeJSON(t, c, map[string]any{"payload": b64("m3"), "context": "c3", "deliverAfterMs": 1})
	writeJSON(t, c, map[string]any{"payload": b64("m4"), "context": "c4"})
	var acks []ack
	for range 5 {
		var a ack
		readJSON(t, c, 10*time.Second, &a)
		acks = append(acks, a)
	}
	var got []string
	for _, a := range acks {
		got = append(got, *a.Context+":"+a.Result)
	}
	if strings.Join(got, ",") != "c0:ok,c1:ok,bad:send-error:7,c2:ok,c3:ok" {
		t.Fatalf("answers %v", got)
	}
	// m4 waits for its batch's minute-long delay: closing the session
	// writes it.
	expectNothing(t, c, 200*time.Millisecond)
	if err := c.Close(1000, ""); err != nil {
		t.Logf("close: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		sizes := fmt.Sprint(entrySizes(t, n, local(topic)))
		if sizes == "[2 1 1 1]" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("entries hold %s messages; want [2 1 1 1] (m0 m1 | m2 | delayed m3 | m4 written at close)", sizes)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var stored []string
	for _, m := range logMessages(t, n, local(topic)) {
		stored = append(stored, string(m.Value))
	}
	if strings.Join(stored, ",") != "m0,m1,m2,m3,m4" {
		t.Fatalf("stored %v", stored)
	}
}

// TestBatchingDedup: with deduplication on, a batch resent under the same
// producer name with the same sequence ids is acknowledged and not written
// again.
func TestBatchingDedup(t *testing.T) {
	n := startNode(t)
	enableDedup(t, n)
	topic := topicName("batching-dedup")
	batch := func() []map[string]any {
		var ms []map[string]any
		for i := range 3 {
			ms = append(ms, map[string]any{"payload": b64(fmt.Sprint("m", i)), "sequenceId": i + 1})
		}
		return ms
	}
	// Only the count ends a batch: with the default 1 ms delay, a slow
	// reader (the race detector's) wrote the first message alone.
	const path = "producerName=p1&batchingEnabled=true&batchingMaxMessages=3&batchingMaxPublishDelay=60000"
	c := dial(t, n, producerPath(topic, path))
	first := sendAll(t, c, batch())
	_ = c.CloseNow()
	c2 := waitDial(t, n, producerPath(topic, path))
	again := sendAll(t, c2, batch())
	for i := range first {
		if first[i].Result != "ok" || again[i].Result != "ok" {
			t.Fatalf("message %d: first %+v, again %+v", i, first[i], again[i])
		}
	}
	if got := fmt.Sprint(entrySizes(t, n, local(topic))); got != "[3]" {
		t.Fatalf("entries hold %s messages; want [3]: the resent batch was written again", got)
	}
}

// TestBatchingMaxPendingCountsMessages: maxPendingMessages bounds the
// messages a batching session holds, not its batches: at the bound the
// batch being filled is written at once, so 12 messages with a bound of 5
// make batches of 5, 5 and 2 (the last after its delay), not one of 12.
func TestBatchingMaxPendingCountsMessages(t *testing.T) {
	n := startNode(t)
	topic := topicName("batching-pending")
	c := dial(t, n, producerPath(topic, "batchingEnabled=true&maxPendingMessages=5&batchingMaxPublishDelay=1000"))
	okInOrder(t, sendAll(t, c, numbered(12)))
	if got := fmt.Sprint(entrySizes(t, n, local(topic))); got != "[5 5 2]" {
		t.Fatalf("entries hold %s messages; want [5 5 2]", got)
	}
}
