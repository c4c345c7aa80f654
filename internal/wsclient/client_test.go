package wsclient_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ternmq/tern/internal/testcluster"
	"github.com/ternmq/tern/internal/wsclient"
)

// TestProducerAndConsumer sends messages pipelined, reads them back with
// their keys and properties, has a refused message reported as a
// RefusedError through its callback, and a send on a closed session
// refused without its callback.
func TestProducerAndConsumer(t *testing.T) {
	node := testcluster.Start(t).Node(0)
	base := "ws://" + node.Config.Listeners.HTTP + "/ws/v2/"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dial := func(path string) *websocket.Conn {
		t.Helper()
		c, _, err := websocket.Dial(ctx, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadLimit(64 << 20)
		return c
	}
	p := wsclient.NewProducer(dial("producer/persistent/public/default/wsc"), 4)
	const n = 20
	ids := make([]string, n)
	var failed atomic.Int32
	for i := range n {
		key := fmt.Sprint("k", i)
		err := p.Send(ctx, wsclient.Message{Payload: []byte(fmt.Sprint("v", i)), Key: &key, Properties: map[string]string{"i": fmt.Sprint(i)}},
			func(id string, err error) {
				if err != nil {
					failed.Add(1)
					return
				}
				ids[i] = id
			})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil || failed.Load() != 0 {
		t.Fatalf("flush: %v, %d failed", err, failed.Load())
	}

	// Over the node's 5 MiB limit: answered with an error, not a closed session.
	refused := make(chan error, 1)
	if err := p.Send(ctx, wsclient.Message{Payload: make([]byte, 5<<20+1)}, func(_ string, err error) { refused <- err }); err != nil {
		t.Fatal(err)
	}
	var re *wsclient.RefusedError
	if err := <-refused; !errors.As(err, &re) || re.Msg == "" {
		t.Fatalf("oversized message: %v, want a RefusedError with the node's reason", err)
	}

	c := wsclient.NewConsumer(dial("reader/persistent/public/default/wsc?messageId=earliest"))
	defer c.Close()
	for i := range n {
		m, err := c.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		v, err := m.Value(nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(v) != fmt.Sprint("v", i) || m.Key == nil || *m.Key != fmt.Sprint("k", i) || m.Properties["i"] != fmt.Sprint(i) || m.MessageID != ids[i] {
			t.Fatalf("message %d: %q key %v properties %v id %s; want v%d, k%d, i=%d, id %s", i, v, m.Key, m.Properties, m.MessageID, i, i, i, ids[i])
		}
		if err := c.Ack(ctx, m.MessageID); err != nil {
			t.Fatal(err)
		}
	}

	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	called := false
	if err := p.Send(ctx, wsclient.Message{Payload: []byte("late")}, func(string, error) { called = true }); err == nil || called {
		t.Fatalf("send on a closed session: %v, callback called %v; want an error and no callback", err, called)
	}
}
