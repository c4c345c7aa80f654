package protocols

import (
	"errors"
	"net"
	"testing"
	"time"
)

// flakyListener fails with a timeout a number of times before it hands out
// a real loopback connection, the way a listener behaves while the process
// is out of file descriptors.
type flakyListener struct {
	net.Listener
	fails int
	calls int
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "accept: too many open files" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func (l *flakyListener) Accept() (net.Conn, error) {
	l.calls++
	if l.calls <= l.fails {
		return nil, timeoutErr{}
	}
	return l.Listener.Accept()
}

func TestAcceptRetriesTransientFailures(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			defer c.Close()
			time.Sleep(time.Second)
		}
	}()
	fl := &flakyListener{Listener: ln, fails: 3}
	nc, err := Accept(fl, nil)
	if err != nil {
		t.Fatalf("Accept after 3 transient failures: %v", err)
	}
	nc.Close()
	if fl.calls != 4 {
		t.Fatalf("Accept called the listener %d times, want 4", fl.calls)
	}
}

func TestAcceptStopEndsThePause(t *testing.T) {
	fl := &flakyListener{fails: 1 << 30}
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := Accept(fl, stop)
		done <- err
	}()
	close(stop)
	select {
	case err := <-done:
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("Accept after stop returned %v, want the transient error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Accept did not return after stop")
	}
}

func TestAcceptReturnsOtherErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if _, err := Accept(ln, nil); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept on a closed listener = %v, want net.ErrClosed", err)
	}
}
