package e2e

import (
	"testing"

	"github.com/ternmq/tern/internal/testcluster"
)

// TestMain runs the end-to-end tests with freed read buffers overwritten
// and no entries cached: a front end that released a delivery before it
// had sent it would send the overwritten bytes.
func TestMain(m *testing.M) { testcluster.Main(m, true) }
