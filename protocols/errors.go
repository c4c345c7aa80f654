package protocols

import (
	"errors"
	"fmt"
)

// Sentinel errors a Broker returns. Protocol handlers map each to the error
// their protocol defines (a Kafka error code, a Pulsar ServerError, a
// WebSocket close code); wrapped errors carry the detail a user needs.
var (
	ErrTopicNotFound        = errors.New("protocols: topic not found")
	ErrTopicExists          = errors.New("protocols: topic already exists")
	ErrPartitionNotFound    = errors.New("protocols: partition not found")
	ErrInvalidTopicName     = errors.New("protocols: invalid topic name")
	ErrInvalidPartitions    = errors.New("protocols: invalid partition count")
	ErrInvalidConfig        = errors.New("protocols: invalid topic config")
	ErrMessageTooLarge      = errors.New("protocols: message too large")
	ErrCorruptBatch         = errors.New("protocols: corrupt record batch")
	ErrCorruptEntry         = errors.New("protocols: corrupt entry")
	ErrUnsupportedCodec     = errors.New("protocols: unsupported compression codec")
	ErrOutOfOrderSequence   = errors.New("protocols: out of order sequence number")
	ErrInvalidProducerEpoch = errors.New("protocols: invalid producer epoch")
	ErrUnknownProducer      = errors.New("protocols: unknown producer id")
	ErrNamespaceNotFound    = errors.New("protocols: namespace not found")
	ErrNotReady             = errors.New("protocols: node not ready")
	ErrClosed               = errors.New("protocols: broker closed")
	ErrStorage              = errors.New("protocols: storage error")
	// ErrBacklogQuotaExceeded is what a *BacklogQuotaError matches.
	ErrBacklogQuotaExceeded = errors.New("protocols: backlog quota exceeded")
)

// BacklogQuotaError refuses a write, or a new producer, while a topic's
// backlog is over a namespace backlog quota whose policy blocks producers.
// Hold is true for producer_request_hold, where Pulsar clients keep their
// messages and retry, false for producer_exception, where they fail them.
type BacklogQuotaError struct {
	Hold   bool
	Reason string
}

func (e *BacklogQuotaError) Error() string {
	return "protocols: backlog quota exceeded: " + e.Reason
}

// Is makes errors.Is(err, ErrBacklogQuotaExceeded) true.
func (e *BacklogQuotaError) Is(target error) bool { return target == ErrBacklogQuotaExceeded }

// OffsetOutOfRangeError reports a read or seek outside the retained log.
// Start is the log start offset and End the high watermark at the time of
// the request; valid read positions are [Start, End].
type OffsetOutOfRangeError struct {
	Requested, Start, End int64
}

func (e *OffsetOutOfRangeError) Error() string {
	return fmt.Sprintf("protocols: offset %d out of range: the log holds offsets %d to %d (read from %d to %d, or from the end)",
		e.Requested, e.Start, e.End, e.Start, e.End)
}
