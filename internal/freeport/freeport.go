package freeport

import (
	"fmt"
	"io"
	"net"
)

// Loopback returns n distinct 127.0.0.1 host:ports, each free a moment
// ago for both TCP and UDP: serf's gossip takes both on one port and the
// mesh takes UDP for QUIC, so every port suits any listener. It holds
// each port until it has all n, so no two are the same. They are
// released when it returns: another process can still take one before
// the caller binds it, so a caller that must not fail retries with new
// ports on "address already in use".
func Loopback(n int) ([]string, error) {
	var held []io.Closer
	defer func() {
		for _, c := range held {
			_ = c.Close()
		}
	}()
	ports := make([]string, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries >= 20*n+20 {
			return nil, fmt.Errorf("freeport: found %d of %d loopback ports free for both TCP and UDP", len(ports), n)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("freeport: %w", err)
		}
		held = append(held, l)
		addr := l.Addr().String()
		u, err := net.ListenPacket("udp", addr)
		if err != nil {
			continue // its UDP side is taken: keep the TCP side held so it is not picked again
		}
		held = append(held, u)
		ports = append(ports, addr)
	}
	return ports, nil
}
