package websocket_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ternmq/tern/internal/testcluster"
)

// Helpers: every test runs a real node (internal/testcluster) and talks to
// it with coder/websocket as the client, over loopback.

var seq atomic.Int64

// topicName is a fresh topic local name.
func topicName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e6, seq.Add(1))
}

func startNode(t testing.TB) *testcluster.Node {
	t.Helper()
	return testcluster.Start(t).Node(0)
}

// wsURL is the WebSocket URL of path on n.
func wsURL(n *testcluster.Node, path string) string {
	return "ws://" + n.Config.Listeners.HTTP + path
}

func producerPath(topic string, q string) string {
	return withQuery("/ws/v2/producer/persistent/public/default/"+topic, q)
}

func consumerPath(topic, sub string, q string) string {
	return withQuery("/ws/v2/consumer/persistent/public/default/"+topic+"/"+sub, q)
}

func readerPath(topic string, q string) string {
	return withQuery("/ws/v2/reader/persistent/public/default/"+topic, q)
}

func withQuery(p, q string) string {
	if q == "" {
		return p
	}
	return p + "?" + q
}

// dial opens a session and closes it when the test ends.
func dial(t testing.TB, n *testcluster.Node, path string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, wsURL(n, path), nil)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial %s: %v (HTTP %d)", path, err, status)
	}
	c.SetReadLimit(64 << 20)
	t.Cleanup(func() { _ = c.CloseNow() })
	return c
}

// dialRefused expects the upgrade to be refused with status and returns
// the response body.
func dialRefused(t testing.TB, n *testcluster.Node, path string, status int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, wsURL(n, path), nil)
	if err == nil {
		_ = c.CloseNow()
		t.Fatalf("dial %s: upgraded; want HTTP %d", path, status)
	}
	if resp == nil {
		t.Fatalf("dial %s: %v; want HTTP %d", path, err, status)
	}
	if resp.StatusCode != status {
		t.Fatalf("dial %s: HTTP %d (%v); want %d", path, resp.StatusCode, err, status)
	}
	var body strings.Builder
	buf := make([]byte, 4096)
	for {
		k, err := resp.Body.Read(buf)
		body.Write(buf[:k])
		if err != nil {
			break
		}
	}
	return body.String()
}

func writeJSON(t testing.TB, c *websocket.Conn, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	writeText(t, c, string(b))
}

func writeText(t testing.TB, c *websocket.Conn, s string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageText, []byte(s)); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// readJSON reads one message into v within d.
func readJSON(t testing.TB, c *websocket.Conn, d time.Duration, v any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_, b, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}

// tryRead reads one message within d; ok is false on timeout.
func tryRead(c *websocket.Conn, d time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_, b, err := c.Read(ctx)
	return b, err
}

type ack struct {
	Result    string  `json:"result"`
	ErrorMsg  string  `json:"errorMsg"`
	MessageID string  `json:"messageId"`
	Context   *string `json:"context"`
}

type msg struct {
	MessageID       string            `json:"messageId"`
	Payload         string            `json:"payload"`
	Properties      map[string]string `json:"properties"`
	PublishTime     string            `json:"publishTime"`
	RedeliveryCount int               `json:"redeliveryCount"`
	EventTime       string            `json:"eventTime"`
	Key             *string           `json:"key"`
}

func (m msg) text(t testing.TB) string {
	b, err := base64.StdEncoding.DecodeString(m.Payload)
	if err != nil {
		t.Fatalf("payload %q: %v", m.Payload, err)
	}
	return string(b)
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// produce sends a message and waits for its ack.
func produce(t testing.TB, c *websocket.Conn, m map[string]any) ack {
	t.Helper()
	writeJSON(t, c, m)
	var a ack
	readJSON(t, c, 10*time.Second, &a)
	return a
}

// produceOK sends payload (with optional fields) and expects "ok".
func produceOK(t testing.TB, c *websocket.Conn, payload string, extra map[string]any) string {
	t.Helper()
	m := map[string]any{"payload": b64(payload)}
	for k, v := range extra {
		m[k] = v
	}
	a := produce(t, c, m)
	if a.Result != "ok" || a.MessageID == "" {
		t.Fatalf("produce %q: %+v", payload, a)
	}
	return a.MessageID
}

// expectClose reads until the session closes and checks the code and
// that the reason contains want.
func expectClose(t testing.TB, c *websocket.Conn, code websocket.StatusCode, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		_, err := tryRead(c, time.Until(deadline))
		if err == nil {
			continue
		}
		var ce websocket.CloseError
		if !errorsAs(err, &ce) {
			t.Fatalf("session ended with %v; want close code %d", err, code)
		}
		if ce.Code != code || !strings.Contains(ce.Reason, want) {
			t.Fatalf("closed with %d %q; want %d containing %q", ce.Code, ce.Reason, code, want)
		}
		return
	}
	t.Fatalf("session still open; want close code %d", code)
}

var _ = http.StatusOK
