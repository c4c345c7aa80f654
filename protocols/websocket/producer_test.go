package websocket_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ternmq/tern/internal/testcluster"
	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/protocols/pulsar"
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

// logMessages reads every message stored in a log.
func logMessages(t testing.TB, n *testcluster.Node, p protocols.Partition) []protocols.Message {
	t.Helper()
	ctx := context.Background()
	var out []protocols.Message
	var d protocols.Decompressor
	for off := int64(0); ; {
		res, err := n.Proxy().Fetch(ctx, p, off, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Entries) == 0 {
			return out
		}
		for _, se := range res.Entries {
			e, err := protocols.DecodeEntry(se.Value)
			if err != nil {
				t.Fatal(err)
			}
			msgs, err := protocols.Records(e.Batch, e.Header, &d)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				m.Key = clone(m.Key)
				m.Value = clone(m.Value)
				out = append(out, m)
			}
			off = se.BaseOffset + se.Count
		}
	}
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func local(topic string) protocols.Partition {
	return protocols.Partition{Topic: protocols.TopicName{Tenant: "public", Namespace: "default", Local: topic}, Index: -1}
}

// TestProduceAck: the ack carries "ok", the context as sent (string or
// number) and a message id that decodes to (incarnation, offset).
func TestProduceAck(t *testing.T) {
	n := startNode(t)
	topic := topicName("ack")
	c := dial(t, n, producerPath(topic, ""))
	for i, ctxVal := range []any{"ctx-1", 42} {
		a := produce(t, c, map[string]any{"payload": b64(fmt.Sprint("m", i)), "context": ctxVal})
		if a.Result != "ok" || a.Context == nil || *a.Context != fmt.Sprint(ctxVal) {
			t.Fatalf("ack %d: %+v", i, a)
		}
		id, err := pulsar.ParseMessageID(a.MessageID)
		if err != nil {
			t.Fatal(err)
		}
		if id.GetEntryId() != uint64(i) || id.Partition != nil || id.BatchIndex != nil {
			t.Fatalf("ack %d: id %v", i, id)
		}
		inc, _ := n.Proxy().Incarnation(context.Background(), local(topic))
		if int64(id.GetLedgerId()) != inc {
			t.Fatalf("ledger %d, incarnation %d", id.GetLedgerId(), inc)
		}
	}
	// A message without context gets an ack without one.
	a := produce(t, c, map[string]any{"payload": b64("x")})
	if a.Result != "ok" || a.Context != nil {
		t.Fatalf("ack without context: %+v", a)
	}
}

// TestProduceStored: key, payload, properties and event time land in the
// log as the Pulsar binary protocol stores them.
func TestProduceStored(t *testing.T) {
	n := startNode(t)
	topic := topicName("stored")
	c := dial(t, n, producerPath(topic, ""))
	produceOK(t, c, "v1", map[string]any{"key": "k1", "properties": map[string]string{"b": "2", "a": "1"}, "eventTime": "2024-05-01T12:00:00.250Z"})
	produceOK(t, c, "", nil)
	msgs := logMessages(t, n, local(topic))
	if len(msgs) != 2 {
		t.Fatalf("%d messages stored", len(msgs))
	}
	m := msgs[0]
	want := time.Date(2024, 5, 1, 12, 0, 0, 250e6, time.UTC).UnixMilli()
	if string(m.Key) != "k1" || string(m.Value) != "v1" || m.Timestamp != want ||
		len(m.Headers) != 2 || m.Headers[0].Key != "a" || string(m.Headers[0].Value) != "1" || m.Headers[1].Key != "b" {
		t.Fatalf("stored %+v", m)
	}
	if m := msgs[1]; m.Key != nil || m.Value == nil || len(m.Value) != 0 {
		t.Fatalf("empty message stored as %+v", m)
	}
}

// TestProduceBadMessages: a message that is not JSON gets send-error:3, a
// payload that is not base64 or missing and an unparsable eventTime get
// send-error:7, each with a message; the session goes on and nothing bad
// is written.
func TestProduceBadMessages(t *testing.T) {
	n := startNode(t)
	topic := topicName("bad")
	c := dial(t, n, producerPath(topic, ""))
	cases := []struct {
		raw, result, want string
	}{
		{`{"payload": "aGk=", `, "send-error:3", "invalid JSON"},
		{`not json`, "send-error:3", "invalid JSON"},
		{`[1,2]`, "send-error:3", "want a JSON object"},
		{`{"payload": 5}`, "send-error:3", "payload"},
		{`{"payload": "aGk="}{"payload": "aGk="}`, "send-error:3", "one message per WebSocket message"},
		{`{"payload": "%%%not-base64", "context": "c7"}`, "send-error:7", "Invalid Base64"},
		{`{"properties": {"a": "b"}, "context": "c8"}`, "send-error:7", "no \"payload\""},
		{`{"payload": "aGk=", "eventTime": "yesterday"}`, "send-error:7", "eventTime"},
		{`{"payload": "aGk=", "sequenceId": -4}`, "send-error:3", "sequenceId"},
	}
	for _, tc := range cases {
		writeText(t, c, tc.raw)
		var a ack
		readJSON(t, c, 10*time.Second, &a)
		if a.Result != tc.result || !strings.Contains(a.ErrorMsg, tc.want) || a.MessageID != "" {
			t.Errorf("%s: %+v; want %s with %q", tc.raw, a, tc.result, tc.want)
		}
	}
	// The context of a bad payload is echoed.
	writeText(t, c, `{"payload": "@@", "context": "ctx-bad"}`)
	var a ack
	readJSON(t, c, 10*time.Second, &a)
	if a.Context == nil || *a.Context != "ctx-bad" {
		t.Fatalf("context not echoed: %+v", a)
	}
	produceOK(t, c, "good", nil)
	msgs := logMessages(t, n, local(topic))
	if len(msgs) != 1 || string(msgs[0].Value) != "good" {
		t.Fatalf("stored %d messages: %+v", len(msgs), msgs)
	}
}

// TestProduceDedup: with deduplication on, a resend of a sequence id
// already stored for the producer name is acknowledged with the original's
// id and not written again, also from a new session with the same name,
// which resumes the sequence after the last stored id.
func TestProduceDedup(t *testing.T) {
	n := startNode(t)
	enableDedup(t, n)
	topic := topicName("dedup")
	c := dial(t, n, producerPath(topic, "producerName=p1"))
	ids := map[int]string{}
	for i := range 3 {
		ids[i] = produceOK(t, c, fmt.Sprint("m", i), map[string]any{"sequenceId": i})
	}
	if got := produceOK(t, c, "m1-again", map[string]any{"sequenceId": 1}); got == "" {
		t.Fatal("no id for a duplicate")
	}
	if got := produceOK(t, c, "m2-again", map[string]any{"sequenceId": 2}); got != ids[2] {
		t.Fatalf("duplicate of the latest got id %s; want the original %s", got, ids[2])
	}
	_ = c.CloseNow()
	// The name is free once the session has gone.
	var c2 = waitDial(t, n, producerPath(topic, "producerName=p1"))
	produceOK(t, c2, "m3", nil) // sequence 3, after the last stored
	produceOK(t, c2, "m2-third", map[string]any{"sequenceId": 2})
	msgs := logMessages(t, n, local(topic))
	var got []string
	for _, m := range msgs {
		got = append(got, string(m.Value))
	}
	if strings.Join(got, ",") != "m0,m1,m2,m3" {
		t.Fatalf("stored %v", got)
	}
	// Without dedup for the name's messages sent with no sequence id,
	// the counter starts after initialSequenceId.
	c3 := dial(t, n, producerPath(topic, "producerName=p2&initialSequenceId=9"))
	produceOK(t, c3, "p2-10", nil)
	produceOK(t, c3, "p2-10-again", map[string]any{"sequenceId": 10})
	if k := len(logMessages(t, n, local(topic))); k != 5 {
		t.Fatalf("%d messages after p2; want 5", k)
	}
}

// waitDial dials until the upgrade succeeds (a name is released when the
// previous session's teardown completes).
func waitDial(t testing.TB, n *testcluster.Node, path string) *wsConn {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := tryDial(n, path)
		if err == nil {
			t.Cleanup(func() { _ = c.CloseNow() })
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("dial %s: %v", path, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestProducerNameBusy: a name in use on the topic is refused with 409.
func TestProducerNameBusy(t *testing.T) {
	n := startNode(t)
	topic := topicName("busy")
	dial(t, n, producerPath(topic, "producerName=same"))
	body := dialRefused(t, n, producerPath(topic, "producerName=same"), 409)
	if !strings.Contains(body, "producer") {
		t.Fatalf("body %q", body)
	}
}

// TestProduceCompressed: compressionType stores the entry with the Kafka
// codec of the same family; readers see the payload unchanged.
func TestProduceCompressed(t *testing.T) {
	n := startNode(t)
	for typ, codec := range map[string]protocols.Codec{"LZ4": protocols.CodecLZ4, "ZLIB": protocols.CodecGzip, "ZSTD": protocols.CodecZstd, "SNAPPY": protocols.CodecSnappy} {
		topic := topicName("comp-" + strings.ToLower(typ))
		c := dial(t, n, producerPath(topic, "compressionType="+typ))
		body := strings.Repeat("compressible ", 100)
		produceOK(t, c, body, nil)
		res, err := n.Proxy().Fetch(context.Background(), local(topic), 0, 1<<20)
		if err != nil || len(res.Entries) != 1 {
			t.Fatalf("%s: fetch %v", typ, err)
		}
		e, err := protocols.DecodeEntry(res.Entries[0].Value)
		if err != nil {
			t.Fatal(err)
		}
		if e.Header.Codec() != codec {
			t.Fatalf("%s: stored with codec %v", typ, e.Header.Codec())
		}
		if msgs := logMessages(t, n, local(topic)); string(msgs[0].Value) != body {
			t.Fatalf("%s: payload changed", typ)
		}
	}
}
