package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ternmq/tern/internal/testcluster"
)

// Helpers for the WebSocket end-to-end tests: coder/websocket as the
// client of Pulsar's WebSocket API v2 on a node's HTTP port.

// wsClient is a WebSocket session whose messages a goroutine reads into a
// channel, so waiting with a deadline never cancels a read.
type wsClient struct {
	c  *websocket.Conn
	in chan wsFrame
}

type wsFrame struct {
	b   []byte
	err error
}

// wsDial opens a session at path on n; it closes with the test.
func wsDial(t testing.TB, n *testcluster.Node, path string) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws://"+n.Config.Listeners.HTTP+path, nil)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial %s: %v (HTTP %d)", path, err, status)
	}
	c.SetReadLimit(64 << 20)
	t.Cleanup(func() { _ = c.CloseNow() })
	w := &wsClient{c: c, in: make(chan wsFrame, 10000)}
	go func() {
		for {
			_, b, err := c.Read(context.Background())
			w.in <- wsFrame{b, err}
			if err != nil {
				return
			}
		}
	}()
	return w
}

func (w *wsClient) send(t testing.TB, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.c.Write(ctx, websocket.MessageText, b); err != nil {
		t.Fatalf("write: %v", err)
	}
}

var errWSTimeout = errors.New("no WebSocket message within the deadline")

func (w *wsClient) next(d time.Duration) ([]byte, error) {
	select {
	case f := <-w.in:
		if f.err != nil {
			w.in <- f
		}
		return f.b, f.err
	case <-time.After(d):
		return nil, errWSTimeout
	}
}

func (w *wsClient) recv(t testing.TB, v any) {
	t.Helper()
	b, err := w.next(20 * time.Second)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}

// wsMessage is a message pushed to a consumer or reader.
type wsMessage struct {
	MessageID       string            `json:"messageId"`
	Payload         string            `json:"payload"`
	Properties      map[string]string `json:"properties"`
	PublishTime     string            `json:"publishTime"`
	RedeliveryCount int               `json:"redeliveryCount"`
	EventTime       string            `json:"eventTime"`
	Key             *string           `json:"key"`
}

func (m wsMessage) data(t testing.TB) string {
	b, err := base64.StdEncoding.DecodeString(m.Payload)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// wsProduce sends a message and returns its id, failing on an error ack.
func (w *wsClient) produce(t testing.TB, m map[string]any) string {
	t.Helper()
	w.send(t, m)
	var a struct {
		Result, ErrorMsg, MessageID string
	}
	w.recv(t, &a)
	if a.Result != "ok" {
		t.Fatalf("produce: %s %s", a.Result, a.ErrorMsg)
	}
	return a.MessageID
}

// wsReceive reads one message and acknowledges it.
func (w *wsClient) receiveAck(t testing.TB) wsMessage {
	t.Helper()
	var m wsMessage
	w.recv(t, &m)
	if m.MessageID == "" {
		t.Fatalf("not a message: %+v", m)
	}
	w.send(t, map[string]string{"messageId": m.MessageID})
	return m
}

func b64s(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
