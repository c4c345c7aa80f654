package proxy_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ternmq/tern/protocols"
)

// releasingSink hands each delivery over untouched: the test holds some
// of them back for a while, checks every message against what was
// produced, and only then releases the delivery's buffer, as the Pulsar
// front end does once it has encoded a delivery.
type releasingSink struct {
	testSink
	full atomic.Bool
	asks atomic.Int64 // calls of Full
}

// Deliver hands the delivery over as it is: the test releases it.
func (s *releasingSink) Deliver(d protocols.Delivery) { s.deliveries <- d }

func (s *releasingSink) Full() bool {
	s.asks.Add(1)
	return s.full.Load()
}

// readBufValue is message i of entry e: its identity, then filler.
func readBufValue(e, i int) []byte {
	v := make([]byte, 4000+(e*7+i)%500)
	binary.BigEndian.PutUint32(v, uint32(e))
	binary.BigEndian.PutUint32(v[4:], uint32(i))
	for j := 8; j < len(v); j++ {
		v[j] = byte(e + i + j)
	}
	return v
}

// TestReadBuffersAreReusedOnlyWhenFree: a subscription reading a backlog
// reads into buffers its earlier reads freed, and never frees one while
// an entry or a delivery still points into it. Freed buffers are
// overwritten at once (PoisonFreedBuffers), deliveries are checked byte for
// byte just before their release, some are held back across several reads,
// and some are handed back for redelivery, which serves them again from
// the entries the subscription keeps.
func TestReadBuffersAreReusedOnlyWhenFree(t *testing.T) {
	f := newSubFixture(t)
	const entries, perEntry = 300, 16 // 64-72 KiB entries: about 15 to a read
	for e := range entries {
		msgs := make([]protocols.Message, perEntry)
		for i := range msgs {
			msgs[i] = protocols.Message{Key: []byte(fmt.Sprint(e, "/", i)), Value: readBufValue(e, i), Timestamp: 1000}
		}
		b, err := protocols.AppendBatch(nil, protocols.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, msgs, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.n.Produce(context.Background(), f.p, protocols.ProduceRequest{Batch: b}); err != nil {
			t.Fatal(err)
		}
	}
	reads0, reused0 := f.n.SubscriptionReads()

	s := &releasingSink{testSink: *newSink()}
	c := f.subscribeSink(t, protocols.SubscribeRequest{Type: protocols.SubShared, Durable: true, Start: earliest}, s)
	// Hold every third delivery until five more have come, hand every
	// seventh back once, check each just before its release.
	ctx := context.Background()
	check := func(d protocols.Delivery) error {
		for k, m := range d.Messages {
			off := d.Offset + int64(k)
			e, i := int(off/perEntry), int(off%perEntry)
			if want := readBufValue(e, i); string(m.Value) != string(want) || string(m.Key) != fmt.Sprint(e, "/", i) {
				return fmt.Errorf("offset %d (entry %d message %d): %d bytes starting %x, want %d starting %x",
					off, e, i, len(m.Value), m.Value[:min(8, len(m.Value))], len(want), want[:8])
			}
		}
		return nil
	}
	seen := map[int64]bool{}
	var held []protocols.Delivery
	rng := rand.New(rand.NewPCG(1, 2))
	done := func(d protocols.Delivery) {
		if err := check(d); err != nil {
			t.Fatal(err)
		}
		for k := range d.Messages {
			seen[d.Offset+int64(k)] = true
		}
		if d.Buffer != nil {
			d.Buffer.Release()
		}
		c.Flow(len(d.Messages)) // as a client grants room as it consumes
	}
	c.Flow(20 * perEntry)
	n := 0
	deadline := time.After(30 * time.Second)
	for len(seen) < entries*perEntry {
		var d protocols.Delivery
		select {
		case d = <-s.deliveries:
		case <-time.After(50 * time.Millisecond):
			// Nothing more comes while the rest is held: let it go.
			for _, h := range held {
				must(t, c.Ack(ctx, []protocols.AckPosition{{Offset: h.Offset, BatchIndex: -1}}, false))
				done(h)
			}
			held = nil
			continue
		case <-deadline:
			t.Fatalf("%d of %d messages delivered within 30 s", len(seen), entries*perEntry)
		}
		n++
		switch {
		case n%7 == 0 && d.RedeliveryCount == 0:
			if err := check(d); err != nil {
				t.Fatal(err)
			}
			if d.Buffer != nil {
				d.Buffer.Release()
			}
			must(t, c.Redeliver(ctx, []int64{d.Offset}))
			c.Flow(len(d.Messages))
		case n%3 == 0:
			held = append(held, d)
		default:
			must(t, c.Ack(ctx, []protocols.AckPosition{{Offset: d.Offset, BatchIndex: -1}}, false))
			done(d)
		}
		for len(held) > 0 && (len(held) > 5 || rng.IntN(4) == 0) {
			h := held[0]
			held = held[1:]
			must(t, c.Ack(ctx, []protocols.AckPosition{{Offset: h.Offset, BatchIndex: -1}}, false))
			done(h)
		}
	}
	for _, h := range held {
		done(h)
	}
	reads, reused := f.n.SubscriptionReads()
	reads, reused = reads-reads0, reused-reused0
	t.Logf("%d deliveries, %d reads, %d into a freed buffer", n, reads, reused)
	if reused < reads/3 {
		t.Errorf("%d of %d reads went into a freed buffer; want at least a third", reused, reads)
	}
}

// subscribeSink subscribes any sink.
func (f *subFixture) subscribeSink(t *testing.T, req protocols.SubscribeRequest, s protocols.ConsumerSink) protocols.Consumer {
	t.Helper()
	req.Subscription = "s"
	c, err := f.n.Subscribe(context.Background(), f.p, req, s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestFullSinkHoldsDeliveries: a consumer whose sink is full gets nothing,
// whatever its permits, until it calls Flow(0) with room again.
func TestFullSinkHoldsDeliveries(t *testing.T) {
	f := newSubFixture(t)
	s := &releasingSink{testSink: *newSink()}
	s.full.Store(true)
	c := f.subscribeSink(t, protocols.SubscribeRequest{Type: protocols.SubExclusive, Durable: true, Start: earliest}, s)
	s.activeIs(t, true)
	f.produce(t, protocols.Envelope{}, "a", "b")
	c.Flow(10)
	f.produce(t, protocols.Envelope{}, "c")
	s.none(t, 200*time.Millisecond)
	if s.asks.Load() == 0 {
		t.Fatal("Full was never asked")
	}
	c.Flow(0) // still full: nothing
	s.none(t, 100*time.Millisecond)
	s.full.Store(false)
	c.Flow(0)
	if d := s.next(t); d.Offset != 0 || fmt.Sprint(keysOf(d)) != "[a b]" {
		t.Fatalf("first delivery at %d: %v", d.Offset, keysOf(d))
	}
	if d := s.next(t); d.Offset != 2 || fmt.Sprint(keysOf(d)) != "[c]" {
		t.Fatalf("second delivery at %d: %v", d.Offset, keysOf(d))
	}
	// Full again: the next entry waits, although permits remain.
	s.full.Store(true)
	f.produce(t, protocols.Envelope{}, "d")
	s.none(t, 200*time.Millisecond)
	s.full.Store(false)
	c.Flow(0)
	if d := s.next(t); d.Offset != 3 {
		t.Fatalf("delivery at %d after room came back, want 3", d.Offset)
	}
}
