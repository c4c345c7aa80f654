package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestKafkaBadFrames: truncated, oversized and garbage frames and unknown
// API keys close the offending connection; a client on another connection
// keeps working and nothing reaches the log.
func TestKafkaBadFrames(t *testing.T) {
	node := startKafka(t)
	addr := node.KafkaAddr()
	const topic = "bad-input"
	createTopic(t, addr, topic, 1, nil)
	good := kgoClient(t, addr, kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := good.ProduceSync(ctx, &kgo.Record{Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	hw := highWatermarks(t, node, topic, 1)[0]

	valid := func() []byte {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(7)
		req.Acks = -1
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rt.Partitions = []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: idemBatch(t, -1, -1, -1, 3)}}
		req.Topics = []kmsg.ProduceRequestTopic{rt}
		return frame(req, 1, "bad")
	}
	withSize := func(b []byte) []byte {
		binary.BigEndian.PutUint32(b, uint32(len(b)-4))
		return b
	}
	rng := rand.New(rand.NewPCG(1, 2))
	garbage := make([]byte, 200)
	for i := range garbage {
		garbage[i] = byte(rng.Uint32())
	}
	cases := []struct {
		name  string
		bytes []byte
	}{
		{"truncated body", withSize(valid()[:60])},
		{"frame cut off by the client", valid()[:40]},
		{"oversized", []byte{0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 7}},
		{"negative size", []byte{0xff, 0xff, 0xff, 0xf0, 0, 0}},
		{"too short for a header", []byte{0, 0, 0, 4, 0, 0, 0, 0}},
		{"garbage", withSize(append([]byte{0, 0, 0, 0}, garbage...))},
		{"unknown API key", withSize(append([]byte{0, 0, 0, 0, 0x03, 0xe7, 0, 0, 0, 0, 0, 1, 0, 0}, garbage[:20]...))},
		{"unsupported Produce version", withSize(append([]byte{0, 0, 0, 0, 0, 0, 0, 40, 0, 0, 0, 1, 0, 0}, garbage[:20]...))},
		{"client id past the frame", withSize([]byte{0, 0, 0, 0, 0, 18, 0, 0, 0, 0, 0, 1, 0x7f, 0xff, 1})},
		{"bad header tags", withSize([]byte{0, 0, 0, 0, 0, 18, 0, 3, 0, 0, 0, 1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})},
	}
	for _, c := range cases {
		rc := dialRaw(t, addr)
		if _, err := rc.c.Write(c.bytes); err != nil {
			t.Fatalf("%s: write: %v", c.name, err)
		}
		if c.name == "frame cut off by the client" {
			_ = rc.c.(interface{ CloseWrite() error }).CloseWrite()
		}
		if !rc.closedByServer(5 * time.Second) {
			t.Errorf("%s: the connection stayed open", c.name)
		}
		if err := good.ProduceSync(ctx, &kgo.Record{Value: []byte("after " + c.name)}).FirstErr(); err != nil {
			t.Fatalf("after %s: the good client failed: %v", c.name, err)
		}
		hw++
		if got := highWatermarks(t, node, topic, 1)[0]; got != hw {
			t.Fatalf("after %s: high watermark %d, want %d (only the good client's record)", c.name, got, hw)
		}
	}

	// A corrupt batch inside a well-formed request is an error answer, not
	// a protocol violation: the connection stays and nothing is written.
	rc := dialRaw(t, addr)
	batch := idemBatch(t, -1, -1, -1, 3)
	batch[len(batch)-1] ^= 0xff
	got := produceRaw(t, rc, topic, batch)
	if got.ErrorCode != kerr.CorruptMessage.Code {
		t.Errorf("corrupt batch: error %d, want CORRUPT_MESSAGE", got.ErrorCode)
	}
	if got := produceRaw(t, rc, topic, idemBatch(t, -1, -1, -1, 2)); got.ErrorCode != 0 || got.BaseOffset != hw {
		t.Errorf("valid batch after the corrupt one: error %d base %d, want base %d", got.ErrorCode, got.BaseOffset, hw)
	}

	// The violations are counted in /metrics.
	resp, err := http.Get(node.HTTPURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := fmt.Sprintf(`tern_kafka_protocol_errors_total{node="%s",region="local"} %d`, node.Name, len(cases))
	if !strings.Contains(string(body), want) || !strings.Contains(string(body), `tern_kafka_requests_total{api="Produce"`) {
		t.Errorf("/metrics lacks %q or the Produce request count:\n%s", want, grepLines(string(body), "tern_kafka"))
	}
	// Answered requests are timed, by API.
	for _, api := range []string{"Produce", "Metadata"} {
		if !strings.Contains(string(body), fmt.Sprintf(`tern_kafka_request_seconds_count{api="%s",node="%s",region="local"}`, api, node.Name)) {
			t.Errorf("/metrics has no request time for %s:\n%s", api, grepLines(string(body), "tern_kafka_request_seconds_count"))
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestKafkaMessageTooLarge: a record over the topic's max.message.bytes
// gets MESSAGE_TOO_LARGE and is not written.
func TestKafkaMessageTooLarge(t *testing.T) {
	node := startKafka(t)
	addr := node.KafkaAddr()
	const topic = "too-large"
	createTopic(t, addr, topic, 1, map[string]string{"max.message.bytes": "2048"})
	cl := kgoClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.RecordRetries(1), kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := cl.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 4096)}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("4 KiB record on a 2 KiB topic: %v, want MESSAGE_TOO_LARGE", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 1024)}).FirstErr(); err != nil {
		t.Fatalf("1 KiB record: %v", err)
	}
	if hw := highWatermarks(t, node, topic, 1)[0]; hw != 1 {
		t.Fatalf("high watermark %d, want 1", hw)
	}
}
