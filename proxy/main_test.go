package proxy_test

import (
	"testing"

	"github.com/ternmq/tern/internal/testcluster"
)

// TestMain runs the package's tests with freed read buffers overwritten
// and the entry caches on: each test whose sink checks what it is
// delivered also checks that no buffer is freed under a holder.
func TestMain(m *testing.M) { testcluster.Main(m, false) }
