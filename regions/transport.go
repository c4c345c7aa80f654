package regions

import (
	"context"
	"log"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// transport is memberlist's UDP+TCP transport with one change: outgoing TCP
// connections (joins, push/pull, key queries' stream fallbacks) dial with a
// context that Shutdown cancels, and connections still open at Shutdown are
// closed. memberlist's own dials run for TCPTimeout (30s in the WAN
// profile) and ignore shutdown, so without this a node closing while a
// seed is unreachable would hang its Close for that long.
type transport struct {
	*memberlist.NetTransport

	ctx    context.Context
	cancel context.CancelFunc

	mu struct {
		sync.Mutex
		conns map[*trackedConn]struct{}
	}
}

var _ memberlist.NodeAwareTransport = (*transport)(nil)

// netTransport makes memberlist's transport (a variable for tests).
var netTransport = memberlist.NewNetTransport

// portTries is how many times a transport on port 0 is made before a port
// taken for UDP fails the start.
const portTries = 10

func newTransport(host string, port int, logger *log.Logger) (*transport, error) {
	cfg := &memberlist.NetTransportConfig{BindAddrs: []string{host}, BindPort: port, Logger: logger}
	nt, err := netTransport(cfg)
	// Port 0 takes a free TCP port and then binds UDP on the same number,
	// which another process may hold: pick again, as memberlist does for
	// the transports it makes itself (its error keeps no cause to test).
	for try := 1; port == 0 && err != nil && try < portTries; try++ {
		nt, err = netTransport(cfg)
	}
	if err != nil {
		return nil, err
	}
	t := &transport{NetTransport: nt}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	t.mu.conns = make(map[*trackedConn]struct{})
	return t, nil
}

// DialTimeout implements memberlist.Transport.
func (t *transport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.dial(addr, timeout)
}

// DialAddressTimeout implements memberlist.NodeAwareTransport.
func (t *transport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return t.dial(a.Addr, timeout)
}

func (t *transport) dial(addr string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(t.ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, t: t}
	t.mu.Lock()
	if t.ctx.Err() != nil {
		t.mu.Unlock()
		c.Close()
		return nil, net.ErrClosed
	}
	t.mu.conns[tc] = struct{}{}
	t.mu.Unlock()
	return tc, nil
}

// Shutdown implements memberlist.Transport: it cancels dials in flight,
// closes outgoing connections, then shuts the listeners down.
func (t *transport) Shutdown() error {
	t.cancel()
	t.mu.Lock()
	conns := t.mu.conns
	t.mu.conns = map[*trackedConn]struct{}{}
	t.mu.Unlock()
	for c := range conns {
		c.Conn.Close()
	}
	return t.NetTransport.Shutdown()
}

type trackedConn struct {
	net.Conn
	t    *transport
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.t.mu.Lock()
		delete(c.t.mu.conns, c)
		c.t.mu.Unlock()
	})
	return c.Conn.Close()
}
