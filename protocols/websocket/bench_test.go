package websocket

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"
)

// BenchmarkDecodeProducerMessage decodes what a producer sends for a
// 1 KiB message with a context and a property: the JSON and base64 cost
// the node pays per WebSocket message. MB/s counts payload bytes.
func BenchmarkDecodeProducerMessage(b *testing.B) {
	payload := make([]byte, 1024)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	raw, err := json.Marshal(map[string]any{
		"payload":    base64.StdEncoding.EncodeToString(payload),
		"context":    "123456",
		"properties": map[string]string{"app": "bench"},
	})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		m, code, err := decodeProducerMessage(raw, 1<<20, now)
		if err != nil || code != 0 || len(m.payload) != len(payload) {
			b.Fatal(code, err)
		}
	}
}

// BenchmarkEncodePushedMessage encodes a 1 KiB message pushed to a
// consumer, as the session does and, beside it, as encoding/json did with
// the payload made into base64 first. MB/s counts payload bytes.
func BenchmarkEncodePushedMessage(b *testing.B) {
	payload := make([]byte, 1024)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	cm := consumerMessage{MessageID: "CAAQAw==", Payload: payload, Properties: map[string]string{"app": "bench"},
		PublishTime: formatTime(1_700_000_000_000)}
	b.Run("tern", func(b *testing.B) {
		b.SetBytes(int64(len(payload)))
		b.ReportAllocs()
		var buf bytes.Buffer
		for b.Loop() {
			if _, err := marshalTo(&buf, cm); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(payload)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encodeAsBefore(cm); err != nil {
				b.Fatal(err)
			}
		}
	})
}
