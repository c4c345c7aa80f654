package websocket_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ternmq/tern/configs"
	"github.com/ternmq/tern/internal/testcluster"
	ws "github.com/ternmq/tern/protocols/websocket"
)

// TestBadConsumerCommands: a consumer command that is not JSON, an ack
// without or with an undecodable messageId, and a permit without a count
// close the session with 4003 and a reason; other sessions go on.
func TestBadConsumerCommands(t *testing.T) {
	n := startNode(t)
	topic := topicName("badcmd")
	witness := dial(t, n, consumerPath(topic, "witness", ""))
	prod := dial(t, n, producerPath(topic, ""))
	cases := []struct{ raw, want string }{
		{`{"messageId": `, "de-serialize from JSON: invalid JSON"},
		{`hello`, "de-serialize from JSON: invalid JSON"},
		{`{"type": "negativeAcknowledge"}`, `names no "messageId"`},
		{`{"messageId": "***"}`, "messageId: pulsar: malformed message id"},
		{`{"messageId": "AAAA"}`, "does not hold a message id"},
		{`{"type": "permit"}`, `needs "permitMessages"`},
		{`{"type": "permit", "permitMessages": -3}`, `needs "permitMessages"`},
		{`{"type": 7}`, "wrong type"},
	}
	for i, tc := range cases {
		c := dial(t, n, consumerPath(topic, fmt.Sprint("bad", i), "pullMode=true"))
		writeText(t, c, tc.raw)
		expectClose(t, c, ws.CloseFailedToDeserializeFromJSON, tc.want)
	}
	produceOK(t, prod, "still served", nil)
	if m := receive(t, witness); m.text(t) != "still served" {
		t.Fatalf("witness got %q", m.text(t))
	}
	if ws.PulsarCode(ws.CloseFailedToDeserializeFromJSON) != 3 || ws.PulsarCode(websocket.StatusNormalClosure) != 0 {
		t.Fatal("PulsarCode")
	}
}

// smallNode is a node with a 64 KiB message limit.
func smallNode(t testing.TB) *testcluster.Node {
	return testcluster.Start(t, testcluster.Spec{Tweak: func(c *configs.Node) { c.Limits.MaxMessageBytes = 64 << 10 }}).Node(0)
}

// TestOversizedFrames: a frame over the limit closes the session with
// 1009 and a reason; nothing of it is written and other sessions go on. A
// payload within the frame limit but over the message limit gets
// send-error:7 and the session goes on.
func TestOversizedFrames(t *testing.T) {
	n := smallNode(t)
	topic := topicName("big")
	witness := dial(t, n, producerPath(topic, ""))
	big := dial(t, n, producerPath(topic, ""))
	huge := strings.Repeat("A", 400<<10)
	writeText(t, big, `{"payload": "`+huge+`"}`)
	expectClose(t, big, websocket.StatusMessageTooBig, "over the limit of")

	over := dial(t, n, producerPath(topic, ""))
	a := produce(t, over, map[string]any{"payload": b64(strings.Repeat("x", 70<<10))})
	if a.Result != "send-error:7" || !strings.Contains(a.ErrorMsg, "exceeds the limit") {
		t.Fatalf("over the message limit: %+v", a)
	}
	produceOK(t, over, "fits", nil)
	produceOK(t, witness, "witness", nil)
	msgs := logMessages(t, n, local(topic))
	if len(msgs) != 2 {
		t.Fatalf("%d messages stored", len(msgs))
	}
	// Consumers send only commands; a large one is refused the same way.
	c := dial(t, n, consumerPath(topic, "s", ""))
	writeText(t, c, `{"messageId": "`+strings.Repeat("A", 100<<10)+`"}`)
	expectClose(t, c, websocket.StatusMessageTooBig, "over the limit")
}

// TestBinaryFrames: binary messages are refused with 1003.
func TestBinaryFrames(t *testing.T) {
	n := startNode(t)
	c := dial(t, n, producerPath(topicName("bin"), ""))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.c.Write(ctx, websocket.MessageBinary, []byte(`{"payload": "aGk="}`)); err != nil {
		t.Fatal(err)
	}
	expectClose(t, c, websocket.StatusUnsupportedData, "send JSON in text messages")
}

// TestBadPaths: unknown topic forms and bad parameters are refused at the
// upgrade with Pulsar's status codes and a reason.
func TestBadPaths(t *testing.T) {
	n := startNode(t)
	cases := []struct {
		path   string
		status int
		want   string
	}{
		{"/ws/v2/producer/non-persistent/public/default/t", 400, "non-persistent topics are not served"},
		{"/ws/v2/producer/persistent/public/default", 400, "want /ws/v2/producer/persistent/{tenant}/{namespace}/{topic}"},
		{"/ws/v2/producer/persistent/public/default/a/b", 400, "segments"},
		{"/ws/v2/producer/storage/public/default/t", 400, "domain"},
		{"/ws/v2/consumer/persistent/public/default/t", 400, "{subscription}"},
		{"/ws/v2/consumer/persistent/public/default/t/", 400, "empty subscription"},
		{"/ws/v2/producer/persistent/public/default/bad%20name", 400, "topic name"},
		{"/ws/v2/producer/persistent/public/default/a%2Fb", 400, "topic name"},
		{"/ws/producer/persistent/public/cluster/default/t", 400, "v1 paths"},
		{"/ws/v3/consumer/sub", 400, "multi-topic"},
		{"/ws/v2/subscriber/persistent/public/default/t", 404, "no WebSocket endpoint"},
		{"/ws/v9", 404, "no WebSocket endpoint"},
		{"/ws/v2/consumer/persistent/public/default/t/s?subscriptionType=Bogus&receiverQueueSize=abc", 400, "Invalid subscriptionType Bogus"},
		{"/ws/v2/consumer/persistent/public/default/t/s?receiverQueueSize=abc&priorityLevel=-1", 400, "receiverQueueSize=\"abc\" is not a whole number; priorityLevel=-1 is out of range"},
		{"/ws/v2/consumer/persistent/public/default/t/s?pullMode=maybe", 400, "pullMode"},
		{"/ws/v2/consumer/persistent/public/default/t/s?deadLetterTopic=x", 400, "maxRedeliverCount must be > 0"},
		{"/ws/v2/producer/persistent/public/default/t?compressionType=GZIP", 400, "Invalid compressionType"},
		{"/ws/v2/producer/persistent/public/default/t?encryptionKeys=k", 400, "does not encrypt"},
		{"/ws/v2/producer/persistent/public/default/t?initialSequenceId=x", 400, "initialSequenceId"},
		{"/ws/v2/producer/persistent/nosuchtenant/default/t", 404, "Failed to create producer"},
	}
	for _, tc := range cases {
		body := dialRefused(t, n, tc.path, tc.status)
		if !strings.Contains(body, tc.want) {
			t.Errorf("%s: body %q; want %q", tc.path, body, tc.want)
		}
	}
	// Plain HTTP requests are told what the endpoint is.
	resp, err := http.Get(n.HTTPURL() + "/ws/v2/producer/persistent/public/default/t")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUpgradeRequired {
		t.Fatalf("plain GET: HTTP %d", resp.StatusCode)
	}
	resp, err = http.Post(n.HTTPURL()+"/ws/v2/pingpong", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST: HTTP %d", resp.StatusCode)
	}
}

// TestPingPong: /ws/v2/pingpong answers pings.
func TestPingPong(t *testing.T) {
	n := startNode(t)
	for _, p := range []string{"/ws/v2/pingpong", "/ws/pingpong"} {
		c := dial(t, n, p)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := c.c.Ping(ctx)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
}

// serveCustom runs a WebSocket server with cfg over node n's messaging on
// its own loopback listener.
func serveCustom(t testing.TB, n *testcluster.Node, cfg ws.Config) string {
	t.Helper()
	srv, err := ws.New(cfg, n.Proxy())
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Error(err)
		}
		hs.Close()
	})
	return "ws" + strings.TrimPrefix(hs.URL, "http")
}

func dialURL(url string, h http.Header) (*client, int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		if resp == nil {
			return nil, 0, "", err
		}
		buf := make([]byte, 4096)
		k, _ := resp.Body.Read(buf)
		return nil, resp.StatusCode, string(buf[:k]), err
	}
	return newClient(c), http.StatusSwitchingProtocols, "", nil
}

// TestAuthentication: with an AuthFunc the token comes from the token
// parameter or the Authorization header; refusals are 401 and 403.
func TestAuthentication(t *testing.T) {
	n := startNode(t)
	cfg := ws.DefaultConfig()
	cfg.Authenticate = func(r *http.Request, token string, a ws.Access) error {
		switch {
		case token == "":
			return fmt.Errorf("%w: no token", ws.ErrUnauthenticated)
		case token != "secret":
			return fmt.Errorf("%w: unknown token", ws.ErrUnauthenticated)
		case a.Action == "consume" && a.Subscription != "allowed":
			return fmt.Errorf("%w: subscription %s", ws.ErrForbidden, a.Subscription)
		}
		return nil
	}
	base := serveCustom(t, n, cfg)
	topic := topicName("auth")
	check := func(path string, h http.Header, want int) {
		t.Helper()
		c, status, body, err := dialURL(base+path, h)
		if c != nil {
			_ = c.CloseNow()
		}
		if status != want {
			t.Fatalf("%s: HTTP %d (%v, %q); want %d", path, status, err, body, want)
		}
	}
	check(producerPath(topic, ""), nil, http.StatusUnauthorized)
	check(producerPath(topic, "token=wrong"), nil, http.StatusUnauthorized)
	check(producerPath(topic, "token=secret"), nil, http.StatusSwitchingProtocols)
	check(producerPath(topic, "token=Bearer%20secret"), nil, http.StatusSwitchingProtocols)
	check(producerPath(topic, ""), http.Header{"Authorization": {"Bearer secret"}}, http.StatusSwitchingProtocols)
	check(consumerPath(topic, "other", "token=secret"), nil, http.StatusForbidden)
	check(consumerPath(topic, "allowed", "token=secret"), nil, http.StatusSwitchingProtocols)
	check("/ws/v2/pingpong", nil, http.StatusSwitchingProtocols)
}

// TestServerLimits: topics are not created when auto-creation is off
// (404), sessions past MaxSessions get 503, browsers from other origins
// get 403 when origins are restricted, and Close ends open sessions with
// 1001.
func TestServerLimits(t *testing.T) {
	n := startNode(t)
	cfg := ws.DefaultConfig()
	cfg.AutoCreateTopics = false
	cfg.MaxSessions = 2
	cfg.AllowedOrigins = []string{"*.example.com"}
	srv, err := ws.New(cfg, n.Proxy())
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	base := "ws" + strings.TrimPrefix(hs.URL, "http")
	if _, status, body, _ := dialURL(base+producerPath(topicName("missing"), ""), nil); status != http.StatusNotFound || !strings.Contains(body, "topic not found") {
		t.Fatalf("missing topic: %d %q", status, body)
	}
	if _, status, _, _ := dialURL(base+"/ws/v2/pingpong", http.Header{"Origin": {"https://evil.test"}}); status != http.StatusForbidden {
		t.Fatalf("foreign origin: %d", status)
	}
	a, _, _, err := dialURL(base+"/ws/v2/pingpong", http.Header{"Origin": {"https://app.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _, _, err := dialURL(base+"/ws/v2/pingpong", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, status, body, _ := dialURL(base+"/ws/v2/pingpong", nil); status != http.StatusServiceUnavailable || !strings.Contains(body, "maximum of 2") {
		t.Fatalf("third session: %d %q", status, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*client{a, b} {
		expectClose(t, c, websocket.StatusGoingAway, "shutting down")
	}
	if m := srv.Metrics(); m.PingPongs != 0 || m.Sessions != 2 || m.Refused < 3 {
		t.Fatalf("metrics %+v", m)
	}
}
