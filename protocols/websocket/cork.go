package websocket

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// The WebSocket library flushes every message it writes with a syscall of
// its own. A consumer session writing a batch of messages therefore made
// one write per message, about a quarter of the node's CPU when pushing
// messages. A session corks its connection while it writes a batch, and
// the batch leaves in one write when it uncorks.

// corkConn is the hijacked connection under a session. While corked, writes
// collect in a buffer (up to maxCork bytes); uncork writes them at once.
// Writes from other goroutines meanwhile (the library's pongs and close
// frames) join the buffer in the order they came, and leave with it.
type corkConn struct {
	net.Conn
	mu     sync.Mutex
	corked bool
	// deadline bounds the writes a full cork makes before it is uncorked.
	deadline time.Time
	buf      []byte
	writes   *atomic.Int64 // counts writes to the connection
}

// maxCork bounds what a cork holds before it writes anyway.
const maxCork = 256 << 10

// corkBufs are the buffers of corked connections, each of maxCork bytes,
// taken when a cork holds its first write and given back when it writes
// them: a connection holds one only while it is corked. (Grown by append,
// a buffer went past maxCork as it filled and was dropped: every batch of
// a busy consumer allocated one, half of what its node allocated.)
var corkBufs = sync.Pool{New: func() any { b := make([]byte, 0, maxCork); return &b }}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked && len(c.buf)+len(p) <= maxCork {
		if c.buf == nil {
			c.buf = (*corkBufs.Get().(*[]byte))[:0]
		}
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	if c.corked {
		// The cork is full: what it holds and p go out now, within
		// the cork's deadline.
		_ = c.Conn.SetWriteDeadline(c.deadline)
		defer func() { _ = c.Conn.SetWriteDeadline(time.Time{}) }()
	}
	if err := c.writeBufLocked(); err != nil {
		return 0, err
	}
	c.writes.Add(1)
	return c.Conn.Write(p)
}

func (c *corkConn) writeBufLocked() error {
	if len(c.buf) == 0 {
		return nil
	}
	c.writes.Add(1)
	_, err := c.Conn.Write(c.buf)
	b := c.buf[:0]
	c.buf = nil
	corkBufs.Put(&b)
	return err
}

// cork holds the writes that follow until uncork. Those that do not fit
// the cork go out within timeout from now: a session writes its frames
// into a cork with no context of their own (session.batch).
func (c *corkConn) cork(timeout time.Duration) {
	c.mu.Lock()
	c.corked = true
	c.deadline = time.Now().Add(timeout)
	c.mu.Unlock()
}

// uncork writes what the cork holds, within timeout.
func (c *corkConn) uncork(timeout time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	if len(c.buf) == 0 {
		return nil
	}
	_ = c.Conn.SetWriteDeadline(time.Now().Add(timeout))
	err := c.writeBufLocked()
	_ = c.Conn.SetWriteDeadline(time.Time{})
	return err
}

// Close writes what the cork holds (a close frame may be in it) before
// closing the connection.
func (c *corkConn) Close() error {
	c.mu.Lock()
	c.corked = false
	if len(c.buf) > 0 {
		_ = c.Conn.SetWriteDeadline(time.Now().Add(time.Second))
		_ = c.writeBufLocked()
	}
	c.mu.Unlock()
	return c.Conn.Close()
}

// corkingWriter hands the WebSocket library a corkConn when it hijacks the
// HTTP connection.
type corkingWriter struct {
	http.ResponseWriter
	writes *atomic.Int64
	conn   *corkConn
}

func (w *corkingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *corkingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if brw.Writer.Buffered() > 0 {
		if err := brw.Writer.Flush(); err != nil {
			_ = nc.Close()
			return nil, nil, err
		}
	}
	w.conn = &corkConn{Conn: nc, writes: w.writes}
	// The HTTP server's 4 KiB reader took one read syscall per two or
	// three 1 KiB messages; a larger one takes what has arrived in one.
	// The library keeps the reader it is given, resets it to read what
	// it holds and then the connection, so the larger reader must hold
	// what the server's had read past the upgrade request.
	held, _ := brw.Reader.Peek(brw.Reader.Buffered())
	br := bufio.NewReaderSize(io.MultiReader(bytes.NewReader(held), w.conn), sessionReadBuffer)
	if len(held) > 0 {
		if _, err := br.Peek(len(held)); err != nil {
			_ = nc.Close()
			return nil, nil, err
		}
	}
	return w.conn, bufio.NewReadWriter(br, bufio.NewWriterSize(w.conn, brw.Writer.Size())), nil
}

// sessionReadBuffer is the read buffer of a session's connection.
const sessionReadBuffer = 32 << 10
