package perf

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Run runs one workload against the system behind d and returns its
// figures. Progress lines go to cfg.Progress while it runs. d stays open;
// the caller closes it.
func Run(ctx context.Context, cfg Config, d Driver) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.fill()
	if cfg.Label == "" {
		cfg.Label = d.Name()
	}
	if cfg.ClientGOGC > 0 {
		defer debug.SetGCPercent(debug.SetGCPercent(cfg.ClientGOGC))
	}
	r := &run{cfg: cfg, d: d, pub: newRecorder(), con: newRecorder(), late: newRecorder(), start: time.Now()}
	r.res = &Result{
		Label: cfg.Label, Mode: cfg.Mode, Topic: cfg.Topic, MessageSize: cfg.MessageSize,
		Partitions: cfg.Partitions, Producers: cfg.Producers, Consumers: cfg.Consumers,
		Rate: cfg.Rate, Start: r.start, LoadStart: LoadAvg(), SpeedStart: SpeedProbe(), KernelStart: KernelProbe(), ClientGOGC: clientGOGC(cfg),
	}
	if err := d.CreateTopic(ctx, cfg.Topic, cfg.Partitions); err != nil {
		return nil, fmt.Errorf("perf: create topic %s: %w", cfg.Topic, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopTicker := r.startTicker(ctx)
	pctx, stopProbe := context.WithCancel(ctx)
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		r.probeTimer(pctx)
	}()
	var err error
	switch cfg.Mode {
	case ModeProduce:
		err = r.runProduce(ctx)
	case ModeConsume:
		err = r.runConsume(ctx)
	case ModeE2E:
		err = r.runE2E(ctx)
	}
	stopTicker()
	stopProbe()
	<-probed
	if _, _, h := r.late.window(); h.TotalCount() > 0 {
		l := latencyOf(h)
		r.res.ClientTimerLate = &l
	}
	r.res.LoadEnd, r.res.SpeedEnd, r.res.KernelEnd = LoadAvg(), SpeedProbe(), KernelProbe()
	if e := r.firstErr.Load(); e != nil && err == nil {
		err = *e
	}
	r.res.Errors = r.errors.Load()
	r.res.finishServer()
	if n := r.res.messages(); n > 0 {
		r.res.ClientCPUPerMsg = r.clientCPU * 1e6 / float64(n)
	}
	if err != nil {
		return r.res, err
	}
	return r.res, nil
}

// run is the state of one Run.
type run struct {
	cfg   Config
	d     Driver
	res   *Result
	start time.Time

	pub, con *recorder
	// late records how late probeTimer's wakes were.
	late  *recorder
	phase atomic.Value // string shown in progress lines

	// settle, if set, runs between the warm-up and the window.
	settle func(context.Context) error
	// loadStart is when the producers' schedules start (a timestamp; 0
	// before): message k of each is due k/rate after it.
	loadStart atomic.Int64
	// stopped is set once the window is over: errors from then on come
	// from tearing down, not from the system.
	stopped  atomic.Bool
	errors   atomic.Int64
	firstErr atomic.Pointer[error]

	windowStart, windowEnd time.Time
	clientCPU              float64 // seconds of this process's CPU in the window
	machineStart           cpuTicks
	machineOK              bool // machineStart was read
	probe                  struct {
		mu        sync.Mutex
		rssPeak   int64
		anonPeak  int64
		cpuStart  float64
		diskStart int64
		have      bool
	}
	payloads sync.Pool
}

func (r *run) fail(err error) {
	if r.stopped.Load() {
		return
	}
	r.errors.Add(1)
	r.firstErr.CompareAndSwap(nil, &err)
}

// payload returns a buffer of MessageSize random bytes; the first eight
// are overwritten with the send time.
func (r *run) payload() *[]byte {
	if b, ok := r.payloads.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, r.cfg.MessageSize)
	for i := 0; i < len(b); i += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], rand.Uint64())
		copy(b[i:], w[:])
	}
	return &b
}

// producers runs cfg.Producers producers until stop is closed or, when
// limit >= 0, until they sent limit messages in all; it returns once every
// message is acknowledged or the drain timeout passes. With ready, it
// primes the producers first (see prime) and closes ready before the load.
func (r *run) producers(ctx context.Context, stop <-chan struct{}, limit int64, ready chan<- struct{}) error {
	n := r.cfg.Producers
	ps := make([]Producer, 0, n)
	defer func() {
		for _, p := range ps {
			_ = p.Close()
		}
	}()
	for range n {
		p, err := r.d.NewProducer(ctx, r.cfg.Topic)
		if err != nil {
			return fmt.Errorf("perf: new producer: %w", err)
		}
		ps = append(ps, p)
	}
	if ready != nil {
		if err := r.prime(ctx, ps); err != nil {
			return err
		}
		close(ready)
	}
	rate := float64(r.cfg.Rate) / float64(n)
	start := time.Now()
	r.loadStart.Store(stamp(start))
	var wg sync.WaitGroup
	for i, p := range ps {
		share := int64(-1)
		if limit >= 0 {
			share = limit / int64(n)
			if i == 0 {
				share += limit % int64(n)
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.produceLoop(ctx, stop, p, share, rate, start)
		}()
	}
	wg.Wait()
	dctx, cancel := context.WithTimeout(ctx, r.cfg.DrainTimeout)
	defer cancel()
	for _, p := range ps {
		if err := p.Flush(dctx); err != nil {
			return fmt.Errorf("perf: waiting for acknowledgements: %w", err)
		}
	}
	return nil
}

// prime sends one message from each producer and waits until they are
// acknowledged and, in an end-to-end run, received, before the load
// starts. Connections, metadata, producer IDs and the consumers' first
// fetches are then in place (OMB probes its producers the same way), and
// the warm-up is spent on the system, not on the clients' start.
func (r *run) prime(ctx context.Context, ps []Producer) error {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.DrainTimeout)
	defer cancel()
	errc := make(chan error, len(ps))
	for _, p := range ps {
		b := make([]byte, r.cfg.MessageSize)
		binary.LittleEndian.PutUint64(b, uint64(nanotime()))
		p.Send(ctx, b, func(err error) {
			if err == nil {
				r.pub.record(len(b), 0)
			}
			errc <- err
		})
	}
	for range ps {
		if err := <-errc; err != nil {
			return fmt.Errorf("perf: the producers' first messages: %w", err)
		}
	}
	if r.cfg.Mode != ModeE2E {
		return nil
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for r.con.total.Load() < int64(len(ps)) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("perf: the consumers received %d of the producers' first %d messages within --drain-timeout %v", r.con.total.Load(), len(ps), r.cfg.DrainTimeout)
		case <-tick.C:
		}
	}
	return nil
}

// produceLoop is one producer's pacing loop. With a rate, message k is
// due at start + k/rate; latency counts from when it was due (or from when
// it was sent, if the producer was early), so time lost waiting for a
// stalled system is measured, not hidden.
func (r *run) produceLoop(ctx context.Context, stop <-chan struct{}, p Producer, limit int64, rate float64, start time.Time) {
	size := r.cfg.MessageSize
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	begin := stamp(start)
	// last is the latest clock read: a message due by then is late, and
	// needs no other read to say so.
	var last int64
	for k := int64(0); limit < 0 || k < limit; k++ {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		var t0 int64
		if rate > 0 {
			due := begin + int64(float64(k)/rate*float64(time.Second))
			if due > last {
				last = nanotime()
				// Waiting costs a timer; sending up to half a
				// millisecond early costs nothing (latency then counts
				// from the send).
				if wait := time.Duration(due - last); wait > 500*time.Microsecond {
					timer.Reset(wait)
					select {
					case <-timer.C:
					case <-stop:
						return
					case <-ctx.Done():
						return
					}
					last = nanotime()
				}
			}
			// Late: count from when it was due. Early: from the send.
			t0 = min(due, last)
		} else {
			t0 = nanotime()
		}
		bp := r.payload()
		buf := *bp
		binary.LittleEndian.PutUint64(buf, uint64(t0))
		p.Send(ctx, buf, func(err error) {
			if err != nil {
				r.fail(err)
			} else {
				r.pub.record(size, t0)
			}
			r.payloads.Put(bp)
		})
	}
}

// consumers starts cfg.Consumers consumers; handle is called with the
// messages each receives (see Driver.NewConsumer).
func (r *run) consumers(ctx context.Context, handle func([][]byte)) ([]Consumer, error) {
	cs := make([]Consumer, 0, r.cfg.Consumers)
	for i := range r.cfg.Consumers {
		c, err := r.d.NewConsumer(ctx, r.cfg.Topic, r.cfg.Partitions, i, r.cfg.Consumers, handle)
		if err != nil {
			_ = closeAll(cs)
			return nil, fmt.Errorf("perf: new consumer: %w", err)
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// closeAll closes the consumers and reports how any of them failed.
func closeAll(cs []Consumer) error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// window runs the warm-up, then the measured window, and returns when the
// window ends, ctx ends, or early is closed (the consume backlog drained).
// The warm-up also ends when warm is closed (a consume run has read its
// share of the backlog for warming up).
func (r *run) window(ctx context.Context, early, warm <-chan struct{}) error {
	r.phase.Store("warm-up")
	if r.cfg.Warmup > 0 {
		t := time.NewTimer(r.cfg.Warmup)
		select {
		case <-t.C:
		case <-warm:
			t.Stop()
		case <-early:
			t.Stop()
			return ErrBacklogDrained
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	if r.settle != nil {
		if err := r.settle(ctx); err != nil {
			return err
		}
	}
	if r.windowStart.IsZero() {
		r.open(ctx)
	}
	return r.measure(ctx, early)
}

// catchUp waits, after an e2e warm-up, until the consumers are less than
// catchUpLag behind (they have received every message acknowledged that
// long ago and, at a --rate, every message due that long ago), at most as
// long again as the warm-up. A run's start leaves them behind: the
// producers send a burst to catch up with their schedule, and a
// consumer's fetch sizes let it read only so much faster than the rate; a
// window opened before they drain that backlog times its first messages
// behind it, which is the run's start, not the system's end-to-end
// latency. Latency counts from a message's due time, so producers still
// behind their schedule leave the consumers behind too, however little
// acknowledged is left for them to read. A consumer that cannot keep up
// does not catch up, and the window opens on it as it is; the result says
// how far behind it was.
func (r *run) catchUp(ctx context.Context) error {
	if r.cfg.Warmup <= 0 {
		return nil
	}
	r.phase.Store("catch-up")
	start := time.Now()
	deadline := start.Add(r.cfg.Warmup)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	// acked holds (time, acknowledged count) samples of the last catchUpLag.
	type sample struct {
		at    time.Time
		acked int64
	}
	acked := []sample{{start, r.pub.total.Load()}}
	want := acked[0].acked
	for {
		now := time.Now()
		acked = append(acked, sample{now, r.pub.total.Load()})
		for len(acked) > 1 && now.Sub(acked[1].at) >= catchUpLag {
			acked = acked[1:]
		}
		if now.Sub(acked[0].at) >= catchUpLag {
			want = max(acked[0].acked, r.dueBy(now.Add(-catchUpLag)))
			if r.con.total.Load() >= want {
				break
			}
		}
		if !now.Before(deadline) {
			break
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r.res.CatchUpSeconds = time.Since(start).Seconds()
	r.res.BehindAtWindow = max(0, want-r.con.total.Load())
	return nil
}

// TimerPeriod is how often the load generator's probe timer wakes (see
// Result.ClientTimerLate).
const TimerPeriod = 5 * time.Millisecond

// timerSleep is probeTimer's sleep; tests stand in a stalling one.
var timerSleep = time.Sleep

// probeTimer wakes every TimerPeriod until ctx ends and records how late
// each wake was. The load generator's latencies include its own stalls:
// the kernel not running it (on cores it shares with the server, or on a
// host that does not run the virtual machine), its collector. Those delay
// this wake too; a stall of the system under test does not.
func (r *run) probeTimer(ctx context.Context) {
	for ctx.Err() == nil {
		due := nanotime() + int64(TimerPeriod)
		timerSleep(TimerPeriod)
		r.late.record(0, due)
	}
}

// catchUpLag is how far behind the producers consumers may be for an e2e
// window to open: a latency the window measures, not a backlog.
const catchUpLag = 100 * time.Millisecond

// dueBy is how many messages the producers were to have sent by t at
// their --rate, counting the one each sends before the load; 0 without a
// rate or before the load.
func (r *run) dueBy(t time.Time) int64 {
	start := r.loadStart.Load()
	if r.cfg.Rate <= 0 || start == 0 {
		return 0
	}
	n := int64(r.cfg.Producers)
	since := stamp(t) - start
	if since < 0 {
		return n
	}
	// Message k of a producer is due at k/rate: k = 0 at the start.
	each := int64(float64(since)/float64(time.Second)*float64(r.cfg.Rate)/float64(n)) + 1
	return n * (1 + each)
}

// open starts the measured window; window does unless a run opened it
// before.
func (r *run) open(ctx context.Context) {
	r.windowStart = time.Now()
	r.clientCPU = selfCPU()
	r.machineStart, r.machineOK = readCPUTicks()
	r.sampleServer(ctx, true)
	for _, rec := range []*recorder{r.pub, r.con, r.late} {
		rec.from.Store(stamp(r.windowStart))
		rec.measuring.Store(true)
	}
	r.phase.Store("measure")
}

// measure closes the open window after the run's duration, or early.
func (r *run) measure(ctx context.Context, early <-chan struct{}) error {
	t := time.NewTimer(r.cfg.Duration)
	defer t.Stop()
	var err error
	select {
	case <-t.C:
	case <-early:
	case <-ctx.Done():
		err = ctx.Err()
	}
	r.windowEnd = time.Now()
	for _, rec := range []*recorder{r.pub, r.con, r.late} {
		rec.measuring.Store(false)
		rec.to.Store(stamp(r.windowEnd))
	}
	r.clientCPU = selfCPU() - r.clientCPU
	if end, ok := readCPUTicks(); ok && r.machineOK {
		r.res.Machine = machineSince(r.machineStart, end)
	}
	r.phase.Store("drain")
	r.sampleServer(ctx, false)
	return err
}

// await waits for the producers to be primed; an error if they stopped
// first.
func (r *run) await(ctx context.Context, ready <-chan struct{}, errc <-chan error) error {
	r.phase.Store("prime")
	select {
	case <-ready:
		return nil
	case err := <-errc:
		if err == nil {
			err = errors.New("perf: the producers stopped before the load started")
		}
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *run) runProduce(ctx context.Context) error {
	stop, ready := make(chan struct{}), make(chan struct{})
	errc := make(chan error, 1)
	go func() { errc <- r.producers(ctx, stop, -1, ready) }()
	if err := r.await(ctx, ready, errc); err != nil {
		return err
	}
	werr := r.window(ctx, nil, nil)
	r.stopped.Store(true)
	close(stop)
	perr := <-errc
	r.res.Publish = r.figures(r.pub, true)
	return firstOf(werr, perr, r.measured(r.res.Publish))
}

// errFillStalled ends a consume run whose backlog stopped filling.
var errFillStalled = errors.New("perf: filling the backlog stalled")

// watchFill ends a consume run's fill (stall, with errFillStalled) once no
// message has been acknowledged for DrainTimeout. A system that stopped
// taking writes (a node whose every append failed, its client resending
// them) otherwise kept the run filling at 0 msg/s for as long as it was
// left.
func (r *run) watchFill(ctx context.Context, stall context.CancelCauseFunc) {
	t := time.NewTicker(min(time.Second, r.cfg.DrainTimeout/4))
	defer t.Stop()
	last, since := r.pub.total.Load(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if n := r.pub.total.Load(); n != last {
				last, since = n, now
				continue
			}
			if now.Sub(since) >= r.cfg.DrainTimeout {
				stall(fmt.Errorf("%w: no message acknowledged for %v (%d of %d so far); is the system still taking writes? (--drain-timeout sets this wait)",
					errFillStalled, r.cfg.DrainTimeout, last, r.cfg.Backlog))
				return
			}
		}
	}
}

// warmBacklogShare: a consume run's warm-up reads at most 1/warmBacklogShare
// of the backlog.
const warmBacklogShare = 5

func (r *run) runConsume(ctx context.Context) error {
	// Fill the backlog as fast as the system takes it.
	r.phase.Store("fill")
	fillStart := time.Now()
	fctx, stall := context.WithCancelCause(ctx)
	go r.watchFill(fctx, stall)
	err := r.producers(fctx, nil, r.cfg.Backlog, nil)
	cause := context.Cause(fctx)
	stall(nil) // the watch ends with the fill
	if errors.Is(cause, errFillStalled) {
		return cause
	}
	if err != nil {
		return err
	}
	if e := r.firstErr.Load(); e != nil {
		return fmt.Errorf("perf: filling the backlog: %w", *e)
	}
	secs := time.Since(fillStart).Seconds()
	n := r.pub.total.Load()
	r.res.Fill = &Figures{
		Messages: n, Bytes: n * int64(r.cfg.MessageSize), Seconds: secs,
		MsgsPerSec: float64(n) / secs, MBPerSec: float64(n) * float64(r.cfg.MessageSize) / secs / 1e6,
	}
	// The warm-up ends after its time or a fifth of the backlog, whichever
	// comes first, so a system that reads faster than the backlog lasts
	// is measured on the rest instead of failing the run.
	drained, warm := make(chan struct{}), make(chan struct{})
	var drainOnce, warmOnce sync.Once
	target, warmTarget := r.cfg.Backlog, max(r.cfg.Backlog/warmBacklogShare, 1)
	if r.cfg.Warmup == 0 {
		// The window opens before the consumers start (their setup is
		// measured): opened after, it missed a small backlog that they
		// had read meanwhile.
		r.open(ctx)
	}
	cs, err := r.consumers(ctx, func(ps [][]byte) {
		r.con.recordAll(ps, 0)
		n := r.con.total.Load()
		if n >= warmTarget {
			warmOnce.Do(func() { close(warm) })
		}
		if n >= target {
			drainOnce.Do(func() { close(drained) })
		}
	})
	if err != nil {
		return err
	}
	werr := r.window(ctx, drained, warm)
	r.stopped.Store(true)
	cerr := closeAll(cs)
	r.res.Consume = r.figures(r.con, false)
	return firstOf(werr, cerr, r.measured(r.res.Consume))
}

func (r *run) runE2E(ctx context.Context) error {
	cs, err := r.consumers(ctx, func(ps [][]byte) {
		// One clock read for the messages received together.
		r.con.recordAll(ps, nanotime())
	})
	if err != nil {
		return err
	}
	closed := false
	defer func() {
		if !closed {
			_ = closeAll(cs)
		}
	}()
	stop, ready := make(chan struct{}), make(chan struct{})
	errc := make(chan error, 1)
	go func() { errc <- r.producers(ctx, stop, -1, ready) }()
	if err := r.await(ctx, ready, errc); err != nil {
		return err
	}
	r.settle = r.catchUp
	werr := r.window(ctx, nil, nil)
	close(stop)
	perr := <-errc
	// Let the consumers catch up with what was acknowledged, so a slow
	// consumer shows as lag in the figures rather than as lost messages.
	deadline := time.Now().Add(r.cfg.DrainTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	for r.con.total.Load() < r.pub.total.Load() && time.Now().Before(deadline) && ctx.Err() == nil {
		<-tick.C
	}
	tick.Stop()
	r.stopped.Store(true)
	closed = true
	cerr := closeAll(cs)
	r.res.Publish = r.figures(r.pub, true)
	r.res.Consume = r.figures(r.con, true)
	var lag error
	if got, want := r.con.total.Load(), r.pub.total.Load(); got < want {
		lag = fmt.Errorf("perf: consumers received %d of %d acknowledged messages within --drain-timeout %v", got, want, r.cfg.DrainTimeout)
	}
	return firstOf(werr, perr, cerr, lag, r.measured(r.res.Publish), r.measured(r.res.Consume))
}

func (r *run) measured(f *Figures) error {
	if f == nil || f.Messages == 0 {
		return ErrNothingMeasured
	}
	return nil
}

func firstOf(errs ...error) error {
	for _, e := range errs {
		if e != nil && !errors.Is(e, context.Canceled) {
			return e
		}
	}
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// figures summarises a recorder's measured window.
func (r *run) figures(rec *recorder, withLatency bool) *Figures {
	n, bytes, h := rec.window()
	secs := r.windowEnd.Sub(r.windowStart).Seconds()
	f := &Figures{Messages: n, Bytes: bytes, Seconds: secs}
	if secs > 0 {
		f.MsgsPerSec = float64(n) / secs
		f.MBPerSec = float64(bytes) / secs / 1e6
	}
	if withLatency {
		l := latencyOf(h)
		f.Latency = &l
	}
	r.res.WarmupSeconds = r.cfg.Warmup.Seconds()
	r.res.Seconds = secs
	return f
}

// clientGOGC is the GC target the load generator runs with: the
// configured one, else what the process was started with.
func clientGOGC(cfg Config) int {
	if cfg.ClientGOGC > 0 {
		return cfg.ClientGOGC
	}
	if v, err := strconv.Atoi(os.Getenv("GOGC")); err == nil {
		return v
	}
	return 100
}
