package replicator

// RecvStream: the receiving half of a partition stream. A reader goroutine decodes ENTRIES,
// checks them against the credit granted and the offset order, and queues them for Recv; the
// handler's goroutine calls Recv, Ack and Grant. Writes (ACK, CREDIT, ERROR, FIN) go through one
// frameWriter.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/quic-go/quic-go"
)

// RecvStream receives one partition's entries from one peer. It is handed to Handler.Accept and
// is valid until Accept returns.
type RecvStream struct {
	mc  *meshConn
	qs  *quic.Stream
	fr  *frameReader
	w   *frameWriter
	req OpenRequest
	log *slog.Logger

	ctx    context.Context
	cancel context.CancelCauseFunc
	items  chan Batch    // closed by the reader after the terminal error is recorded
	done   chan struct{} // closed when the reader exits

	mu struct {
		sync.Mutex
		granted    Credit // total granted
		received   Credit // total received
		grantedAny bool
		acked      int64
		hasAck     bool
		next       int64 // the next entry must start at or after this offset
		err        error // terminal: io.EOF for a clean end
	}
}

func newRecvStream(mc *meshConn, qs *quic.Stream, fr *frameReader, w *frameWriter, req OpenRequest, log *slog.Logger) *RecvStream {
	ctx, cancel := context.WithCancelCause(mc.ctx)
	rs := &RecvStream{
		mc: mc, qs: qs, fr: fr, w: w, req: req, log: log,
		ctx: ctx, cancel: cancel,
		items: make(chan Batch, 2),
		done:  make(chan struct{}),
	}
	rs.mu.next = req.StartOffset
	return rs
}

func (rs *RecvStream) start() {
	rs.mc.l.streamDelta(1)
	go rs.readLoop() // accounted to the caller's transport goroutine, which waits for done
}

// terminate records the first terminal error and ends the stream's context.
func (rs *RecvStream) terminate(err error) {
	rs.mu.Lock()
	if rs.mu.err == nil {
		rs.mu.err = err
	}
	rs.mu.Unlock()
	if err != io.EOF {
		rs.cancel(err)
	}
}

// violation fails the stream for a sender's protocol error: ERROR to the sender, then FIN, and
// stop reading. Other streams of the connection are not affected.
func (rs *RecvStream) violation(code ErrorCode, err error) {
	rs.log.Warn("replicator: closing stream after a bad frame from the sender", "err", err)
	// Write before terminate: terminate ends rs.ctx, which would cut the write.
	_ = rs.w.write(rs.ctx, errorFrame{Code: code, Message: truncate(err.Error())})
	rs.w.closeStream()
	rs.terminate(err)
	rs.qs.CancelRead(quic.StreamErrorCode(code))
}

func (rs *RecvStream) readLoop() {
	defer close(rs.done)
	defer close(rs.items)
	for {
		f, n, err := rs.fr.next()
		if err != nil {
			switch {
			case errors.Is(err, ErrMalformedFrame) || errors.Is(err, ErrFrameTooLarge):
				rs.violation(CodeProtocolViolation, err)
			case err == io.EOF:
				rs.terminate(io.EOF)
			default:
				rs.terminate(fmt.Errorf("%w: %w", ErrStreamClosed, streamErr(rs.mc, err)))
			}
			return
		}
		rs.mc.l.ctr.recv(n)
		switch f := f.(type) {
		case entriesFrame:
			b := Batch{Entries: f.Entries, Bytes: f.Bytes}
			rs.mu.Lock()
			next := rs.mu.next
			over := rs.mu.received.add(b.Credit())
			exceeded := over.Bytes > rs.mu.granted.Bytes || over.Entries > rs.mu.granted.Entries
			granted := rs.mu.granted
			if !exceeded && f.Entries[0].Offset >= next {
				rs.mu.received = over
				rs.mu.next = b.End()
			}
			rs.mu.Unlock()
			if exceeded {
				rs.violation(CodeCreditExceeded, fmt.Errorf("%w: %d bytes / %d entries received, %d / %d granted",
					ErrCreditExceeded, over.Bytes, over.Entries, granted.Bytes, granted.Entries))
				return
			}
			if f.Entries[0].Offset < next {
				rs.violation(CodeProtocolViolation, fmt.Errorf("%w: entry at offset %d, expected >= %d", ErrEntryOrder, f.Entries[0].Offset, next))
				return
			}
			select {
			case rs.items <- b:
			case <-rs.ctx.Done():
				return
			}
		case errorFrame:
			rs.terminate(&LinkError{Code: f.Code, Message: f.Message, Remote: true})
			return
		default:
			rs.violation(CodeProtocolViolation, fmt.Errorf("%w: sender sent %s on a partition stream", ErrMalformedFrame, f.frameType()))
			return
		}
	}
}

// Recv returns the next run of entries. Before the first Grant it grants the configured
// initial window (StreamCreditBytes, StreamCreditEntries), so a handler that wants to tell the
// sender its durable position first calls Ack before Recv. It returns io.EOF after the sender
// closed the stream cleanly, a *LinkError if the sender reported one, or ctx's error.
func (rs *RecvStream) Recv(ctx context.Context) (Batch, error) {
	rs.mu.Lock()
	need := !rs.mu.grantedAny
	rs.mu.Unlock()
	if need {
		if err := rs.Grant(Credit{Bytes: rs.mc.t.cfg.StreamCreditBytes, Entries: rs.mc.t.cfg.StreamCreditEntries}); err != nil {
			return Batch{}, err
		}
	}
	select {
	case b, ok := <-rs.items:
		if ok {
			return b, nil
		}
		return Batch{}, rs.Err()
	case <-ctx.Done():
		if err := rs.Err(); err != nil {
			return Batch{}, err
		}
		return Batch{}, ctx.Err()
	}
}

// Grant adds credit for the sender. A receiver that grants back each batch's Credit() once the
// batch is durable keeps the sender's unacknowledged data within the initial window.
func (rs *RecvStream) Grant(c Credit) error {
	if c.Bytes < 0 || c.Entries < 0 || (c.Bytes == 0 && c.Entries == 0) {
		return fmt.Errorf("replicator: Grant(%+v): credit must be non-negative and not empty", c)
	}
	// Raise the local limit before the sender can learn of it, so the reader's check never
	// lags behind what the sender may send.
	rs.mu.Lock()
	rs.mu.granted = rs.mu.granted.add(c)
	rs.mu.grantedAny = true
	rs.mu.Unlock()
	return rs.write(creditFrame{Credit: c})
}

// Ack tells the sender every entry below next is durable here. It must not go backwards.
func (rs *RecvStream) Ack(next int64) error {
	rs.mu.Lock()
	if next < 0 || (rs.mu.hasAck && next < rs.mu.acked) {
		prev := rs.mu.acked
		rs.mu.Unlock()
		return fmt.Errorf("replicator: Ack(%d) goes back from %d", next, prev)
	}
	rs.mu.acked, rs.mu.hasAck = next, true
	rs.mu.Unlock()
	return rs.write(ackFrame{Next: next})
}

// AckAndGrant is Ack followed by Grant in one write: the usual step once a batch is durable,
// AckAndGrant(b.End(), b.Credit()).
func (rs *RecvStream) AckAndGrant(next int64, c Credit) error {
	if c.Bytes < 0 || c.Entries < 0 || (c.Bytes == 0 && c.Entries == 0) {
		return fmt.Errorf("replicator: AckAndGrant credit %+v must be non-negative and not empty", c)
	}
	rs.mu.Lock()
	if next < 0 || (rs.mu.hasAck && next < rs.mu.acked) {
		prev := rs.mu.acked
		rs.mu.Unlock()
		return fmt.Errorf("replicator: AckAndGrant(%d) goes back from %d", next, prev)
	}
	rs.mu.acked, rs.mu.hasAck = next, true
	rs.mu.granted = rs.mu.granted.add(c)
	rs.mu.grantedAny = true
	rs.mu.Unlock()
	return rs.write(ackFrame{Next: next}, creditFrame{Credit: c})
}

func (rs *RecvStream) write(fs ...frame) error {
	if err := rs.w.write(rs.ctx, fs...); err != nil {
		if e := rs.Err(); e != nil && e != io.EOF {
			return e
		}
		return fmt.Errorf("%w: %w", ErrStreamClosed, streamErr(rs.mc, err))
	}
	return nil
}

// Err returns why the stream ended (io.EOF for a clean end by the sender), or nil.
func (rs *RecvStream) Err() error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.mu.err
}

// Request is the sender's OPEN.
func (rs *RecvStream) Request() OpenRequest { return rs.req }

// Peer is the sending node.
func (rs *RecvStream) Peer() PeerInfo { return rs.mc.peer }

// finish ends the stream after the handler returned: the handler's error (if any) goes to the
// sender as ERROR, then FIN, then reading stops.
func (rs *RecvStream) finish(herr error) {
	if herr != nil && rs.ctx.Err() == nil {
		var le *LinkError
		code, msg := CodeRejected, herr.Error()
		if errors.As(herr, &le) {
			code, msg = le.Code, le.Message
		}
		rs.log.Info("replicator: handler ended the stream with an error", "code", code, "err", herr)
		_ = rs.w.write(rs.ctx, errorFrame{Code: code, Message: truncate(msg)})
	}
	rs.w.closeStream()
	rs.qs.CancelRead(quic.StreamErrorCode(CodeNone))
	rs.cancel(ErrStreamClosed)
	<-rs.done
	rs.mc.l.streamDelta(-1)
}
