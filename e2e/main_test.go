package e2e

import (
	"os"
	"testing"

	"github.com/ternmq/tern/proxy"
)

// TestMain runs the end-to-end tests with every read buffer a subscription
// frees overwritten at once, and no entries cached for redelivery: a front
// end that released a delivery before it had sent it would send the
// overwritten bytes, and the tests that check payloads would see them.
func TestMain(m *testing.M) {
	proxy.PoisonFreedBuffers(true)
	os.Exit(m.Run())
}
