package e2e

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/protocols/kafka"
)

// heldBackend is a node whose produces to one topic are not durable until
// the test opens the gate, as if their fsync took that long.
type heldBackend struct {
	kafka.Backend
	topic protocols.TopicName
	gate  chan struct{}
}

func (b heldBackend) StartProduce(ctx context.Context, p protocols.Partition, req protocols.ProduceRequest) (protocols.PendingProduce, error) {
	pp, err := b.Backend.StartProduce(ctx, p, req)
	if err != nil || p.Topic != b.topic {
		return pp, err
	}
	return heldProduce{pp, b.gate}, nil
}

type heldProduce struct {
	protocols.PendingProduce
	gate chan struct{}
}

func (h heldProduce) Ready() bool {
	select {
	case <-h.gate:
		rp, ok := h.PendingProduce.(protocols.ReadyProduce)
		return ok && rp.Ready()
	default:
		return false
	}
}

func (h heldProduce) Wait() (protocols.ProduceResult, error) {
	<-h.gate
	return h.PendingProduce.Wait()
}

// TestKafkaAnswerIsNotHeldBehindAnotherFsync: a produce's answer goes out
// once its append is durable, even when the connection's next produce
// still waits for its fsync; it used to wait in the write buffer until
// that fsync ended.
func TestKafkaAnswerIsNotHeldBehindAnotherFsync(t *testing.T) {
	node := startKafka(t)
	createTopic(t, node.KafkaAddr(), "quick", 1, nil)
	createTopic(t, node.KafkaAddr(), "slow", 1, nil)
	cfg := kafka.DefaultConfig()
	held, err := protocols.ParseTopicName("slow", cfg.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }

	srv, err := kafka.New(cfg, heldBackend{Backend: node.Proxy(), topic: held, gate: gate})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		open() // a held produce's writer waits for it
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
	})

	rc := dialRaw(t, ln.Addr().String())
	pipelined := append(frame(produceReq("quick", idemBatch(t, -1, -1, -1, 2)), 1, "raw-test"),
		frame(produceReq("slow", idemBatch(t, -1, -1, -1, 2)), 2, "raw-test")...)
	if _, err := rc.c.Write(pipelined); err != nil {
		t.Fatal(err)
	}
	got := make(chan int32, 2)
	go func() {
		for range 2 {
			body, err := rc.nextFrame()
			if err != nil || len(body) < 4 {
				return
			}
			got <- int32(binary.BigEndian.Uint32(body))
		}
	}()
	// answer waits up to d for the next answer's correlation id; 0 if none.
	answer := func(d time.Duration) int32 {
		select {
		case corr := <-got:
			return corr
		case <-time.After(d):
			return 0
		}
	}
	if corr := answer(5 * time.Second); corr != 1 {
		t.Fatalf("first answer %d (0: none in 5s) while the next produce waited for its fsync, want 1", corr)
	}
	if corr := answer(100 * time.Millisecond); corr != 0 {
		t.Fatalf("answer %d arrived while its produce was still held", corr)
	}
	open()
	if corr := answer(10 * time.Second); corr != 2 {
		t.Fatalf("second answer %d (0: none in 10s) once the held fsync ended, want 2", corr)
	}
}
