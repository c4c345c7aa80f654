package regions

import (
	"errors"
	"log"
	"testing"

	"github.com/hashicorp/memberlist"
)

// A transport on port 0 whose UDP port turned out taken is made again; one
// on a port given is not, and the error says which.
func TestTransportOnPortZeroPicksAgain(t *testing.T) {
	real := netTransport
	defer func() { netTransport = real }()
	calls := 0
	netTransport = func(cfg *memberlist.NetTransportConfig) (*memberlist.NetTransport, error) {
		calls++
		if calls < 3 {
			return nil, errors.New(`failed to start UDP listener on "127.0.0.1" port 45349: bind: address already in use`)
		}
		return real(cfg)
	}
	tr, err := newTransport("127.0.0.1", 0, log.New(log.Writer(), "", 0))
	if err != nil {
		t.Fatalf("port 0, taken twice: %v", err)
	}
	_ = tr.Shutdown()
	if calls != 3 {
		t.Fatalf("%d tries, want 3", calls)
	}

	calls = 0
	if _, err := newTransport("127.0.0.1", 45349, log.New(log.Writer(), "", 0)); err == nil || calls != 1 {
		t.Fatalf("a port given and taken: %v after %d tries, want the error after 1", err, calls)
	}
}
