package proxy_test

import (
	"os"
	"testing"

	"github.com/ternmq/tern/proxy"
)

// TestMain runs the package's tests with every read buffer a subscription
// frees overwritten at once (readbuf.go): each test whose sink checks what
// it is delivered then also checks that no buffer is freed under a holder.
func TestMain(m *testing.M) {
	proxy.PoisonFreedBuffers(false)
	os.Exit(m.Run())
}
