package freeport

import (
	"net"
	"testing"
)

// TestLoopbackPortsAreDistinctAndBindable picks many ports at once and
// binds every one of them for TCP and UDP, as a node's listeners do.
func TestLoopbackPortsAreDistinctAndBindable(t *testing.T) {
	for round := 0; round < 20; round++ {
		ports, err := Loopback(15)
		if err != nil {
			t.Fatal(err)
		}
		if len(ports) != 15 {
			t.Fatalf("%d ports, want 15", len(ports))
		}
		seen := map[string]bool{}
		var closers []func() error
		for _, p := range ports {
			if seen[p] {
				t.Fatalf("round %d: port %s handed out twice in %v", round, p, ports)
			}
			seen[p] = true
			l, err := net.Listen("tcp", p)
			if err != nil {
				t.Fatalf("bind tcp %s: %v", p, err)
			}
			u, err := net.ListenPacket("udp", p)
			if err != nil {
				t.Fatalf("bind udp %s: %v", p, err)
			}
			closers = append(closers, l.Close, u.Close)
		}
		for _, c := range closers {
			_ = c()
		}
	}
}
