package websocket_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
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
	msgs := make([]map[string]any, count)
	for i := range msgs {
		msgs[i] = map[string]any{"payload": b64(fmt.Sprintf("p%d", i)), "context": fmt.Sprint(i)}
	}
	for i, a := range sendAll(t, prod, msgs) {
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

// TestFrameSentWithTheUpgradeIsRead: a client that writes its first
// message in the same packet as the upgrade request, before the answer,
// has it read: the bytes the HTTP server read past the request carry over
// to the session's reader.
func TestFrameSentWithTheUpgradeIsRead(t *testing.T) {
	n := startNode(t)
	topic := topicName("pipelined")
	nc, err := net.Dial("tcp", n.Config.Listeners.HTTP)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	req := "GET " + producerPath(topic, "") + " HTTP/1.1\r\nHost: " + n.Config.Listeners.HTTP +
		"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
	payload := []byte(`{"payload":"` + b64("first") + `","context":"c1"}`)
	// A masked text frame, as a client sends it.
	mask := []byte{1, 2, 3, 4}
	frame := append([]byte{0x81, 0x80 | byte(len(payload))}, mask...)
	for i, c := range payload {
		frame = append(frame, c^mask[i%4])
	}
	if _, err := nc.Write(append([]byte(req), frame...)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(nc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade answered %s", resp.Status)
	}
	head := make([]byte, 2)
	if _, err := io.ReadFull(br, head); err != nil {
		t.Fatalf("no answer to the message sent with the upgrade: %v", err)
	}
	if head[0] != 0x81 || head[1] >= 126 {
		t.Fatalf("answer frame header %x: want a short text frame", head)
	}
	body := make([]byte, head[1])
	if _, err := io.ReadFull(br, body); err != nil {
		t.Fatal(err)
	}
	var a ack
	if err := json.Unmarshal(body, &a); err != nil || a.Result != "ok" || a.Context == nil || *a.Context != "c1" {
		t.Fatalf("answer %s (%v); want ok for context c1", body, err)
	}
}
