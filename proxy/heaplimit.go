package proxy

import (
	"log/slog"
	"os"
	"runtime/debug"
)

// SetProcessHeapLimit gives Go's runtime the soft memory limit of
// limits.heap_limit, unless GOMEMLIMIT chose one; 0 leaves Go's default.
// The limit is the process's, so the program that owns the process calls
// this (tern serve, a benchmark peer), not Node: tests run several nodes
// in one process.
func SetProcessHeapLimit(log *slog.Logger, limit int64) {
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		log.Info("Go memory limit from the environment", "GOMEMLIMIT", v)
		return
	}
	if limit > 0 {
		debug.SetMemoryLimit(limit)
	}
}
