package replicator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
)

// linkCounters are a link's traffic totals across its connections and streams, in link frames
// (headers included) rather than QUIC packets.
type linkCounters struct {
	bytesSent, bytesRecv, framesSent, framesRecv atomic.Uint64
}

func (c *linkCounters) sent(n int) {
	if c != nil && n > 0 {
		c.bytesSent.Add(uint64(n))
		c.framesSent.Add(1)
	}
}

func (c *linkCounters) recv(n int) {
	if c != nil && n > 0 {
		c.bytesRecv.Add(uint64(n))
		c.framesRecv.Add(1)
	}
}

// frameWriter serialises frame writes (and the final close) on one QUIC stream: quic-go forbids
// concurrent Write and Close, and several goroutines write small frames on the control stream
// and on a receiving stream (ACK and CREDIT from the handler, ERROR from the reader).
type frameWriter struct {
	mu     sync.Mutex
	s      *quic.Stream
	buf    []byte
	ctr    *linkCounters
	closed bool
}

var errWriterClosed = fmt.Errorf("%w: write after close", ErrStreamClosed)

// write sends frames with one stream write.
func (w *frameWriter) write(ctx context.Context, fs ...frame) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return errWriterClosed
	}
	w.buf = w.buf[:0]
	sizes := make([]int, 0, len(fs))
	for _, f := range fs {
		n := len(w.buf)
		w.buf = appendFrame(w.buf, f)
		sizes = append(sizes, len(w.buf)-n)
	}
	if err := writeCtx(ctx, w.s, w.buf); err != nil {
		return err
	}
	for _, n := range sizes {
		w.ctr.sent(n)
	}
	return nil
}

// closeStream sends FIN after everything written so far.
func (w *frameWriter) closeStream() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.closed = true
		_ = w.s.Close()
	}
}

// writeCtx writes b, cutting a write blocked on QUIC flow control short when ctx ends. A cut
// write may leave part of a frame on the stream, so the caller must then fail the stream.
//
// The deadline is set from an AfterFunc; the interleaving to guard against is the func running
// after the write returned and leaving a past deadline that would break the next write. The
// func only sets the deadline while active, under mu, and after a fired func the deadline is
// cleared again once active is false.
func writeCtx(ctx context.Context, s *quic.Stream, b []byte) error {
	if ctx.Done() == nil {
		_, err := s.Write(b)
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	var mu sync.Mutex
	active := true
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		if active {
			_ = s.SetWriteDeadline(time.Unix(1, 0))
		}
		mu.Unlock()
	})
	_, err := s.Write(b)
	mu.Lock()
	active = false
	mu.Unlock()
	if !stop() {
		_ = s.SetWriteDeadline(time.Time{})
		if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("replicator: write cut short: %w", ctx.Err())
		}
	}
	return err
}
