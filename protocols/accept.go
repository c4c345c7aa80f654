package protocols

import (
	"errors"
	"net"
	"time"
)

// Accept waits for the next connection on ln for a front end's accept loop.
// A transient failure (a timeout, as when the process is out of file
// descriptors) is retried after a pause that doubles from 5 ms to a second,
// so the loop never spins while the condition lasts; stop ends the pause
// early (nil waits it out). Any other error is returned as it is: the
// listener was closed or broke.
func Accept(ln net.Listener, stop <-chan struct{}) (net.Conn, error) {
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err == nil {
			return nc, nil
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			return nil, err
		}
		delay = min(max(2*delay, 5*time.Millisecond), time.Second)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-stop:
			t.Stop()
			return nil, err
		}
	}
}
