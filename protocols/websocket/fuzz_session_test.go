package websocket_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ternmq/tern/internal/testcluster"
)

// FuzzSessions sends arbitrary messages to live producer, consumer and
// reader sessions of a real node. The input is split into messages at NUL
// bytes; a message starting with 0x01 goes as a binary frame. Whatever the
// sessions do with them (answer, refuse, close), the node must stay up:
// afterwards a new session still gets its pings answered and a producer
// still gets "ok".
func FuzzSessions(f *testing.F) {
	for _, s := range []string{
		`{"payload":"aGk="}`, `{"payload":"aGk=","sequenceId":3}` + "\x00" + `{"payload":"aGk=","sequenceId":1}`,
		`{"messageId":"CAAQAA=="}` + "\x00" + `{"type":"negativeAcknowledge","messageId":"CAAQAA=="}`,
		`{"type":"permit","permitMessages":100}` + "\x00" + `{"type":"unsubscribe"}`, "\x01binary", `{`, "\x00\x00",
		`{"type":"isEndOfTopic"}`, `{"payload":"` + string(bytes.Repeat([]byte("QUFB"), 1000)) + `"}`,
	} {
		f.Add([]byte(s))
	}
	n := testcluster.Start(f).Node(0)
	topic := topicName("fuzz")
	paths := []string{
		producerPath(topic, ""),
		consumerPath(topic, "fz", "subscriptionType=Shared&negativeAckRedeliveryDelay=0"),
		consumerPath(topic, "fp", "subscriptionType=Shared&pullMode=true"),
		readerPath(topic, "messageId=earliest"),
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		for _, p := range paths {
			c, err := tryDial(n, p)
			if err != nil {
				t.Fatalf("dial %s: %v", p, err)
			}
			for _, m := range bytes.Split(input, []byte{0}) {
				typ := websocket.MessageText
				if len(m) > 0 && m[0] == 1 {
					typ = websocket.MessageBinary
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := c.c.Write(ctx, typ, m)
				cancel()
				if err != nil {
					break // the session closed itself: allowed
				}
			}
			_ = c.CloseNow()
		}
		probe, err := tryDial(n, "/ws/v2/pingpong")
		if err != nil {
			t.Fatalf("pingpong after the input: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := probe.c.Ping(ctx); err != nil {
			t.Fatalf("ping after the input: %v", err)
		}
		_ = probe.CloseNow()
		prod, err := tryDial(n, producerPath(topicName("fuzz-probe"), ""))
		if err != nil {
			t.Fatal(err)
		}
		defer prod.CloseNow()
		produceOK(t, prod, "probe", nil)
	})
}
