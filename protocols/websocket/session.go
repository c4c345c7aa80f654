package websocket

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// session is one WebSocket connection after the upgrade. The handler's
// goroutine (the HTTP server's, for the connection) reads client messages
// and handles them in order; frames to the client are queued and written by
// one goroutine the endpoint runs (its writer or pump), so a handler never
// waits on the network; a keep-alive goroutine pings the client.
//
// A session ends when the client closes, a write fails, the client stops
// answering pings, bad input closes it (closeWith), or the server shuts
// down. closeWith sends the close frame once; later calls are no-ops, so
// the first reason wins.
type session struct {
	s *Server
	c *websocket.Conn
	// cork is c's connection; nil where the connection was not hijacked
	// through a corkingWriter.
	cork   *corkConn
	kind   endpoint
	log    *slog.Logger
	remote string
	limit  int

	// ctx ends when the session is torn down.
	ctx    context.Context
	cancel context.CancelFunc

	out struct {
		sync.Mutex
		frames [][]byte
	}
	// wake is signalled when frames are queued or the endpoint has work.
	wake chan struct{}

	// rbuf holds the message read last; read reuses it.
	rbuf bytes.Buffer

	closing   atomic.Bool
	closeOnce sync.Once
	// ep is the endpoint the session serves; set before the session is
	// registered, so that Server.Close can ask it to end gracefully.
	ep   endpointSession
	wg   sync.WaitGroup
	done chan struct{}
}

func (s *Server) newSession(c *websocket.Conn, kind endpoint, remote string) *session {
	ss := &session{
		s: s, c: c, kind: kind, remote: remote, limit: s.cfg.frameLimit(),
		log:  s.log.With("remote", remote, "endpoint", kind.String()),
		wake: make(chan struct{}, 1),
		done: make(chan struct{}),
	}
	if kind != epProducer {
		// Consumers and readers only send small commands.
		ss.limit = min(ss.limit, maxCommandFrame)
	}
	ss.ctx, ss.cancel = context.WithCancel(context.Background())
	// Reads are given no context (read): the connection closes when the
	// session ends, which ends a read waiting on it.
	context.AfterFunc(ss.ctx, func() { _ = c.CloseNow() })
	c.SetReadLimit(int64(ss.limit) + 1)
	return ss
}

// maxKeptReadBuffer bounds the read buffer a session keeps between
// messages, so a session that once sent a message of megabytes does not
// hold that much for its life.
const maxKeptReadBuffer = 1 << 20

// maxCommandFrame bounds what a consumer or reader client sends.
const maxCommandFrame = 64 << 10

// signal wakes the endpoint's writer.
func (ss *session) signal() {
	select {
	case ss.wake <- struct{}{}:
	default:
	}
}

// queue hands a text frame to the writer.
func (ss *session) queue(frame []byte) {
	ss.out.Lock()
	ss.out.frames = append(ss.out.frames, frame)
	ss.out.Unlock()
	ss.signal()
}

// queued takes the frames queued so far.
func (ss *session) queued() [][]byte {
	ss.out.Lock()
	defer ss.out.Unlock()
	f := ss.out.frames
	ss.out.frames = nil
	return f
}

// write writes one text frame within the write timeout.
func (ss *session) write(frame []byte) error {
	ctx, cancel := context.WithTimeout(ss.ctx, ss.s.cfg.WriteTimeout)
	defer cancel()
	return ss.writeIn(ctx, frame)
}

// writeCorked writes one text frame into the corked connection, whose
// deadline bounds it (batch).
func (ss *session) writeCorked(frame []byte) error {
	return ss.writeIn(context.Background(), frame)
}

// writeIn writes one text frame within ctx.
func (ss *session) writeIn(ctx context.Context, frame []byte) error {
	if err := ss.c.Write(ctx, websocket.MessageText, frame); err != nil {
		if !ss.closing.Load() {
			ss.log.Debug("write failed; closing the session", "err", err)
		}
		ss.closeNow()
		return err
	}
	ss.s.m.framesOut.Add(1)
	return nil
}

// batch runs f, which writes frames with writeIn(ctx, ...), with the
// connection corked: what f writes leaves in one write (or a few, for
// batches over maxCork) when it returns. The batch has the write timeout
// for its frames, and again for the write that uncorks.
//
// Corked, f's frames are written with no context: the cork's deadline
// bounds them. Given one that can end, the library registered a callback
// on it and removed it again for every frame it wrote (and every message
// it read: read), a tenth of a node's CPU under a WebSocket consumer.
func (ss *session) batch(f func(ctx context.Context) error) error {
	if ss.cork == nil {
		ctx, cancel := context.WithTimeout(ss.ctx, ss.s.cfg.WriteTimeout)
		defer cancel()
		return f(ctx)
	}
	ss.cork.cork(ss.s.cfg.WriteTimeout)
	err := f(context.Background())
	if uerr := ss.uncork(); uerr != nil && err == nil {
		err = uerr
	}
	return err
}

// uncork writes what the cork holds, within the write timeout; a failed
// write closes the session, as a frame's does.
func (ss *session) uncork() error {
	if err := ss.cork.uncork(ss.s.cfg.WriteTimeout); err != nil {
		if !ss.closing.Load() {
			ss.log.Debug("write failed; closing the session", "err", err)
		}
		ss.closeNow()
		return err
	}
	return nil
}

// flush writes every queued frame.
func (ss *session) flush() error {
	for {
		frames := ss.queued()
		if len(frames) == 0 {
			return nil
		}
		err := ss.batch(func(ctx context.Context) error {
			for _, f := range frames {
				if err := ss.writeIn(ctx, f); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
}

// errSessionClosed ends a read after the session closed itself.
var errSessionClosed = errors.New("websocket: session closed")

// read returns the next client message, valid until the next read (its
// buffer is reused). Binary messages and messages over the frame limit
// close the session with the standard codes (1003, 1009) and a reason
// saying what to change.
func (ss *session) read() ([]byte, error) {
	typ, r, err := ss.c.Reader(context.Background()) // see newSession
	if err != nil {
		return nil, err
	}
	if ss.rbuf.Cap() > maxKeptReadBuffer {
		ss.rbuf = bytes.Buffer{} // a large message's buffer is not kept
	}
	ss.rbuf.Reset()
	if _, err := ss.rbuf.ReadFrom(io.LimitReader(r, int64(ss.limit)+1)); err != nil {
		return nil, err
	}
	b := ss.rbuf.Bytes()
	if len(b) > ss.limit {
		ss.s.m.badInput.Add(1)
		ss.closeWith(websocket.StatusMessageTooBig, fmt.Sprintf("message over the limit of %d bytes; send smaller messages", ss.limit))
		return nil, errSessionClosed
	}
	if typ != websocket.MessageText {
		ss.s.m.badInput.Add(1)
		ss.closeWith(websocket.StatusUnsupportedData, "binary messages are not accepted; send JSON in text messages")
		return nil, errSessionClosed
	}
	ss.s.m.framesIn.Add(1)
	return b, nil
}

// closeWith closes the session with a code and reason, once.
func (ss *session) closeWith(code websocket.StatusCode, reason string) {
	ss.closeOnce.Do(func() {
		ss.closing.Store(true)
		reason = clipReason(reason)
		if code >= closeBase {
			ss.log.Info("closing the session", "code", int(code), "reason", reason)
		} else {
			ss.log.Debug("closing the session", "code", int(code), "reason", reason)
		}
		// Close sends the frame and waits (bounded) for the client's
		// answer, which the reading goroutine or Close itself reads.
		_ = ss.c.Close(code, reason)
		ss.cancel()
	})
}

// fail closes the session with one of Pulsar's errors.
func (ss *session) fail(code CloseCode, cause string) {
	ss.closeWith(code, closeReason(code, cause))
}

// closeNow drops the connection without a close handshake.
func (ss *session) closeNow() {
	ss.closeOnce.Do(func() {
		ss.closing.Store(true)
		_ = ss.c.CloseNow()
		ss.cancel()
	})
}

// keepAlive pings the client every KeepAliveInterval and closes the
// session when a ping goes unanswered for as long.
func (ss *session) keepAlive() {
	defer ss.wg.Done()
	iv := ss.s.cfg.KeepAliveInterval
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		select {
		case <-ss.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(ss.ctx, iv)
		err := ss.c.Ping(ctx)
		cancel()
		if err != nil {
			if ss.ctx.Err() == nil {
				ss.log.Info("closing the session: the client did not answer a ping", "within", iv)
			}
			ss.closeNow()
			return
		}
	}
}

// start runs the keep-alive and the endpoint's writer.
func (ss *session) start(writer func()) {
	ss.wg.Add(2)
	go ss.keepAlive()
	go func() {
		defer ss.wg.Done()
		writer()
	}()
}

// readErr logs why reading ended, unless it is an ordinary end.
func (ss *session) readErr(err error) {
	if ss.closing.Load() || errors.Is(err, errSessionClosed) || errors.Is(err, context.Canceled) {
		return
	}
	switch websocket.CloseStatus(err) {
	case websocket.StatusNormalClosure, websocket.StatusGoingAway, websocket.StatusNoStatusRcvd:
		return
	case -1:
		if errors.Is(err, io.EOF) {
			return
		}
		ss.log.Debug("session ended", "err", err)
	default:
		ss.log.Debug("the client closed the session", "code", int(websocket.CloseStatus(err)), "err", err)
	}
}

// end tears the connection down and waits for the session's goroutines.
func (ss *session) end() {
	ss.closeNow()
	ss.wg.Wait()
	close(ss.done)
}

// logAttrs are the stable keys a session logs with.
func logAttrs(t target) []any {
	a := []any{"topic", t.topic.String()}
	if t.subscription != "" {
		a = append(a, "subscription", t.subscription)
	}
	return a
}
