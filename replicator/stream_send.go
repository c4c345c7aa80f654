package replicator

// SendStream: the sending half of a partition stream.
//
// Credit. The receiver grants an allowance in entry value bytes and in entries (CREDIT frames
// add to it); every ENTRIES frame consumes the sum of its values' lengths and its entry count.
// Send never lets the allowance go negative, so the bytes sent and not yet re-credited never
// exceed what the receiver granted; the receiver enforces the same and fails a stream that
// overruns it. A receiver that re-grants a batch's credit only once the batch is durable turns
// the credit into a window of unacknowledged data.
//
// Goroutines: the caller's goroutine writes (Send; Close may interrupt it), and one reader
// goroutine takes ACK, CREDIT and ERROR from the receiver and wakes the writer.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/quic-go/quic-go"
)

// SendStream sends one partition's entries to one peer. Send is called from one goroutine at a
// time; the other methods may be called from any goroutine.
type SendStream struct {
	mc  *meshConn
	qs  *quic.Stream
	req OpenRequest
	fr  *frameReader
	log *slog.Logger

	writeMu sync.Mutex // serialises writes and the FIN (quic-go forbids concurrent Write and Close)
	buf     []byte
	next    int64 // entries must start at or after this offset

	mu struct {
		sync.Mutex
		credit    Credit // available allowance
		acked     int64
		hasAck    bool
		returned  int64 // last value NextAck returned
		anyReturn bool
		responded bool
		err       error
		wake      chan struct{}
	}
	done      chan struct{} // closed when the reader goroutine exits
	countOnce sync.Once
	cancelled atomic.Bool
	blocked   atomic.Bool
}

func newSendStream(mc *meshConn, qs *quic.Stream, req OpenRequest) *SendStream {
	s := &SendStream{
		mc: mc, qs: qs, req: req,
		fr:   newFrameReader(qs, maxControlPayload),
		log:  mc.log.With("stream", int64(qs.StreamID()), "topic", req.Topic, "partition", req.Partition),
		next: req.StartOffset,
		done: make(chan struct{}),
	}
	s.mu.wake = make(chan struct{})
	return s
}

// start sends OPEN, starts the reader and waits for the receiver's first answer.
func (s *SendStream) start(ctx context.Context) error {
	s.buf = appendFrame(s.buf[:0], openFrame{Req: s.req})
	if err := writeCtx(ctx, s.qs, s.buf); err != nil {
		s.abort(CodeShuttingDown)
		return fmt.Errorf("replicator: send OPEN to %s: %w", s.mc.peer.Name, err)
	}
	s.mc.l.ctr.sent(len(s.buf))
	s.mc.l.streamDelta(1)
	if !s.mc.t.goFn(s.readLoop) {
		s.abort(CodeShuttingDown)
		close(s.done)
		s.release()
		return ErrClosed
	}
	for {
		s.mu.Lock()
		responded, err, wake := s.mu.responded, s.mu.err, s.mu.wake
		s.mu.Unlock()
		if responded {
			return nil
		}
		if err != nil {
			s.Close()
			return err
		}
		select {
		case <-wake:
		case <-ctx.Done():
			s.fail(fmt.Errorf("replicator: waiting for %s to accept the stream: %w", s.mc.peer.Name, ctx.Err()), CodeShuttingDown)
			s.Close()
			return fmt.Errorf("replicator: %s did not answer OPEN for %s/%d: %w", s.mc.peer.Name, s.req.Topic, s.req.Partition, ctx.Err())
		}
	}
}

func (s *SendStream) wakeLocked() {
	close(s.mu.wake)
	s.mu.wake = make(chan struct{})
}

func (s *SendStream) release() {
	s.countOnce.Do(func() { s.mc.l.streamDelta(-1) })
}

// fail records the stream's terminal error (the first one wins) and resets both directions.
func (s *SendStream) fail(err error, code ErrorCode) {
	s.mu.Lock()
	first := s.mu.err == nil
	if first {
		s.mu.err = err
		s.wakeLocked()
	}
	s.mu.Unlock()
	if first {
		s.abort(code)
	}
}

func (s *SendStream) abort(code ErrorCode) {
	if s.cancelled.CompareAndSwap(false, true) {
		s.qs.CancelRead(quic.StreamErrorCode(code))
		s.qs.CancelWrite(quic.StreamErrorCode(code))
	}
}

func (s *SendStream) readLoop() {
	defer close(s.done)
	defer s.release()
	for {
		f, n, err := s.fr.next()
		if err != nil {
			switch {
			case errors.Is(err, ErrMalformedFrame) || errors.Is(err, ErrFrameTooLarge):
				s.log.Warn("replicator: malformed frame from receiver, closing stream", "err", err)
				s.fail(err, CodeProtocolViolation)
			case err == io.EOF:
				s.fail(fmt.Errorf("%w: receiver %s ended the stream", ErrStreamClosed, s.mc.peer.Name), CodeNone)
			default:
				s.fail(fmt.Errorf("%w: %w", ErrStreamClosed, streamErr(s.mc, err)), CodeNone)
			}
			return
		}
		s.mc.l.ctr.recv(n)
		switch f := f.(type) {
		case ackFrame:
			s.mu.Lock()
			if prev := s.mu.acked; s.mu.hasAck && f.Next < prev {
				s.mu.Unlock()
				err := fmt.Errorf("%w: ACK went back from %d to %d", ErrMalformedFrame, prev, f.Next)
				s.log.Warn("replicator: closing stream", "err", err)
				s.fail(err, CodeProtocolViolation)
				return
			}
			s.mu.acked, s.mu.hasAck, s.mu.responded = f.Next, true, true
			s.wakeLocked()
			s.mu.Unlock()
		case creditFrame:
			if f.Credit.Bytes < 0 || f.Credit.Entries < 0 {
				s.fail(fmt.Errorf("%w: negative credit", ErrMalformedFrame), CodeProtocolViolation)
				return
			}
			s.mu.Lock()
			s.mu.credit = s.mu.credit.add(f.Credit)
			s.mu.responded = true
			s.wakeLocked()
			s.mu.Unlock()
		case errorFrame:
			le := &LinkError{Code: f.Code, Message: f.Message, Remote: true}
			s.log.Info("replicator: receiver ended the stream with an error", "err", le)
			s.fail(le, CodeNone)
			return
		default:
			err := fmt.Errorf("%w: receiver sent %s on a partition stream", ErrMalformedFrame, f.frameType())
			s.log.Warn("replicator: closing stream", "err", err)
			s.fail(err, CodeProtocolViolation)
			return
		}
	}
}

// streamErr turns the QUIC error that ended a stream into the link's reason when the whole
// connection went away.
func streamErr(mc *meshConn, err error) error {
	if mc.ctx.Err() != nil {
		return fmt.Errorf("link to %s lost: %w", mc.peer.Name, context.Cause(mc.ctx))
	}
	return err
}

// Send sends entries in order, splitting them into ENTRIES frames that fit the receiver's
// maximum frame size and the credit available, and blocks while the credit is exhausted. It
// returns how many entries were handed to QUIC; on an error the caller resends from the first
// unsent entry on this stream, or reopens the stream if it failed (Err says so). Entries must
// strictly increase without overlap and start at or after the OPEN's StartOffset.
func (s *SendStream) Send(ctx context.Context, entries []Entry) (int, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	maxFrame := s.mc.maxFrame
	next := s.next
	for i, e := range entries {
		if e.Count < 1 || e.Offset < next {
			return 0, fmt.Errorf("%w: entry %d at offset %d count %d, expected offset >= %d and count >= 1", ErrEntryOrder, i, e.Offset, e.Count, next)
		}
		if entryWireSize(e)+entriesOverhead > maxFrame {
			return 0, fmt.Errorf("%w: entry at offset %d is %d bytes, peer %s accepts frames up to %d", ErrEntryTooLarge, e.Offset, len(e.Value), s.mc.peer.Name, maxFrame)
		}
		next = e.End()
	}
	sent := 0
	for sent < len(entries) {
		avail, err := s.waitCredit(ctx, int64(len(entries[sent].Value)))
		if err != nil {
			return sent, err
		}
		j, bytes, size := sent, int64(0), entriesOverhead
		for j < len(entries) && int64(j-sent) < avail.Entries {
			v := int64(len(entries[j].Value))
			w := entryWireSize(entries[j])
			if bytes+v > avail.Bytes || size+w > maxFrame {
				break
			}
			bytes += v
			size += w
			j++
		}
		s.mu.Lock()
		s.mu.credit.Bytes -= bytes
		s.mu.credit.Entries -= int64(j - sent)
		if s.mu.credit.Bytes < 0 || s.mu.credit.Entries < 0 {
			s.mu.Unlock()
			panic("replicator: send credit went negative")
		}
		s.mu.Unlock()
		s.buf = appendEntries(s.frameBuf(size), entries[sent:j])
		err = writeCtx(ctx, s.qs, s.buf)
		n := len(s.buf)
		s.keepFrameBuf()
		if err != nil {
			err = fmt.Errorf("%w: %w", ErrStreamClosed, streamErr(s.mc, err))
			s.fail(err, CodeShuttingDown)
			return sent, s.Err()
		}
		s.mc.l.ctr.sent(n)
		s.next = entries[j-1].End()
		sent = j
	}
	return sent, nil
}

// waitCredit blocks until the allowance covers one entry of valueLen bytes.
func (s *SendStream) waitCredit(ctx context.Context, valueLen int64) (Credit, error) {
	for {
		s.mu.Lock()
		c, err, wake := s.mu.credit, s.mu.err, s.mu.wake
		s.mu.Unlock()
		if err != nil {
			s.blocked.Store(false)
			return Credit{}, err
		}
		if c.Entries >= 1 && c.Bytes >= valueLen {
			s.blocked.Store(false)
			return c, nil
		}
		s.blocked.Store(true)
		select {
		case <-wake:
		case <-ctx.Done():
			s.blocked.Store(false)
			return Credit{}, ctx.Err()
		}
	}
}

// Blocked reports whether a Send is waiting for credit right now: the receiver, not the network
// or the sender, is what limits this stream.
func (s *SendStream) Blocked() bool { return s.blocked.Load() }

// NextAck blocks until the receiver's acknowledged position moved past the value NextAck last
// returned (or, the first time, until any ACK arrived) and returns it: every entry below it is
// durable at the receiver. Several ACKs arriving in between are coalesced into the latest. After
// the stream failed it returns the terminal error.
func (s *SendStream) NextAck(ctx context.Context) (int64, error) {
	for {
		s.mu.Lock()
		if s.mu.hasAck && (!s.mu.anyReturn || s.mu.acked > s.mu.returned) {
			s.mu.returned, s.mu.anyReturn = s.mu.acked, true
			v := s.mu.acked
			s.mu.Unlock()
			return v, nil
		}
		err, wake := s.mu.err, s.mu.wake
		s.mu.Unlock()
		if err != nil {
			return 0, err
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// Acked returns the latest acknowledged position, and false when no ACK arrived yet.
func (s *SendStream) Acked() (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.acked, s.mu.hasAck
}

// Credit returns the allowance currently available to Send.
func (s *SendStream) Credit() Credit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.credit
}

// Err returns why the stream ended, or nil while it is usable.
func (s *SendStream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.err
}

// Request is the OPEN this stream was opened with.
func (s *SendStream) Request() OpenRequest { return s.req }

// Peer is the receiving node.
func (s *SendStream) Peer() PeerInfo { return s.mc.peer }

// Close ends the stream: a clean end (FIN, after any frame being written) if it is still
// healthy, then stops reading ACKs. Call NextAck first to wait for the final acknowledgement.
// Close may be called while Send waits for credit (Send then returns ErrStreamClosed); it waits
// for the stream's reader goroutine and is idempotent.
func (s *SendStream) Close() error {
	s.mu.Lock()
	healthy := s.mu.err == nil
	if healthy {
		s.mu.err = fmt.Errorf("%w: closed by the sender", ErrStreamClosed)
		s.wakeLocked()
	}
	s.mu.Unlock()
	s.writeMu.Lock()
	if healthy && !s.cancelled.Load() {
		_ = s.qs.Close()
		s.qs.CancelRead(quic.StreamErrorCode(CodeNone))
	}
	s.writeMu.Unlock()
	<-s.done
	s.release()
	return nil
}

// A stream keeps a frame buffer of up to smallFrame bytes between frames; larger ones (a
// catch-up's frames of up to 1 MiB) go back to frameBufs once written. Kept by every stream, they
// held 100 MiB after a region caught up on 100 partitions, until the streams closed.
const smallFrame = 64 << 10

var frameBufs sync.Pool // *[]byte, each of more than smallFrame bytes

// frameBuf returns an empty buffer for a frame of about size bytes.
func (s *SendStream) frameBuf(size int) []byte {
	if size <= cap(s.buf) || size <= smallFrame {
		return s.buf[:0]
	}
	if b, ok := frameBufs.Get().(*[]byte); ok && cap(*b) >= size {
		return (*b)[:0]
	}
	return make([]byte, 0, size)
}

// keepFrameBuf gives a large frame buffer back to frameBufs once its frame is written.
func (s *SendStream) keepFrameBuf() {
	if cap(s.buf) > smallFrame {
		b := s.buf[:0]
		frameBufs.Put(&b)
		s.buf = nil
	}
}
