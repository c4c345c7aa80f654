package websocket

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// recConn records what is written to it, and the write deadline each
// write had.
type recConn struct {
	net.Conn
	writes    [][]byte
	deadlines []time.Time
	deadline  time.Time   // the one set now
	under     []time.Time // the deadline of each write
	closed    bool
}

func (c *recConn) Write(p []byte) (int, error) {
	c.writes = append(c.writes, bytes.Clone(p))
	c.under = append(c.under, c.deadline)
	return len(p), nil
}

func (c *recConn) SetWriteDeadline(t time.Time) error {
	c.deadlines = append(c.deadlines, t)
	c.deadline = t
	return nil
}

func (c *recConn) Close() error {
	c.closed = true
	return nil
}

// frames writes n frames through a bufio.Writer flushed after each, as the
// WebSocket library writes messages, and returns their bytes in order.
func frames(t *testing.T, c *corkConn, n, size int) []byte {
	t.Helper()
	bw := bufio.NewWriterSize(c, 4096)
	var all []byte
	for i := range n {
		f := bytes.Repeat([]byte{byte('a' + i%26)}, size)
		copy(f, fmt.Sprintf("frame %d|", i))
		all = append(all, f...)
		if _, err := bw.Write(f); err != nil {
			t.Fatal(err)
		}
		if err := bw.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	return all
}

// TestCorkWritesABatchAtOnce: frames written while corked reach the
// connection in one write, in order, when it uncorks, within a write
// deadline that is then cleared; uncorked, each flush is its own write.
func TestCorkWritesABatchAtOnce(t *testing.T) {
	rc := &recConn{}
	c := &corkConn{Conn: rc, writes: new(atomic.Int64)}
	c.cork(5 * time.Second)
	want := frames(t, c, 100, 300)
	if len(rc.writes) != 0 {
		t.Fatalf("%d writes while corked, want none", len(rc.writes))
	}
	if err := c.uncork(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if len(rc.writes) != 1 || !bytes.Equal(rc.writes[0], want) {
		t.Fatalf("uncork made %d writes, want one holding the 100 frames in order", len(rc.writes))
	}
	if len(rc.deadlines) != 2 || rc.deadlines[0].IsZero() || !rc.deadlines[1].IsZero() {
		t.Errorf("write deadlines %v: want one set for the write, then cleared", rc.deadlines)
	}
	rc.writes = nil
	frames(t, c, 3, 100)
	if len(rc.writes) != 3 {
		t.Errorf("uncorked, 3 flushed frames made %d writes, want 3", len(rc.writes))
	}
}

// TestCorkHoldsAtMostMaxCork: a batch larger than maxCork leaves in
// several writes, none over maxCork plus one frame, every byte in order;
// those made before the cork is uncorked have the deadline it was corked
// with, and the deadline is cleared after each.
func TestCorkHoldsAtMostMaxCork(t *testing.T) {
	rc := &recConn{}
	c := &corkConn{Conn: rc, writes: new(atomic.Int64)}
	corked := time.Now()
	c.cork(time.Minute)
	want := frames(t, c, 200, 4000) // 800 KB
	full := len(rc.writes)
	if full == 0 {
		t.Fatal("800 KB held in a cork of maxCork bytes")
	}
	for i, d := range rc.under {
		if d.Before(corked.Add(time.Minute)) || d.After(time.Now().Add(time.Minute)) {
			t.Fatalf("write %d of the full cork had deadline %v; want the minute it was corked with", i, d)
		}
	}
	if !rc.deadline.IsZero() {
		t.Fatal("the deadline stayed set after the full cork's writes")
	}
	if err := c.uncork(time.Second); err != nil {
		t.Fatal(err)
	}
	var got []byte
	for _, w := range rc.writes {
		if len(w) > maxCork+4096 {
			t.Errorf("a %d-byte write: the cork held more than %d", len(w), maxCork)
		}
		got = append(got, w...)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the frames did not reach the connection in order")
	}
	if len(rc.writes) < 3 || len(rc.writes) > 10 {
		t.Errorf("%d writes for 800 KB through a %d-byte cork", len(rc.writes), maxCork)
	}
}

// TestCorkCloseWritesWhatItHolds: a close frame written while the session
// is corked (the library closing from another goroutine) reaches the
// client before the connection closes.
func TestCorkCloseWritesWhatItHolds(t *testing.T) {
	rc := &recConn{}
	c := &corkConn{Conn: rc, writes: new(atomic.Int64)}
	c.cork(time.Second)
	want := frames(t, c, 2, 50)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if !rc.closed || len(rc.writes) != 1 || !bytes.Equal(rc.writes[0], want) {
		t.Fatalf("close: closed %v, writes %d; want the held bytes written, then closed", rc.closed, len(rc.writes))
	}
}
