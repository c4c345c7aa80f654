package websocket_test

import (
	"fmt"
	"testing"
	"time"
)

// TestPushedMessagesShareWrites: a reader catching up on a backlog gets
// its messages several to a write on the connection (the session corks
// it while it writes a batch), in order. Before, each message was a
// write of its own.
func TestPushedMessagesShareWrites(t *testing.T) {
	n := startNode(t)
	topic := topicName("cork")
	prod := dial(t, n, producerPath(topic, ""))
	const count = 200
	produceN(t, prod, "m", count)
	srv := n.Proxy().WebSocket()
	before := srv.Metrics()
	rd := dial(t, n, readerPath(topic, "messageId=earliest"))
	for i := range count {
		if got := receive(t, rd).text(t); got != fmt.Sprintf("m%d", i) {
			t.Fatalf("message %d is %q", i, got)
		}
	}
	after := srv.Metrics()
	frames, writes := after.FramesOut-before.FramesOut, after.Writes-before.Writes
	if frames < count {
		t.Fatalf("%d frames sent for %d messages", frames, count)
	}
	if writes == 0 || writes*4 > frames {
		t.Errorf("%d messages pushed in %d writes: want several to a write", frames, writes)
	}
	t.Logf("%d frames in %d writes", frames, writes)
}

// TestProducerReceiptsShareWrites: a producer sending many messages
// without waiting gets its answers, in order, several to a write: the
// answers of appends made durable by one commit leave together.
func TestProducerReceiptsShareWrites(t *testing.T) {
	n := startNode(t)
	topic := topicName("cork-produce")
	prod := dial(t, n, producerPath(topic, ""))
	produceOK(t, prod, "first", nil) // the topic and producer are set up
	srv := n.Proxy().WebSocket()
	before := srv.Metrics()
	const count = 500
	for i := range count {
		writeJSON(t, prod, map[string]any{"payload": b64(fmt.Sprintf("p%d", i)), "context": fmt.Sprint(i)})
	}
	for i := range count {
		var a ack
		readJSON(t, prod, 10*time.Second, &a)
		if a.Result != "ok" || a.Context == nil || *a.Context != fmt.Sprint(i) {
			t.Fatalf("answer %d: %+v", i, a)
		}
	}
	after := srv.Metrics()
	frames, writes := after.FramesOut-before.FramesOut, after.Writes-before.Writes
	if frames != count {
		t.Fatalf("%d frames sent for %d answers", frames, count)
	}
	if writes == 0 || writes*2 > frames {
		t.Errorf("%d answers in %d writes: want several to a write", frames, writes)
	}
	t.Logf("%d answers in %d writes", frames, writes)
}
