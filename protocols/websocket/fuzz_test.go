package websocket

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/protocols/pulsar"
)

// FuzzProducerMessage: any text a producer sends either is refused with
// Pulsar's error 3 or 7 and a message, or becomes an entry that decodes to
// exactly the key, payload, properties and times sent.
func FuzzProducerMessage(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `"x"`, `{"payload":""}`, `{"payload":"aGk="}`, `{"payload":"aGk"}`, `{"payload":"a"}`,
		`{"payload":"aGk=","key":"k","properties":{"a":"1","b":""},"context":"c","eventTime":"2024-01-02T03:04:05.678+02:00"}`,
		`{"payload":"aGk=","context":12.5e3}`, `{"payload":"aGk=","context":{}}`, `{"payload":"aGk=","sequenceId":9223372036854775807}`,
		`{"payload":"aGk=","sequenceId":-1}`, `{"payload":"aGk=","sequenceId":1.5}`, `{"payload":"aGk=","deliverAt":1,"deliverAfterMs":5}`,
		`{"payload":"aGk=","eventTime":"1969-12-31T23:59:59Z"}`, `{"payload":"aGk=","eventTime":""}`, `{"payload":"!!"}`,
		`{"payload":"aGk=","key":"\u0000\ud83d"}`, `{"payload":"aGk="} trailing`, `{"payload":"aGk=","replicationClusters":["a"],"valueSchema":{"x":1}}`,
		`{"Payload":"aGk="}`, `{"payload":"aGk=","properties":{"k":null}}`, `{"payload":"aG\/k","context":"a\u0041"}`,
		`{"payload":"aGk=","payload":null}`, `{"payload":"\ud800"}`, "{\"payload\":\"aGk=\",\"context\":\"a\xffb\"}",
	} {
		f.Add([]byte(s))
	}
	now := time.UnixMilli(1_700_000_000_000)
	f.Fuzz(func(t *testing.T, b []byte) {
		m, code, err := decodeProducerMessage(b, 1<<16, now)
		sameAsStringDecode(t, b, m, err)
		if err != nil {
			if code != CloseFailedToDeserializeFromJSON && code != ClosePayloadEncodingError {
				t.Fatalf("error code %d for %q", code, b)
			}
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		var comp protocols.Compressor
		req, err := messageEntry("p", &m, 7, protocols.CodecNone, &comp, &entryScratch{}, now)
		if err != nil {
			t.Fatalf("entry of %q: %v", b, err)
		}
		raw, err := protocols.AppendEntry(nil, &req.Envelope, req.Batch)
		if err != nil {
			t.Fatal(err)
		}
		e, err := protocols.DecodeEntry(raw)
		if err != nil {
			t.Fatal(err)
		}
		var d protocols.Decompressor
		msgs, err := protocols.Records(e.Batch, e.Header, &d)
		if err != nil || len(msgs) != 1 {
			t.Fatalf("records: %v", err)
		}
		got := msgs[0]
		if !bytes.Equal(got.Value, m.payload) || (got.Key == nil) != (m.key == nil) || !bytes.Equal(got.Key, m.key) || len(got.Headers) != len(m.headers) {
			t.Fatalf("round trip of %q: %+v", b, got)
		}
		x, err := protocols.MessageExtrasOf(&e.Envelope, 1)
		if err != nil {
			t.Fatal(err)
		}
		if x[0].NoEventTime != (m.eventTime == 0) || (m.eventTime != 0 && got.Timestamp != m.eventTime) {
			t.Fatalf("event time of %q: %d %v", b, got.Timestamp, x[0])
		}
		if e.Envelope.ProducerName != "p" || e.Envelope.SequenceFirst != 7 {
			t.Fatalf("envelope %+v", e.Envelope)
		}
		if at, ok := protocols.DeliverAt(&e.Envelope); ok != (m.deliverAt > 0) || at != m.deliverAt {
			t.Fatalf("deliver at %d %v; want %d", at, ok, m.deliverAt)
		}
	})
}

// sameAsStringDecode checks a producer message's payload and context
// against a plain decoding of b: the payload as a JSON string, then from
// base64; the context as a string or the text of a number.
func sameAsStringDecode(t *testing.T, b []byte, m message, err error) {
	t.Helper()
	var ref struct {
		Payload *string        `json:"payload"`
		Context jsontext.Value `json:"context"`
	}
	if unmarshal(b, &ref) != nil {
		return // the message is refused for what else is in it
	}
	if ref.Payload != nil {
		want, berr := base64.RawStdEncoding.DecodeString(strings.TrimRight(*ref.Payload, "="))
		badBase64 := err != nil && strings.Contains(err.Error(), "Base64")
		if (err == nil && (berr != nil || !bytes.Equal(m.payload, want))) || (badBase64 && berr == nil) {
			t.Fatalf("payload of %q: got %q, %v; want %q, %v", b, m.payload, err, want, berr)
		}
	}
	if err != nil || len(ref.Context) == 0 || ref.Context.Kind() == 'n' {
		return
	}
	want := string(ref.Context)
	if ref.Context.Kind() == '"' {
		if unmarshal(ref.Context, &want) != nil {
			t.Fatalf("context of %q: %s", b, ref.Context)
		}
	}
	if m.context == nil || *m.context != want {
		t.Fatalf("context of %q: got %v; want %q", b, m.context, want)
	}
}

// FuzzConsumerCommand: any text a consumer sends decodes or is refused,
// and a message id in it maps to a position of the session's logs or to
// nothing, never elsewhere.
func FuzzConsumerCommand(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `{"messageId":"CAAQAw=="}`, `{"messageId":"CAEQAxgCIAE="}`, `{"type":"permit","permitMessages":3}`,
		`{"type":"negativeAcknowledge","messageId":"CAAQAw"}`, `{"messageId":"CP__________ARD__________wE="}`,
		`{"messageId":null}`, `{"type":"unsubscribe"}`, `{"messageId":"CAEQAyD__________wE="}`,
	} {
		f.Add([]byte(s))
	}
	slots := []slot{
		{part: protocols.Partition{Index: 0}, ledger: 1},
		{part: protocols.Partition{Index: 1}, ledger: 1},
		{part: protocols.Partition{Index: 2}, ledger: 1},
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var cmd consumerCommand
		if err := json.Unmarshal(b, &cmd); err != nil || cmd.MessageID == nil {
			return
		}
		id, err := pulsar.ParseMessageID(*cmd.MessageID)
		if err != nil {
			return
		}
		for _, ss := range [][]slot{slots, slots[:1]} {
			pos, ok := locate(ss, id)
			if !ok {
				continue
			}
			if pos.slot < 0 || pos.slot >= len(ss) || pos.entry < 0 || pos.batch < -1 {
				t.Fatalf("position %+v for %v", pos, id)
			}
		}
	})
}

// FuzzParsePath: any request path is refused with a status and reason, or
// names a valid topic (and subscription, for a consumer).
func FuzzParsePath(f *testing.F) {
	for _, s := range []string{
		"/ws/v2/producer/persistent/t/ns/x", "/ws/v2/consumer/persistent/t/ns/x/s", "/ws/v2/reader/persistent/t/ns/x",
		"/ws/v2/pingpong", "/ws/pingpong", "/ws/producer/persistent/a/b/c/d", "/ws/v2/consumer/non-persistent/t/ns/x/s",
		"/ws/v2/producer/persistent/t/ns/%2F", "/ws/v2/producer/persistent/t/ns/%zz", "/", "", "/ws", "/ws/v2//////",
		"/ws/v2/consumer/persistent/t/ns/x-partition-3/s%20b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		tg, err := parsePath(p)
		if err != nil {
			he, ok := err.(*httpError)
			if !ok || (he.status != 400 && he.status != 404) || he.msg == "" {
				t.Fatalf("%q: %v", p, err)
			}
			return
		}
		if tg.kind == epPingPong {
			return
		}
		if err := tg.topic.Validate(); err != nil {
			t.Fatalf("%q: invalid topic accepted: %v", p, err)
		}
		if (tg.kind == epConsumer) != (tg.subscription != "") {
			t.Fatalf("%q: kind %v, subscription %q", p, tg.kind, tg.subscription)
		}
	})
}
