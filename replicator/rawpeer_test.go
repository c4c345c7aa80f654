package replicator

import (
	"context"
	"crypto/tls"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// rawPeer speaks the link protocol by hand over quic-go with a valid mesh certificate, so tests
// can send frames the Transport would never produce.
type rawPeer struct {
	t     testing.TB
	qc    *quic.Conn
	ctrl  *quic.Stream
	hello helloFrame // the server's answer
	mu    sync.Mutex
	pongs map[uint64]chan struct{}
	done  chan struct{}
}

func rawTLS(t testing.TB, secret, name string) *tls.Config {
	t.Helper()
	caDER, caKey, err := DevCA(secret)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := IssueLeaf(caDER, caKey, name, "us", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true, NextProtos: []string{ALPN}}
}

// dialRaw connects and sends hello; it returns the peer and the first frame the server sent.
func dialRaw(t testing.TB, addr string, hello helloFrame) (*rawPeer, frame) {
	t.Helper()
	ctx := testCtx(t, 10*time.Second)
	qc, err := quic.DialAddr(ctx, addr, rawTLS(t, testSecret, hello.Node), &quic.Config{KeepAlivePeriod: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = qc.CloseWithError(0, "test over") })
	ctrl, err := qc.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ctrl.Write(appendFrame(nil, hello)); err != nil {
		t.Fatal(err)
	}
	_ = ctrl.SetReadDeadline(time.Now().Add(5 * time.Second))
	fr := newFrameReader(ctrl, maxFrameBytes)
	f, _, err := fr.next()
	if err != nil {
		t.Fatalf("reading the answer to HELLO: %v", err)
	}
	_ = ctrl.SetReadDeadline(time.Time{})
	p := &rawPeer{t: t, qc: qc, ctrl: ctrl, pongs: make(map[uint64]chan struct{}), done: make(chan struct{})}
	if h, ok := f.(helloFrame); ok {
		p.hello = h
		go p.control(fr)
		t.Cleanup(func() { _ = qc.CloseWithError(0, ""); <-p.done })
	} else {
		close(p.done)
	}
	return p, f
}

// control answers the server's heartbeats so it keeps the connection.
func (p *rawPeer) control(fr *frameReader) {
	defer close(p.done)
	var mu sync.Mutex
	for {
		f, _, err := fr.next()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case pingFrame:
			mu.Lock()
			_, err := p.ctrl.Write(appendFrame(nil, pongFrame(f)))
			mu.Unlock()
			if err != nil {
				return
			}
		case pongFrame:
			p.mu.Lock()
			if ch, ok := p.pongs[f.Nonce]; ok {
				close(ch)
				delete(p.pongs, f.Nonce)
			}
			p.mu.Unlock()
		}
	}
}

// ping checks the control stream still answers.
func (p *rawPeer) ping(nonce uint64) bool {
	ch := make(chan struct{})
	p.mu.Lock()
	p.pongs[nonce] = ch
	p.mu.Unlock()
	if _, err := p.ctrl.Write(appendFrame(nil, pingFrame{Nonce: nonce})); err != nil {
		return false
	}
	select {
	case <-ch:
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}

func (p *rawPeer) stream(ctx context.Context) (*quic.Stream, *frameReader) {
	p.t.Helper()
	s, err := p.qc.OpenStreamSync(ctx)
	if err != nil {
		p.t.Fatal(err)
	}
	return s, newFrameReader(s, maxFrameBytes)
}

// readUntil reads frames until one of type typ arrives; it fails the test on error or timeout.
func readUntil(t testing.TB, s *quic.Stream, fr *frameReader, typ frameType) frame {
	t.Helper()
	_ = s.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer s.SetReadDeadline(time.Time{})
	for {
		f, _, err := fr.next()
		if err != nil {
			t.Fatalf("waiting for %s: %v", typ, err)
		}
		if f.frameType() == typ {
			return f
		}
	}
}

func defaultHello(name string) helloFrame {
	return helloFrame{MinVersion: 1, MaxVersion: 1, Node: name, Region: "us", MaxFrame: 1 << 20, Incarnation: 7}
}
