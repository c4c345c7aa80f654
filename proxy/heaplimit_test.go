package proxy

import (
	"log/slog"
	"math"
	"runtime/debug"
	"testing"
)

func TestSetProcessHeapLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	log := slog.New(slog.DiscardHandler)

	t.Setenv("GOMEMLIMIT", "")
	SetProcessHeapLimit(log, 80<<20)
	if got := debug.SetMemoryLimit(-1); got != 80<<20 {
		t.Fatalf("memory limit %d after SetProcessHeapLimit(80MiB)", got)
	}

	// The environment's choice stands.
	debug.SetMemoryLimit(math.MaxInt64)
	t.Setenv("GOMEMLIMIT", "1GiB")
	SetProcessHeapLimit(log, 80<<20)
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("memory limit %d: SetProcessHeapLimit overrode GOMEMLIMIT", got)
	}

	// 0 sets none.
	t.Setenv("GOMEMLIMIT", "")
	SetProcessHeapLimit(log, 0)
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("memory limit %d after SetProcessHeapLimit(0)", got)
	}
}
