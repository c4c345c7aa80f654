package websocket_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pulsarapi "github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/coder/websocket"

	"google.golang.org/protobuf/proto"

	"github.com/ternmq/tern/internal/testcluster"
	"github.com/ternmq/tern/protocols/pulsar/pb"
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

// client is a WebSocket client session. A goroutine reads every message
// into a channel, so that waiting for a message with a deadline never
// cancels a read (which closes a coder/websocket connection).
type client struct {
	c  *websocket.Conn
	in chan frame
}

type frame struct {
	b   []byte
	err error
}

func newClient(c *websocket.Conn) *client {
	c.SetReadLimit(64 << 20)
	cl := &client{c: c, in: make(chan frame, 100000)}
	go func() {
		for {
			_, b, err := c.Read(context.Background())
			cl.in <- frame{b: b, err: err}
			if err != nil {
				return
			}
		}
	}()
	return cl
}

// CloseNow drops the connection.
func (cl *client) CloseNow() error { return cl.c.CloseNow() }

// Close closes the session normally.
func (cl *client) Close(code websocket.StatusCode, reason string) error {
	return cl.c.Close(code, reason)
}

// dial opens a session and closes it when the test ends.
func dial(t testing.TB, n *testcluster.Node, path string) *client {
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
	t.Cleanup(func() { _ = c.CloseNow() })
	return newClient(c)
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

func writeJSON(t testing.TB, c *client, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	writeText(t, c, string(b))
}

func writeText(t testing.TB, c *client, s string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.c.Write(ctx, websocket.MessageText, []byte(s)); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// readJSON reads one message into v within d.
func readJSON(t testing.TB, c *client, d time.Duration, v any) {
	t.Helper()
	b, err := tryRead(c, d)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}

var errTimeout = errors.New("no message within the deadline")

// tryRead returns the next message within d.
func tryRead(c *client, d time.Duration) ([]byte, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case f := <-c.in:
		if f.err != nil {
			// Keep reporting the end to later reads.
			c.in <- f
		}
		return f.b, f.err
	case <-t.C:
		return nil, errTimeout
	}
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
func produce(t testing.TB, c *client, m map[string]any) ack {
	t.Helper()
	writeJSON(t, c, m)
	var a ack
	readJSON(t, c, 10*time.Second, &a)
	return a
}

// produceOK sends payload (with optional fields) and expects "ok".
func produceOK(t testing.TB, c *client, payload string, extra map[string]any) string {
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
func expectClose(t testing.TB, c *client, code websocket.StatusCode, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		_, err := tryRead(c, time.Until(deadline))
		if err == nil {
			continue
		}
		if errors.Is(err, errTimeout) {
			break
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

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// expectNothing checks that no message arrives within d.
func expectNothing(t testing.TB, c *client, d time.Duration) {
	t.Helper()
	if b, err := tryRead(c, d); err == nil {
		t.Fatalf("unexpected message %s", b)
	}
}

// receive reads one pushed message.
func receive(t testing.TB, c *client) msg {
	t.Helper()
	var m msg
	readJSON(t, c, 10*time.Second, &m)
	if m.MessageID == "" {
		t.Fatalf("not a message: %+v", m)
	}
	return m
}

// ackMsg acknowledges a message.
func ackMsg(t testing.TB, c *client, m msg) {
	t.Helper()
	writeJSON(t, c, map[string]any{"messageId": m.MessageID})
}

type wsConn = client

// tryDial opens a session or returns the error.
func tryDial(n *testcluster.Node, path string) (*client, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, wsURL(n, path), nil)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("%w (HTTP %d)", err, resp.StatusCode)
		}
		return nil, err
	}
	return newClient(c), nil
}

func jsonDecode(resp *http.Response, v any) error { return json.NewDecoder(resp.Body).Decode(v) }

// pulsarClient connects a Pulsar Go client to n.
func pulsarClient(n *testcluster.Node) (pulsarapi.Client, error) {
	return pulsarapi.NewClient(pulsarapi.ClientOptions{URL: n.PulsarURL(), OperationTimeout: 20 * time.Second, Logger: plog.DefaultNopLogger()})
}

// sendBatch sends n messages b0..b(n-1) as one batch.
func sendBatch(t testing.TB, c pulsarapi.Client, topic string, n int) {
	t.Helper()
	p, err := c.CreateProducer(pulsarapi.ProducerOptions{Topic: topic, BatchingMaxMessages: uint(n), BatchingMaxPublishDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	done := make(chan error, n)
	for i := range n {
		p.SendAsync(context.Background(), &pulsarapi.ProducerMessage{Payload: []byte(fmt.Sprint("b", i))}, func(_ pulsarapi.MessageID, _ *pulsarapi.ProducerMessage, err error) { done <- err })
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func pulsarID(ledger, entry uint64, partition int32) *pb.MessageIdData {
	return &pb.MessageIdData{LedgerId: proto.Uint64(ledger), EntryId: proto.Uint64(entry), Partition: proto.Int32(partition)}
}
