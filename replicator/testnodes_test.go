package replicator

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ternmq/tern/internal/logbuf"
)

const testSecret = "test mesh secret, 32 bytes long!"

// logCapture collects log lines so tests can assert on what was logged, and prints them when
// the test fails.
type logCapture struct{ logbuf.Buffer }

// lines returns the logged lines containing every one of subs.
func (c *logCapture) lines(subs ...string) []string {
	var out []string
	for _, l := range strings.Split(c.String(), "\n") {
		ok := l != ""
		for _, s := range subs {
			ok = ok && strings.Contains(l, s)
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

func newLogger(t testing.TB) (*slog.Logger, *logCapture) {
	c := &logCapture{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", c.String())
		}
	})
	return slog.New(slog.NewTextHandler(c, &slog.HandlerOptions{Level: slog.LevelDebug})), c
}

// testConfig is a dev-mode config on loopback with timings short enough for tests.
func testConfig(t testing.TB, name, region string) (Config, *logCapture) {
	cfg := DefaultConfig()
	cfg.ListenAddr = "127.0.0.1:0"
	cfg.NodeName = name
	cfg.Region = region
	cfg.TLS.MeshSecret = testSecret
	cfg.HandshakeTimeout = 3 * time.Second
	cfg.KeepAlivePeriod = time.Second
	cfg.IdleTimeout = 10 * time.Second
	cfg.HeartbeatInterval = 100 * time.Millisecond
	cfg.HeartbeatTimeout = 2 * time.Second // generous: the test machine is shared and busy
	cfg.ReconnectInitial = 50 * time.Millisecond
	cfg.ReconnectMax = 400 * time.Millisecond
	var logs *logCapture
	cfg.Logger, logs = newLogger(t)
	return cfg, logs
}

type testNode struct {
	*Transport
	pc   *SeverableConn
	logs *logCapture
}

func (n *testNode) addrPort() netip.AddrPort {
	return n.Addr().(*net.UDPAddr).AddrPort()
}

func (n *testNode) peer() Peer {
	return Peer{Name: n.cfg.NodeName, Region: n.cfg.Region, Addr: n.Addr().String()}
}

func startNode(t testing.TB, cfg Config, logs *logCapture, h Handler) *testNode {
	t.Helper()
	udp, err := net.ListenPacket("udp", cfg.ListenAddr)
	if err != nil {
		t.Fatal(err)
	}
	pc := NewSeverableConn(udp)
	tr, err := NewWithConn(cfg, h, pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tr.Close(); err != nil {
			t.Errorf("close %s: %v", cfg.NodeName, err)
		}
	})
	return &testNode{Transport: tr, pc: pc, logs: logs}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func linkState(n *testNode, peer string) LinkStats {
	s, _ := n.LinkStats(peer)
	return s
}

func waitUp(t testing.TB, n *testNode, peer string) {
	t.Helper()
	waitFor(t, 10*time.Second, fmt.Sprintf("%s -> %s up", n.cfg.NodeName, peer), func() bool {
		return linkState(n, peer).State == LinkUp
	})
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func entriesOf(start int64, n, size int) []Entry {
	out := make([]Entry, n)
	for i := range out {
		v := make([]byte, size)
		for j := range v {
			v[j] = byte(int(start) + i + j)
		}
		out[i] = Entry{Offset: start + int64(i)*2, Count: 2, Value: v}
	}
	return out
}

// sinkHandler receives every stream, records the entries and grants back and acks each batch.
type sinkHandler struct {
	mu      sync.Mutex
	got     map[string][]Entry // by topic/partition
	opens   []OpenRequest
	reject  func(OpenRequest) error
	streams sync.WaitGroup
}

func newSink() *sinkHandler { return &sinkHandler{got: make(map[string][]Entry)} }

func key(r OpenRequest) string { return fmt.Sprintf("%s/%d", r.Topic, r.Partition) }

func (h *sinkHandler) Accept(ctx context.Context, s *RecvStream) error {
	req := s.Request()
	h.mu.Lock()
	h.opens = append(h.opens, req)
	reject := h.reject
	h.mu.Unlock()
	if reject != nil {
		if err := reject(req); err != nil {
			return err
		}
	}
	for batches := 0; ; batches++ {
		b, err := s.Recv(ctx)
		if err != nil {
			return nil
		}
		h.mu.Lock()
		h.got[key(req)] = append(h.got[key(req)], b.Entries...)
		h.mu.Unlock()
		// Exercise both ways of settling a batch.
		if batches%2 == 0 {
			if err := s.AckAndGrant(b.End(), b.Credit()); err != nil {
				return nil
			}
			continue
		}
		if err := s.Ack(b.End()); err != nil {
			return nil
		}
		if err := s.Grant(b.Credit()); err != nil {
			return nil
		}
	}
}

func (h *sinkHandler) entries(k string) []Entry {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Entry(nil), h.got[k]...)
}

func sameEntries(t testing.TB, got, want []Entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d entries, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Offset != want[i].Offset || got[i].Count != want[i].Count || !bytes.Equal(got[i].Value, want[i].Value) {
			t.Fatalf("entry %d: got offset %d count %d len %d, want offset %d count %d len %d",
				i, got[i].Offset, got[i].Count, len(got[i].Value), want[i].Offset, want[i].Count, len(want[i].Value))
		}
	}
}

func openReq(topic string, part int32) OpenRequest {
	return OpenRequest{Topic: topic, Partition: part, PartitionCount: 4, DestRegion: "eu", StartOffset: 0}
}
