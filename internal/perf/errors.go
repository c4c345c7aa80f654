package perf

import "errors"

var (
	// ErrClosed is what a producer's done reports for a message abandoned
	// at Close.
	ErrClosed = errors.New("perf: closed")
	// ErrBacklogDrained means the consumers read the whole backlog before
	// the warm-up ended, so nothing was measured: raise --backlog. The
	// warm-up ends after a fifth of the backlog, so this takes a backlog
	// read in one go.
	ErrBacklogDrained = errors.New("perf: the backlog was consumed during the warm-up; raise --backlog or shorten --warmup")
	// ErrNothingMeasured means no message completed in the measured
	// window: the system did not answer, or the window was too short.
	ErrNothingMeasured = errors.New("perf: no message completed in the measured window")
)
