package replicator

// A sender replicates one partition to one destination region. It owns the durable replication
// cursor of that pair (localstore.ReplCursorKey): the next local log offset the destination has
// not acknowledged. It reads entries from the cursor, keeps those the route admits, stamps their
// envelopes, sends them on one stream to the region's receiving node, and moves the cursor only
// when the receiver acknowledges (ACKs are in this log's offsets and mean "durable there").
//
// Entries the route does not admit are not sent, but the cursor must still pass them, or a
// partition whose tail is all filtered (the entries another region sent here, in a full mesh)
// would show a lag forever. So the sender remembers where its last sent entry ends (sentEnd) and
// how far it has read (scanned): once the receiver acknowledged everything sent, the cursor
// jumps to scanned.
//
// The cursor is written without an fsync of its own. After a crash it may be behind what the
// destination holds; the sender then resends a little, and the destination's dedup (layer 3)
// drops the copies. A cursor is never ahead of what the destination made durable.
//
// Goroutines: run (retries sessions with backoff) and, per session, one goroutine that takes
// ACKs. Both stop when the sender's context ends; stop waits for them.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ternmq/tern/localstore"
	"github.com/ternmq/tern/protocols"
)

// senderKey names a sender: one per (partition, destination region).
type senderKey struct {
	pid  localstore.PartitionID
	dest string
}

// senderSpec is everything a sender needs to know; a change of spec restarts the sender.
type senderSpec struct {
	topic protocols.TopicName
	// index is the partition index, -1 for a non-partitioned topic; count the partition count
	// (0 for a non-partitioned topic).
	index, count int
	pid          localstore.PartitionID
	// epoch is the partition's incarnation (its topic's creation time).
	epoch      int64
	dest       string
	start      Start
	originOnly bool
}

// StreamState is what a sender is doing, for the status.
type StreamState string

// Stream states. Stalled is derived when a snapshot is taken.
const (
	// StreamWaiting: no node of the destination region is known.
	StreamWaiting StreamState = "waiting"
	// StreamConnecting: opening the stream, waiting for the link to the region's node.
	StreamConnecting StreamState = "connecting"
	// StreamDisconnected: the link to the region's node is down; the sender retries.
	StreamDisconnected StreamState = "disconnected"
	// StreamRefused: the destination refused the stream (a partition-count mismatch, say); the
	// sender retries with backoff until the cause is fixed. LastError says what to do.
	StreamRefused StreamState = "refused"
	// StreamActive: the stream is open and the destination acknowledges.
	StreamActive StreamState = "active"
	// StreamStalled: the stream is open and has a backlog, but nothing was acknowledged for
	// longer than EngineConfig.StallAfter.
	StreamStalled StreamState = "stalled"
	// StreamOff: the node has no replication transport.
	StreamOff StreamState = "off"
)

type sender struct {
	e    *Engine
	spec senderSpec
	log  *slog.Logger

	cancel context.CancelFunc
	done   chan struct{}

	mu struct {
		sync.Mutex
		state     StreamState
		since     time.Time // when state last changed
		peer      string
		loaded    bool
		cursor    int64 // durable: everything below is acknowledged or not meant for dest
		acked     int64 // latest ACK of the current session
		sentEnd   int64 // end of the last entry handed to the stream
		scanned   int64 // end of the last entry read
		progress  time.Time
		transfer  time.Time
		lastErr   error
		lastErrAt time.Time
		stream    *SendStream
		lost      int64
		opens     uint64
	}
	ctr struct {
		entries, messages, bytes, filtered, skipped atomic.Uint64
	}
}

func newSender(e *Engine, spec senderSpec) *sender {
	s := &sender{
		e: e, spec: spec, done: make(chan struct{}),
		log: e.log.With("topic", spec.topic.String(), "partition", spec.index, "dest", spec.dest),
	}
	s.mu.state = StreamConnecting
	s.mu.progress = e.now()
	s.mu.since = s.mu.progress
	return s
}

func (s *sender) start(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	s.cancel = cancel
	go s.run(ctx)
}

// stop ends the sender and waits for its goroutines.
func (s *sender) stop() {
	s.cancel()
	<-s.done
}

// setStateLocked moves to state st, noting when it changed.
func (s *sender) setStateLocked(st StreamState) {
	if s.mu.state != st {
		s.mu.state = st
		s.mu.since = s.e.now()
	}
}

func (s *sender) setState(st StreamState, peer string) {
	s.mu.Lock()
	s.setStateLocked(st)
	if peer != "" {
		s.mu.peer = peer
	}
	s.mu.Unlock()
}

func (s *sender) noteError(err error) {
	s.mu.Lock()
	s.mu.lastErr = err
	s.mu.lastErrAt = s.e.now()
	var le *LinkError
	if errors.As(err, &le) && le.Remote && le.Code != CodeShuttingDown {
		s.setStateLocked(StreamRefused)
	} else {
		s.setStateLocked(StreamDisconnected)
	}
	s.mu.Unlock()
}

func (s *sender) run(ctx context.Context) {
	defer close(s.done)
	bo := newBackoff(s.e.cfg.RetryInitial, s.e.cfg.RetryMax, 0.2)
	for {
		err := s.session(ctx, bo)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errPeerChanged) {
			continue // the region's node changed: reopen at once
		}
		if errors.Is(err, localstore.ErrPartitionNotFound) || errors.Is(err, localstore.ErrTopicNotFound) {
			s.log.Info("replicator: partition gone; sender stops")
			s.e.foreign.forget(s.spec.pid)
			s.e.kickControl()
			return
		}
		s.noteError(err)
		var le *LinkError
		if errors.As(err, &le) && le.Remote && le.Code != CodeShuttingDown {
			s.log.Error("replicator: destination refused the stream", "err", err)
		} else {
			s.log.Warn("replicator: stream ended; retrying", "err", err)
		}
		t := time.NewTimer(bo.Next())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

var errPeerChanged = errors.New("replicator: the destination region's receiving node changed")

// session opens one stream and sends until it fails.
func (s *sender) session(ctx context.Context, bo *backoff) error {
	if s.e.transport == nil {
		s.setState(StreamOff, "")
		<-ctx.Done()
		return ctx.Err()
	}
	peer, changed := s.e.peers.nodeFor(s.spec.dest)
	if peer == "" {
		s.setState(StreamWaiting, "")
		select {
		case <-changed:
			return errPeerChanged
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	sctx, cancel := context.WithCancelCause(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel(nil) // runs before wg.Wait: the helpers below end with sctx
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-changed:
			cancel(errPeerChanged)
		case <-sctx.Done():
		}
	}()

	cursor, err := s.cursor()
	if err != nil {
		return err
	}
	s.setState(StreamConnecting, peer)
	req := OpenRequest{
		Topic: s.spec.topic.String(), Partition: int32(max(s.spec.index, 0)), PartitionCount: int32(s.spec.count),
		DestRegion: s.spec.dest, StartOffset: cursor,
		Extra: streamExtra{originOnly: s.spec.originOnly, epoch: s.spec.epoch}.encode(),
	}
	st, err := s.e.transport.OpenPartitionStream(sctx, peer, req)
	if err != nil {
		if c := context.Cause(sctx); c != nil && ctx.Err() == nil {
			return c
		}
		return err
	}
	defer st.Close()
	s.mu.Lock()
	s.mu.stream = st
	s.mu.opens++
	s.setStateLocked(StreamActive)
	s.mu.acked, s.mu.sentEnd, s.mu.scanned = cursor, cursor, cursor
	s.mu.progress = s.e.now()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.mu.stream = nil
		s.mu.Unlock()
	}()
	if a, ok := st.Acked(); ok && a > cursor {
		// The destination holds more than the cursor says (a crash, or another path). It can
		// never hold more than this log has; if it says so, the two disagree on what this
		// partition is, and skipping would lose data.
		if _, hw, err := s.e.host.Store().Offsets(s.spec.pid); err != nil {
			return err
		} else if a > hw {
			return fmt.Errorf("replicator: %s says it holds offsets of %s partition %d from this region up to %d, but the log here ends at %d: the partition was recreated with the same creation time; delete the topic in %s to start it over",
				peer, s.spec.topic, s.spec.index, a, hw, s.spec.dest)
		}
		s.onAck(a)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			a, err := st.NextAck(sctx)
			if err != nil {
				cancel(err)
				return
			}
			s.onAck(a)
			bo.Reset()
		}
	}()
	s.log.Debug("replicator: stream open", "peer", peer, "from", cursor)

	// One goroutine reads and prepares the next run of entries while this one sends the
	// previous run, so reading the log overlaps the network. Runs are applied in log order
	// here: the cursor may pass a filtered run only after everything before it was sent.
	runs := make(chan sendRun, 2)
	gate := &runGate{e: s.e, sent: make(chan struct{}, 1)}
	s.e.streaming.Add(1)
	defer s.e.streaming.Add(-1)
	// Once the reader has ended, the runs it left give their places back.
	defer func() {
		cancel(nil)
		wg.Wait()
		for {
			select {
			case r := <-runs:
				gate.done(r.ahead)
			default:
				return
			}
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := s.readAhead(sctx, s.position(), runs, gate); err != nil {
			cancel(err)
		}
	}()
	for {
		var r sendRun
		select {
		case r = <-runs:
		case <-sctx.Done():
			return context.Cause(sctx)
		}
		err := s.apply(sctx, st, r)
		gate.done(r.ahead)
		if err != nil {
			return err
		}
	}
}

// apply applies one run of the read-ahead: sends its entries, or passes over it.
func (s *sender) apply(sctx context.Context, st *SendStream, r sendRun) error {
	switch {
	case r.lostTo > 0:
		s.lostToRetention(r.end, r.lostTo)
		s.filteredThrough(r.lostTo)
	case len(r.out) == 0:
		s.filteredThrough(r.end)
	default:
		s.sending(r.out, r.end)
		if _, err := st.Send(sctx, r.out); err != nil {
			if c := context.Cause(sctx); c != nil {
				return c
			}
			return err
		}
	}
	return nil
}

// sendRun is one step of the read-ahead: entries to send (out) scanned up to end, a run to pass
// over (no out), or offsets retention removed before they were sent ([end, lostTo)). ahead says
// it holds one of the node's read-ahead places (Engine.ahead).
type sendRun struct {
	out    []Entry
	end    int64
	lostTo int64
	ahead  bool
}

// sendAheadBytes bounds what the node's senders hold read ahead of their sending, together. A
// sender may always hold one run (read, prepared, or being sent); each run more it reads ahead
// takes one of the node's places, ReadBytes each, and without a free place it waits for its run
// to be sent. A sender with a stream open reads at most its share of sendAheadBytes at a time
// (at least sendReadMin). Each sender held up to four runs of ReadBytes (1 MiB) and its frame:
// a region catching up on 100 partitions had 1.3 GB of Go heap in use on a backlog of 512 MiB.
const (
	sendAheadBytes = 16 << 20
	sendReadMin    = 64 << 10
)

// readBytes is how many bytes of entries s reads at a time.
func (s *sender) readBytes() int {
	n := min(s.e.cfg.ReadBytes, sendAheadBytes/max(1, int(s.e.streaming.Load())))
	return max(n, min(s.e.cfg.ReadBytes, sendReadMin))
}

// runGate lets a sender's reader read the next run: at once while none of the session's runs is
// waiting to be sent, else with one of the node's read-ahead places.
type runGate struct {
	e       *Engine
	pending atomic.Int32  // runs read and not yet sent
	sent    chan struct{} // a run was sent (cap 1)
}

// enter waits until the reader may read a run and counts it pending; ahead says it took a place,
// which done gives back.
func (g *runGate) enter(ctx context.Context) (ahead bool, err error) {
	for {
		// Only the reader adds to pending, so nothing can add between the load and the add.
		if g.pending.Load() == 0 {
			g.pending.Add(1)
			return false, nil
		}
		select {
		case g.e.ahead <- struct{}{}:
			g.pending.Add(1)
			return true, nil
		default:
		}
		select {
		case <-g.sent:
		case <-ctx.Done():
			return false, context.Cause(ctx)
		}
	}
}

// done ends a run that enter let in: it was sent, passed over, or the session ended with it.
func (g *runGate) done(ahead bool) {
	if ahead {
		<-g.e.ahead
	}
	g.pending.Add(-1)
	select {
	case g.sent <- struct{}{}:
	default:
	}
}

// readAhead reads the log from next and hands runs to the sending loop in order, until ctx
// ends or reading fails. gate lets it read each run.
func (s *sender) readAhead(ctx context.Context, next int64, runs chan<- sendRun, gate *runGate) error {
	st := s.e.host.Store()
	put := func(r sendRun) error {
		select {
		case runs <- r:
			return nil
		case <-ctx.Done():
			gate.done(r.ahead)
			return context.Cause(ctx)
		}
	}
	for {
		if c := context.Cause(ctx); c != nil {
			return c
		}
		ahead, err := gate.enter(ctx)
		if err != nil {
			return err
		}
		if s.spec.originOnly {
			if to, ok := s.e.foreign.skip(s.spec.pid, next); ok {
				s.ctr.skipped.Add(uint64(to - next))
				if err := put(sendRun{end: to, ahead: ahead}); err != nil {
					return err
				}
				next = to
				continue
			}
		}
		entries, err := st.Read(s.spec.pid, next, s.readBytes())
		var oor *protocols.OffsetOutOfRangeError
		if errors.As(err, &oor) && next < oor.Start {
			if err := put(sendRun{end: next, lostTo: oor.Start, ahead: ahead}); err != nil {
				return err
			}
			next = oor.Start
			continue
		}
		if err != nil {
			gate.done(ahead)
			if c := context.Cause(ctx); c != nil {
				return c
			}
			return err
		}
		if len(entries) == 0 {
			gate.done(ahead)
			if err := st.Wait(ctx, []localstore.Watch{{PID: s.spec.pid, Offset: next}}); err != nil {
				if c := context.Cause(ctx); c != nil {
					return c
				}
				return err
			}
			continue
		}
		last := entries[len(entries)-1]
		end := last.BaseOffset + last.Count
		out, err := s.prepare(entries)
		if err != nil {
			gate.done(ahead)
			return err
		}
		if err := put(sendRun{out: out, end: end, ahead: ahead}); err != nil {
			return err
		}
		next = end
	}
}

// prepare filters a run of entries for the destination and stamps the envelopes of those that
// go. The values returned are new buffers; the read buffer is not changed.
func (s *sender) prepare(entries []localstore.Entry) ([]Entry, error) {
	out := make([]Entry, 0, len(entries))
	local := s.e.cfg.Region
	for _, se := range entries {
		env, err := protocols.DecodeEnvelope(se.Value)
		if err != nil {
			return nil, fmt.Errorf("replicator: entry at offset %d of the local log: %w", se.BaseOffset, err)
		}
		ok, err := admit(&env, local, s.spec.dest, s.spec.originOnly)
		if err != nil {
			return nil, fmt.Errorf("replicator: entry at offset %d of the local log: %w", se.BaseOffset, err)
		}
		if !ok {
			s.ctr.filtered.Add(1)
			continue
		}
		batch, err := protocols.SplitEntry(se.Value)
		if err != nil {
			return nil, err
		}
		stampForSend(&env, local, se.BaseOffset, s.spec.epoch)
		v, err := protocols.AppendEntry(make([]byte, 0, len(se.Value)+64), &env, batch)
		if err != nil {
			return nil, fmt.Errorf("replicator: entry at offset %d: %w", se.BaseOffset, err)
		}
		out = append(out, Entry{Offset: se.BaseOffset, Count: int32(se.Count), Value: v})
	}
	return out, nil
}

// cursor returns the durable cursor, creating it at the policy's start position the first time.
func (s *sender) cursor() (int64, error) {
	s.mu.Lock()
	if s.mu.loaded {
		c := s.mu.cursor
		s.mu.Unlock()
		return c, nil
	}
	s.mu.Unlock()
	st := s.e.host.Store()
	key := localstore.ReplCursorKey(s.spec.pid, s.spec.dest)
	v, ok, err := st.Get(key)
	if err != nil {
		return 0, err
	}
	var c int64
	switch {
	case ok && len(v) == 8:
		c = int64(binary.BigEndian.Uint64(v))
	case ok:
		return 0, fmt.Errorf("replicator: replication cursor of %s/%d to %s is %d bytes, want 8", s.spec.topic, s.spec.index, s.spec.dest, len(v))
	default:
		start, hw, err := st.Offsets(s.spec.pid)
		if err != nil {
			return 0, err
		}
		c = start
		if s.spec.start == StartLatest {
			c = hw
		}
		if err := st.Write([]localstore.Op{{Key: key, Value: binary.BigEndian.AppendUint64(nil, uint64(c))}}, true); err != nil {
			return 0, err
		}
		s.log.Info("replicator: replication cursor created", "start", string(s.spec.start), "offset", c)
	}
	s.mu.Lock()
	s.mu.cursor, s.mu.loaded = c, true
	s.mu.Unlock()
	return c, nil
}

// position is where the session reads next: the cursor, possibly advanced by the open's ACK.
func (s *sender) position() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(s.mu.cursor, s.mu.acked)
}

// advanceLocked moves the cursor to c if that is forward and returns whether it moved.
func (s *sender) advanceLocked(c int64) bool {
	if c <= s.mu.cursor {
		return false
	}
	s.mu.cursor = c
	s.mu.progress = s.e.now()
	return true
}

func (s *sender) save(c int64) {
	key := localstore.ReplCursorKey(s.spec.pid, s.spec.dest)
	if err := s.e.host.Store().Write([]localstore.Op{{Key: key, Value: binary.BigEndian.AppendUint64(nil, uint64(c))}}, false); err != nil {
		s.log.Warn("replicator: saving the replication cursor failed", "offset", c, "err", err)
	}
}

func (s *sender) onAck(a int64) {
	s.mu.Lock()
	if a > s.mu.acked {
		s.mu.acked = a
		s.mu.transfer = s.e.now()
	}
	target := a
	if a >= s.mu.sentEnd {
		target = max(a, s.mu.scanned)
	}
	moved := s.advanceLocked(target)
	s.mu.Unlock()
	if moved {
		s.save(target)
	}
}

func (s *sender) sending(out []Entry, scanned int64) {
	var msgs, bytes uint64
	for _, e := range out {
		msgs += uint64(e.Count)
		bytes += uint64(len(e.Value))
	}
	s.ctr.entries.Add(uint64(len(out)))
	s.ctr.messages.Add(msgs)
	s.ctr.bytes.Add(bytes)
	s.mu.Lock()
	s.mu.sentEnd = out[len(out)-1].End()
	s.mu.scanned = scanned
	s.mu.Unlock()
}

func (s *sender) filteredThrough(end int64) {
	s.mu.Lock()
	s.mu.scanned = max(s.mu.scanned, end)
	moved := false
	if s.mu.acked >= s.mu.sentEnd {
		moved = s.advanceLocked(end)
	}
	s.mu.Unlock()
	if moved {
		s.save(end)
	}
}

func (s *sender) lostToRetention(from, start int64) {
	err := fmt.Errorf("replicator: offsets %d to %d were removed by retention before they reached %s: %d messages will never replicate there; raise the topic's retention or fix the link sooner",
		from, start-1, s.spec.dest, start-from)
	s.log.Error("replicator: replication lost messages to retention", "from", from, "to", start, "err", err)
	s.mu.Lock()
	s.mu.lost += start - from
	s.mu.lastErr = err
	s.mu.lastErrAt = s.e.now()
	s.mu.Unlock()
}

// streamExtra is the replication logic's part of OPEN (OpenRequest.Extra): a version byte, a
// flags byte, and the partition's incarnation.
type streamExtra struct {
	// originOnly: the stream carries only entries produced in the sender's region, so the
	// sender's offsets are the origin offsets and the receiver may tell the sender to skip what
	// its dedup state already holds.
	originOnly bool
	epoch      int64
}

const (
	extraVersion    = 1
	extraOriginOnly = 1 << 0
	extraLen        = 10
)

func (x streamExtra) encode() []byte {
	var flags byte
	if x.originOnly {
		flags |= extraOriginOnly
	}
	return binary.BigEndian.AppendUint64([]byte{extraVersion, flags}, uint64(x.epoch))
}

func decodeStreamExtra(b []byte) (streamExtra, error) {
	if len(b) != extraLen || b[0] != extraVersion || b[1]&^extraOriginOnly != 0 {
		return streamExtra{}, fmt.Errorf("%w: OPEN extra of %d bytes is not a version %d replication header", ErrMalformedFrame, len(b), extraVersion)
	}
	return streamExtra{originOnly: b[1]&extraOriginOnly != 0, epoch: int64(binary.BigEndian.Uint64(b[2:]))}, nil
}
