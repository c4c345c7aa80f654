package replicator

import (
	"net"
	"net/netip"
	"sync"
)

// SeverableConn wraps a UDP socket so a test can cut the network between two nodes on loopback
// and restore it: packets to and from a severed address are dropped silently, as a real
// partition would. Pass it to NewWithConn. It lives in the package (not a _test file) because
// the in-process test cluster of other packages needs it to partition nodes.
//
// Wrapping hides the socket's batch I/O (recvmmsg, GSO, ECN) from quic-go, so it is for tests
// only; benchmarks use a plain socket.
type SeverableConn struct {
	net.PacketConn
	mu      sync.RWMutex
	severed map[netip.AddrPort]bool
	all     bool
}

// NewSeverableConn wraps pc; nothing is severed at first.
func NewSeverableConn(pc net.PacketConn) *SeverableConn {
	return &SeverableConn{PacketConn: pc, severed: make(map[netip.AddrPort]bool)}
}

// Sever drops every packet to and from addr (the peer's UDP address) until Heal.
func (c *SeverableConn) Sever(addr netip.AddrPort) {
	c.mu.Lock()
	c.severed[canon(addr)] = true
	c.mu.Unlock()
}

// Heal restores traffic with addr.
func (c *SeverableConn) Heal(addr netip.AddrPort) {
	c.mu.Lock()
	delete(c.severed, canon(addr))
	c.mu.Unlock()
}

// SeverAll drops all traffic (the node is cut off from everyone) until HealAll.
func (c *SeverableConn) SeverAll() {
	c.mu.Lock()
	c.all = true
	c.mu.Unlock()
}

// HealAll restores all traffic, including addresses severed one by one.
func (c *SeverableConn) HealAll() {
	c.mu.Lock()
	c.all = false
	clear(c.severed)
	c.mu.Unlock()
}

func canon(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}

func (c *SeverableConn) dropped(addr net.Addr) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.all {
		return true
	}
	if len(c.severed) == 0 {
		return false
	}
	ua, ok := addr.(*net.UDPAddr)
	if !ok {
		return false
	}
	return c.severed[canon(ua.AddrPort())]
}

// ReadFrom returns the next packet not from a severed address.
func (c *SeverableConn) ReadFrom(p []byte) (int, net.Addr, error) {
	for {
		n, addr, err := c.PacketConn.ReadFrom(p)
		if err != nil || !c.dropped(addr) {
			return n, addr, err
		}
	}
}

// WriteTo pretends to send a packet to a severed address and drops it.
func (c *SeverableConn) WriteTo(p []byte, addr net.Addr) (int, error) {
	if c.dropped(addr) {
		return len(p), nil
	}
	return c.PacketConn.WriteTo(p, addr)
}

// SetReadBuffer passes through so quic-go can size the socket's buffers.
func (c *SeverableConn) SetReadBuffer(n int) error {
	if s, ok := c.PacketConn.(interface{ SetReadBuffer(int) error }); ok {
		return s.SetReadBuffer(n)
	}
	return nil
}

// SetWriteBuffer passes through so quic-go can size the socket's buffers.
func (c *SeverableConn) SetWriteBuffer(n int) error {
	if s, ok := c.PacketConn.(interface{ SetWriteBuffer(int) error }); ok {
		return s.SetWriteBuffer(n)
	}
	return nil
}
