package proxy_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/ternmq/tern/internal/testcluster"
	"github.com/ternmq/tern/protocols"
)

func idemBatch(t *testing.T, pid int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	msgs := make([]protocols.Message, n)
	for i := range msgs {
		msgs[i] = protocols.Message{Timestamp: int64(i), Value: []byte{byte(seq), byte(i)}}
	}
	b, err := protocols.AppendBatch(nil, protocols.BatchSpec{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq}, msgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestIdempotentResendsRace: the same idempotent batches sent many times
// at once (a producer retrying on new connections while the first sends
// are still being written) are written once each, in order, and every
// send learns the original offsets.
func TestIdempotentResendsRace(t *testing.T) {
	n := testcluster.Start(t).Node(0)
	ctx := context.Background()
	name, _ := protocols.ParseTopicName("idem", "public/default")
	if _, err := n.Proxy().CreateTopic(ctx, name, 1, nil); err != nil {
		t.Fatal(err)
	}
	p := protocols.Partition{Topic: name, Index: 0}
	pid, err := n.Proxy().NewProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const batches, senders = 20, 8
	for b := 0; b < batches; b++ {
		batch := idemBatch(t, pid, 0, int32(3*b), 3)
		var wg sync.WaitGroup
		bases := make([]int64, senders)
		for s := 0; s < senders; s++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := n.Proxy().Produce(ctx, p, protocols.ProduceRequest{Batch: append([]byte(nil), batch...)})
				if err != nil {
					t.Errorf("batch %d sender %d: %v", b, s, err)
					return
				}
				bases[s] = r.BaseOffset
			}()
		}
		wg.Wait()
		for s, base := range bases {
			if base != int64(3*b) {
				t.Fatalf("batch %d sender %d: base offset %d, want %d", b, s, base, 3*b)
			}
		}
	}
	off, err := n.Proxy().Offsets(ctx, p)
	if err != nil || off.HighWatermark != 3*batches {
		t.Fatalf("high watermark %d (%v), want %d: resends were written", off.HighWatermark, err, 3*batches)
	}

	// After a restart the state is loaded back: the last batch is still a
	// duplicate, the next one in sequence is accepted, a gap is refused,
	// and producer ids are not handed out again.
	n.Restart()
	last := idemBatch(t, pid, 0, int32(3*(batches-1)), 3)
	if r, err := n.Proxy().Produce(ctx, p, protocols.ProduceRequest{Batch: last}); err != nil || !r.Duplicate || r.BaseOffset != 3*(batches-1) {
		t.Fatalf("resend after restart: %+v %v", r, err)
	}
	if _, err := n.Proxy().Produce(ctx, p, protocols.ProduceRequest{Batch: idemBatch(t, pid, 0, int32(3*batches+1), 1)}); !errors.Is(err, protocols.ErrOutOfOrderSequence) {
		t.Fatalf("gap after restart: %v", err)
	}
	if r, err := n.Proxy().Produce(ctx, p, protocols.ProduceRequest{Batch: idemBatch(t, pid, 0, int32(3*batches), 1)}); err != nil || r.Duplicate || r.BaseOffset != 3*batches {
		t.Fatalf("next batch after restart: %+v %v", r, err)
	}
	seen := map[int64]bool{pid: true}
	for i := 0; i < 5; i++ {
		id, err := n.Proxy().NewProducerID(ctx)
		if err != nil || seen[id] {
			t.Fatalf("producer id %d (%v) handed out twice", id, err)
		}
		seen[id] = true
	}
}
