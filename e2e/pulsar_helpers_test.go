package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/ternmq/tern/internal/testcluster"
	"github.com/ternmq/tern/protocols"
)

// Helpers for the Pulsar end-to-end tests: every test runs the real
// pulsar-client-go against in-process nodes over loopback sockets.

var topicSeq atomic.Int64

// newTopic returns a fresh topic name in public/default.
func newTopic(t testing.TB, prefix string) string {
	return fmt.Sprintf("persistent://public/default/%s-%d-%d", prefix, time.Now().UnixNano()%1e6, topicSeq.Add(1))
}

// testLog routes the client's log lines to t.Log (warnings and up, or
// everything with TERN_TEST_LOG set) until the test ends; later lines from
// the client's background goroutines are dropped.
type testLog struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func clientLogger(t testing.TB) plog.Logger {
	tl := &testLog{t: t}
	t.Cleanup(func() {
		tl.mu.Lock()
		tl.done = true
		tl.mu.Unlock()
	})
	level := slog.LevelError
	if os.Getenv("TERN_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	return plog.NewLoggerWithSlog(slog.New(slog.NewTextHandler(tl, &slog.HandlerOptions{Level: level})))
}

// newClient connects a Pulsar client to a node.
func newClient(t testing.TB, n *testcluster.Node) pulsar.Client {
	t.Helper()
	c, err := pulsar.NewClient(pulsar.ClientOptions{
		URL:               n.PulsarURL(),
		OperationTimeout:  20 * time.Second,
		ConnectionTimeout: 5 * time.Second,
		Logger:            clientLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func mustProducer(t testing.TB, c pulsar.Client, opts pulsar.ProducerOptions) pulsar.Producer {
	t.Helper()
	p, err := c.CreateProducer(opts)
	if err != nil {
		t.Fatalf("create producer on %s: %v", opts.Topic, err)
	}
	t.Cleanup(p.Close)
	return p
}

func mustSubscribe(t testing.TB, c pulsar.Client, opts pulsar.ConsumerOptions) pulsar.Consumer {
	t.Helper()
	cons, err := c.Subscribe(opts)
	if err != nil {
		t.Fatalf("subscribe %s on %s: %v", opts.SubscriptionName, opts.Topic, err)
	}
	t.Cleanup(cons.Close)
	return cons
}

// send publishes one message synchronously.
func send(t testing.TB, p pulsar.Producer, m *pulsar.ProducerMessage) pulsar.MessageID {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id, err := p.Send(ctx, m)
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	return id
}

// sendAsyncAll publishes n messages built by mk with SendAsync and waits for
// every receipt.
func sendAsyncAll(t testing.TB, p pulsar.Producer, n int, mk func(i int) *pulsar.ProducerMessage) []pulsar.MessageID {
	t.Helper()
	ids := make([]pulsar.MessageID, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	wg.Add(n)
	for i := 0; i < n; i++ {
		p.SendAsync(context.Background(), mk(i), func(id pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			mu.Lock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			ids[i] = id
			mu.Unlock()
			wg.Done()
		})
	}
	if err := p.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("receipts did not all arrive within 60s")
	}
	if firstErr != nil {
		t.Fatalf("send async: %v", firstErr)
	}
	return ids
}

// receive waits for one message.
func receive(t testing.TB, c pulsar.Consumer, timeout time.Duration) pulsar.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	m, err := c.Receive(ctx)
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	return m
}

// receiveN receives n messages, acking each when ack is set.
func receiveN(t testing.TB, c pulsar.Consumer, n int, ack bool) []pulsar.Message {
	t.Helper()
	out := make([]pulsar.Message, 0, n)
	for len(out) < n {
		m := receive(t, c, 20*time.Second)
		if ack {
			if err := c.Ack(m); err != nil {
				t.Fatalf("ack: %v", err)
			}
		}
		out = append(out, m)
	}
	return out
}

// expectNone checks that nothing arrives within d.
func expectNone(t testing.TB, c pulsar.Consumer, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if m, err := c.Receive(ctx); err == nil {
		t.Fatalf("unexpected message %q (id %v, redelivery %d)", m.Payload(), m.ID(), m.RedeliveryCount())
	}
}

func payloads(ms []pulsar.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m.Payload())
	}
	return out
}

// fetchAll reads every entry of a non-partitioned topic through the node's
// Broker interface, decoded.
func fetchAll(t testing.TB, n *testcluster.Node, topic string) []protocols.Entry {
	t.Helper()
	name, err := protocols.ParseTopicName(topic, "public/default")
	if err != nil {
		t.Fatal(err)
	}
	p := protocols.Partition{Topic: name, Index: -1}
	if base, i := name.PartitionIndex(); i >= 0 {
		p = protocols.Partition{Topic: base, Index: i}
	}
	ctx := context.Background()
	var out []protocols.Entry
	off := int64(0)
	for {
		fr, err := n.Proxy().Fetch(ctx, p, off, 1<<20)
		if err != nil {
			t.Fatalf("fetch %s at %d: %v", topic, off, err)
		}
		if len(fr.Entries) == 0 {
			return out
		}
		for _, se := range fr.Entries {
			e, err := protocols.DecodeEntry(se.Value)
			if err != nil {
				t.Fatalf("entry at %d: %v", se.BaseOffset, err)
			}
			out = append(out, e)
			off = se.BaseOffset + se.Count
		}
	}
}
