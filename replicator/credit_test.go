package replicator

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The sender blocks when its credit is exhausted, resumes on each CREDIT, and never has more
// bytes outstanding than the receiver granted.
func TestCreditFlowControl(t *testing.T) {
	cfgA, logsA := testConfig(t, "a1", "us")
	cfgB, logsB := testConfig(t, "b1", "eu")
	type recvd struct {
		b        Batch
		granted  Credit
		received Credit
	}
	batches := make(chan recvd, 1000)
	grants := make(chan Credit)
	h := HandlerFunc(func(ctx context.Context, s *RecvStream) error {
		granted := Credit{Bytes: 10 * 1024, Entries: 25}
		if err := s.Grant(granted); err != nil {
			return err
		}
		var received Credit
		for {
			// Take batches while they come, and grants from the test.
			recvCtx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			b, err := s.Recv(recvCtx)
			cancel()
			if err == nil {
				received = received.add(b.Credit())
				batches <- recvd{b: b, granted: granted, received: received}
				continue
			}
			if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
				return nil
			}
			select {
			case g := <-grants:
				granted = granted.add(g)
				if err := s.Grant(g); err != nil {
					return err
				}
			default:
			}
		}
	})
	b := startNode(t, cfgB, logsB, h)
	a := startNode(t, cfgA, logsA, nil)
	if err := a.AddPeer(b.peer()); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 30*time.Second)
	s, err := a.OpenPartitionStream(ctx, "b1", openReq("t", 0))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if c := s.Credit(); c.Bytes != 10*1024 || c.Entries != 25 {
		t.Fatalf("initial credit at the sender %+v", c)
	}

	want := entriesOf(0, 50, 1024) // 50 KiB in all
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := s.Send(ctx, want)
		done <- result{n, err}
	}()

	var got []Entry
	var last recvd
	// collect receives until the receiver holds n entries, checking the credit invariant.
	collect := func(n int) {
		t.Helper()
		for len(got) < n {
			select {
			case r := <-batches:
				if r.received.Bytes > r.granted.Bytes || r.received.Entries > r.granted.Entries {
					t.Fatalf("sender overran its credit: received %+v, granted %+v", r.received, r.granted)
				}
				got = append(got, r.b.Entries...)
				last = r
			case <-ctx.Done():
				t.Fatalf("stuck at %d of %d entries", len(got), n)
			}
		}
		if len(got) != n {
			t.Fatalf("received %d entries, credit allowed %d", len(got), n)
		}
	}
	blocked := func(step string) {
		t.Helper()
		waitFor(t, 5*time.Second, "sender credit exhausted", func() bool { return s.Credit().Bytes < 1024 })
		waitFor(t, 5*time.Second, "Send waiting for credit", s.Blocked)
		select {
		case r := <-done:
			t.Fatalf("%s: Send returned (%d, %v) without credit", step, r.n, r.err)
		default:
		}
	}

	collect(10) // 10 KiB credited
	blocked("after 10 entries")
	if last.received.Bytes != 10*1024 {
		t.Fatalf("received %d bytes, want exactly the 10 KiB credited", last.received.Bytes)
	}

	grants <- Credit{Bytes: 15 * 1024}
	collect(25)
	blocked("after 25 entries")
	if c := s.Credit(); c.Bytes != 0 || c.Entries != 0 {
		t.Fatalf("credit left %+v, want none", c)
	}

	// Entry credit limits too: bytes plenty, 5 entries.
	grants <- Credit{Bytes: 1 << 20, Entries: 5}
	collect(30)
	waitFor(t, 5*time.Second, "entry credit exhausted", func() bool { return s.Credit().Entries == 0 })
	waitFor(t, 5*time.Second, "Send waiting for credit", s.Blocked)
	select {
	case r := <-done:
		t.Fatalf("Send returned (%d, %v) without entry credit", r.n, r.err)
	default:
	}

	grants <- Credit{Entries: 1000}
	collect(50)
	select {
	case r := <-done:
		if r.err != nil || r.n != len(want) {
			t.Fatalf("Send = %d, %v", r.n, r.err)
		}
	case <-ctx.Done():
		t.Fatal("Send never returned")
	}
	sameEntries(t, got, want)

	// A Send waiting for credit returns when its context ends, with the count sent so far,
	// and leaves the stream usable. The entry needs more bytes than are credited.
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if c := s.Credit(); c.Bytes >= 2<<20 {
		t.Fatalf("credit %+v too large for this check", c)
	}
	n, err := s.Send(short, []Entry{{Offset: 1 << 30, Count: 1, Value: make([]byte, 2<<20)}})
	if n != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Send without credit = %d, %v; want 0, deadline exceeded", n, err)
	}
	if s.Err() != nil || s.Blocked() {
		t.Fatalf("a cancelled wait for credit broke the stream: %v, blocked %v", s.Err(), s.Blocked())
	}

	// Close releases a Send blocked on credit.
	go func() {
		n, err := s.Send(ctx, []Entry{{Offset: 1 << 30, Count: 1, Value: make([]byte, 2<<20)}})
		done <- result{n, err}
	}()
	waitFor(t, 5*time.Second, "Send waiting for credit", s.Blocked)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.n != 0 || !errors.Is(r.err, ErrStreamClosed) {
			t.Fatalf("Send after Close = %d, %v", r.n, r.err)
		}
	case <-ctx.Done():
		t.Fatal("Close did not release a blocked Send")
	}
}

func TestSendValidatesEntries(t *testing.T) {
	cfgA, logsA := testConfig(t, "a1", "us")
	cfgB, logsB := testConfig(t, "b1", "eu")
	cfgB.MaxFrameBytes = 64 << 10
	cfgB.StreamCreditBytes = 64 << 10
	b := startNode(t, cfgB, logsB, newSink())
	a := startNode(t, cfgA, logsA, nil)
	if err := a.AddPeer(b.peer()); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 20*time.Second)
	req := openReq("t", 0)
	req.StartOffset = 100
	s, err := a.OpenPartitionStream(ctx, "b1", req)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for name, es := range map[string][]Entry{
		"before start":  {{Offset: 99, Count: 1}},
		"zero count":    {{Offset: 100, Count: 0}},
		"overlap":       {{Offset: 100, Count: 5}, {Offset: 104, Count: 1}},
		"too large":     {{Offset: 100, Count: 1, Value: make([]byte, 64<<10)}},
		"too large 2nd": {{Offset: 100, Count: 1}, {Offset: 101, Count: 1, Value: make([]byte, 70<<10)}},
	} {
		n, err := s.Send(ctx, es)
		if n != 0 || !(errors.Is(err, ErrEntryOrder) || errors.Is(err, ErrEntryTooLarge)) {
			t.Fatalf("%s: Send = %d, %v", name, n, err)
		}
	}
	// The largest entry that fits the peer's frame goes through.
	big := []Entry{{Offset: 100, Count: 1, Value: make([]byte, 64<<10-entriesOverhead-entryOverhead)}}
	if n, err := s.Send(ctx, big); n != 1 || err != nil {
		t.Fatalf("largest entry: Send = %d, %v", n, err)
	}
	if ack, err := s.NextAck(ctx); err != nil || ack != 101 {
		t.Fatalf("NextAck = %d, %v", ack, err)
	}
}
