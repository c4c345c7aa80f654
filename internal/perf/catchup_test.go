package perf

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// lagDriver is an in-process log whose consumers, once they have the
// producers' first message, stall for a fixed time and then keep up: what
// a real run's start does (the producers send a burst to catch up with
// their schedule, and the consumers fall behind it), made repeatable.
// With sendLag, the producers instead stall that long on the first
// message of the load (a client whose buffer is full, a connection being
// set up again) and then catch up with their schedule in a burst, which
// the consumers read as it comes.
type lagDriver struct {
	lag, sendLag time.Duration

	mu    sync.Mutex
	cond  *sync.Cond
	log   [][]byte
	sends int
}

func newLagDriver(lag, sendLag time.Duration) *lagDriver {
	d := &lagDriver{lag: lag, sendLag: sendLag}
	d.cond = sync.NewCond(&d.mu)
	return d
}

func (d *lagDriver) Name() string                                   { return "lag" }
func (d *lagDriver) CreateTopic(context.Context, string, int) error { return nil }
func (d *lagDriver) Close() error                                   { return nil }
func (d *lagDriver) NewProducer(context.Context, string) (Producer, error) {
	return lagProducer{d}, nil
}

type lagProducer struct{ d *lagDriver }

func (p lagProducer) Send(_ context.Context, payload []byte, done func(error)) {
	p.d.mu.Lock()
	// The first send is the producer's primer; the second starts the load.
	if p.d.sends++; p.d.sends == 2 && p.d.sendLag > 0 {
		p.d.mu.Unlock()
		time.Sleep(p.d.sendLag)
		p.d.mu.Lock()
	}
	p.d.log = append(p.d.log, append([]byte(nil), payload...))
	p.d.cond.Broadcast()
	p.d.mu.Unlock()
	done(nil)
}
func (lagProducer) Flush(context.Context) error { return nil }
func (lagProducer) Close() error                { return nil }

type lagConsumer struct {
	stop chan struct{}
	wg   sync.WaitGroup
	d    *lagDriver
}

func (c *lagConsumer) Close() error {
	close(c.stop)
	c.d.mu.Lock()
	c.d.cond.Broadcast()
	c.d.mu.Unlock()
	c.wg.Wait()
	return nil
}

func (d *lagDriver) NewConsumer(_ context.Context, _ string, _, _, _ int, handle func([][]byte)) (Consumer, error) {
	c := &lagConsumer{stop: make(chan struct{}), d: d}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for next := 0; ; next++ {
			if next == 1 {
				select {
				case <-time.After(d.lag):
				case <-c.stop:
					return
				}
			}
			d.mu.Lock()
			for next >= len(d.log) {
				select {
				case <-c.stop:
					d.mu.Unlock()
					return
				default:
				}
				d.cond.Wait()
			}
			m := d.log[next]
			d.mu.Unlock()
			handle([][]byte{m})
		}
	}()
	return c, nil
}

// runLagging runs an e2e load at 2,000 msg/s through a lagDriver whose
// consumers stall for lag.
func runLagging(t *testing.T, warmup, duration, lag time.Duration) *Result {
	return runLaggingMode(t, ModeE2E, warmup, duration, newLagDriver(lag, 0))
}

func runLaggingMode(t *testing.T, mode Mode, warmup, duration time.Duration, d *lagDriver) *Result {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Mode = mode
	cfg.Rate = 2000
	cfg.MessageSize = 100
	cfg.Warmup, cfg.Duration = warmup, duration
	cfg.DrainTimeout = 3 * time.Second
	cfg.Progress = io.Discard
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := Run(ctx, cfg, d)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// An e2e window opens once the consumers have caught up with the
// producers: consumers that stall 600 ms as the load starts, with a
// 400 ms warm-up, would otherwise time the window's first 200 ms behind
// that stall.
func TestE2EWindowOpensOnceConsumersCaughtUp(t *testing.T) {
	res := runLagging(t, 400*time.Millisecond, 500*time.Millisecond, 600*time.Millisecond)
	if res.BehindAtWindow != 0 || res.CatchUpSeconds < 0.15 || res.CatchUpSeconds > 0.4 {
		t.Errorf("window opened %.2fs after the warm-up, %d messages behind; want about 0.2s later, caught up", res.CatchUpSeconds, res.BehindAtWindow)
	}
	if p99 := res.Consume.Latency.P99; p99 > 100 {
		t.Errorf("e2e p99 %.1f ms: the window timed the consumers' late start", p99)
	}
}

// Producers behind their schedule leave the consumers behind it too, with
// nothing acknowledged left to read: producers that stall 650 ms as the
// load starts, with a 400 ms warm-up, would otherwise have the window time
// the messages due in its first 150 ms from when they were due, up to
// 150 ms before the burst that sends them.
func TestE2EWindowOpensOnceProducersCaughtUp(t *testing.T) {
	res := runLaggingMode(t, ModeE2E, 400*time.Millisecond, 400*time.Millisecond, newLagDriver(0, 650*time.Millisecond))
	if res.BehindAtWindow != 0 || res.CatchUpSeconds < 0.2 || res.CatchUpSeconds > 0.39 {
		t.Errorf("window opened %.2fs after the warm-up, %d messages behind; want about 0.25s later, caught up", res.CatchUpSeconds, res.BehindAtWindow)
	}
	if p99 := res.Consume.Latency.P99; p99 > 60 {
		t.Errorf("e2e p99 %.1f ms: the window timed the producers' late start", p99)
	}
}

// Consumers that never catch up do not hold the window: it opens after as
// long again as the warm-up, and the result says how far behind they were.
func TestE2EWindowOpensOnConsumersThatLag(t *testing.T) {
	res := runLagging(t, 200*time.Millisecond, 1500*time.Millisecond, 1500*time.Millisecond)
	if res.BehindAtWindow == 0 || res.CatchUpSeconds < 0.2 || res.CatchUpSeconds > 0.5 {
		t.Errorf("window opened %.2fs after the warm-up, %d messages behind; want 0.2s later, behind", res.CatchUpSeconds, res.BehindAtWindow)
	}
}

// Only e2e waits for consumers: a produce run, which has none, opens its
// window right after the warm-up.
func TestProduceWindowDoesNotWaitForConsumers(t *testing.T) {
	start := time.Now()
	res := runLaggingMode(t, ModeProduce, 200*time.Millisecond, 300*time.Millisecond, newLagDriver(0, 0))
	if res.CatchUpSeconds != 0 || res.BehindAtWindow != 0 {
		t.Errorf("a produce run waited %.2fs for consumers (%d behind)", res.CatchUpSeconds, res.BehindAtWindow)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("a 0.2s warm-up and 0.3s window took %v", took)
	}
}

// Time lost to a stalled producer is measured: the messages due while its
// first send of the load blocks for 300 ms go out late, in a burst, and
// their latencies count from when they were due, not from when they went.
func TestLatencyCountsFromWhenMessagesWereDue(t *testing.T) {
	res := runLaggingMode(t, ModeProduce, 0, 600*time.Millisecond, newLagDriver(0, 300*time.Millisecond))
	l := res.Publish.Latency
	// At 2,000 msg/s about half of the window's messages were due during
	// the stall, waiting from 300 ms down to none.
	if l.Max < 250 || l.Max > 500 || l.P95 < 150 {
		t.Errorf("publish latency p95 %.1f ms, max %.1f ms; want about 270 and 300: the stall's messages timed from their sends", l.P95, l.Max)
	}
	if l.P50 > 150 {
		t.Errorf("publish p50 %.1f ms; want the messages after the burst on time", l.P50)
	}
}

// stallDriver is a lagDriver whose producers stop acknowledging after
// acks messages, as a node does whose every append fails while its client
// holds the messages and sends them again.
type stallDriver struct {
	*lagDriver
	acks int
}

func (d stallDriver) NewProducer(context.Context, string) (Producer, error) {
	return stallProducer{lagProducer{d.lagDriver}, d.acks}, nil
}

type stallProducer struct {
	lagProducer
	acks int
}

func (p stallProducer) Send(ctx context.Context, payload []byte, done func(error)) {
	p.d.mu.Lock()
	n := len(p.d.log)
	p.d.mu.Unlock()
	if n >= p.acks {
		// Held, as by a client whose queue is full of messages the
		// system never acknowledges, until the run gives up.
		<-ctx.Done()
		done(ctx.Err())
		return
	}
	p.lagProducer.Send(ctx, payload, done)
}

func (p stallProducer) Flush(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// A consume run whose backlog stops filling ends, saying so, once nothing
// has been acknowledged for --drain-timeout, instead of filling at 0 msg/s
// for as long as it is left.
func TestConsumeFillThatStallsEnds(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Mode = ModeConsume
	cfg.MessageSize = 100
	cfg.Backlog = 10_000
	cfg.DrainTimeout = 300 * time.Millisecond
	cfg.Progress = io.Discard
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	_, err := Run(ctx, cfg, stallDriver{newLagDriver(0, 0), 500})
	if err == nil || !strings.Contains(err.Error(), "no message acknowledged for 300ms (500 of 10000 so far)") {
		t.Fatalf("a fill that stalled at 500 of 10,000 messages: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("the run ended only at the test's own deadline, after %v", time.Since(start))
	}
}
