package websocket_test

import (
	"fmt"
	"testing"
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
