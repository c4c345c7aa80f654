//go:build !linux

package perf

import (
	"os"
	"time"
)

// fdatasync makes f durable (elsewhere than Linux, with its metadata).
func fdatasync(f *os.File) error { return f.Sync() }

// startWriteOut does nothing where sync_file_range is missing.
func startWriteOut(*os.File, int64, int64) {}

// freeBytes is unknown here: the probe does not check the space first.
func freeBytes(string) (int64, bool) { return 0, false }

// allocateFile sets f's size; the blocks are allocated as it is written.
func allocateFile(f *os.File, n int64) error { return f.Truncate(n) }

// dropPages does nothing where fadvise is missing: every page stays.
func dropPages(*os.File, int64, int64) {}

// threadCPU is not known here: the busy threads' CPU is not reported.
func threadCPU() time.Duration { return 0 }
