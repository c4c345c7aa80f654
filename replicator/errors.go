package replicator

import (
	"errors"
	"fmt"
)

// Sentinel errors. Callers test them with errors.Is; each names the package so a log line says
// where it came from.
var (
	// ErrClosed is returned by every call on a Transport after Close.
	ErrClosed = errors.New("replicator: transport closed")
	// ErrUnknownPeer is returned when a stream is asked for a node that AddPeer never named and
	// that never connected to us.
	ErrUnknownPeer = errors.New("replicator: unknown peer")
	// ErrMalformedFrame marks a link frame that does not decode; the stream carrying it is closed.
	ErrMalformedFrame = errors.New("replicator: malformed link frame")
	// ErrFrameTooLarge marks a frame whose declared length exceeds the limit; it is refused before
	// any buffer for it is allocated.
	ErrFrameTooLarge = errors.New("replicator: link frame too large")
	// ErrEntryTooLarge is returned by Send for an entry that cannot fit in one frame of the
	// receiver's announced maximum size, so it could never be sent.
	ErrEntryTooLarge = errors.New("replicator: entry larger than the peer's maximum frame")
	// ErrEntryOrder is returned by Send (and reported by a receiver) when entries are not in
	// strictly increasing, non-overlapping offset order on a stream.
	ErrEntryOrder = errors.New("replicator: entries out of order")
	// ErrStreamClosed is returned by stream calls after the stream ended, locally or by the peer.
	ErrStreamClosed = errors.New("replicator: stream closed")
	// ErrCreditExceeded is reported when a sender sends more than the receiver credited.
	ErrCreditExceeded = errors.New("replicator: sender exceeded its credit")
	// ErrHeartbeatTimeout is the link error after the peer stopped answering heartbeats.
	ErrHeartbeatTimeout = errors.New("replicator: peer stopped answering heartbeats")
	// ErrPeerMismatch is the link error when the node answering at a peer's address is not the
	// node we meant to reach (stale membership data or a misconfigured address).
	ErrPeerMismatch = errors.New("replicator: peer at address is a different node")
	// ErrInvalidOpen marks an OpenRequest that fails validation.
	ErrInvalidOpen = errors.New("replicator: invalid open request")

	// ErrInvalidPolicy marks a policy write or record that fails validation; the wrapped errors
	// name every field to change.
	ErrInvalidPolicy = errors.New("replicator: invalid replication policy")
	// ErrNotStarted is returned by engine calls that need the engine running (policy writes)
	// before Start or after Close.
	ErrNotStarted = errors.New("replicator: replication engine not running")
	// ErrTransportOff is the state of streams on a node that runs the engine without a transport
	// (no mesh TLS configured): policies work, nothing is sent.
	ErrTransportOff = errors.New("replicator: replication transport is off: set mesh.secret (dev mode) or mesh.tls")
)

// ErrorCode is the code carried by an ERROR frame, and the QUIC application error code used
// when a stream or connection is closed for that reason. Codes are part of the link protocol:
// never renumber them.
type ErrorCode uint32

// ERROR frame codes. The replication logic may define its own codes from CodeUserBase up.
const (
	// CodeNone closes a stream or connection normally.
	CodeNone ErrorCode = 0
	// CodeProtocolViolation: the peer sent a frame that does not decode or does not belong where
	// it came; the stream (or, on the control stream, the connection) is closed.
	CodeProtocolViolation ErrorCode = 1
	// CodeIncompatibleVersion: the HELLO version ranges do not overlap.
	CodeIncompatibleVersion ErrorCode = 2
	// CodePartitionCountMismatch: the receiver's topic has another partition count; replication
	// of the topic stops until an operator makes the counts equal.
	CodePartitionCountMismatch ErrorCode = 3
	// CodeUnknownTopic: the receiver does not hold the topic in its region.
	CodeUnknownTopic ErrorCode = 4
	// CodeNoReceiver: the node runs no Handler.
	CodeNoReceiver ErrorCode = 5
	// CodeDuplicateConnection: the connection lost the both-sides-dial race.
	CodeDuplicateConnection ErrorCode = 6
	// CodeCreditExceeded: the sender sent more than it was credited.
	CodeCreditExceeded ErrorCode = 7
	// CodeShuttingDown: the node is closing, or dropped the peer.
	CodeShuttingDown ErrorCode = 8
	// CodeRejected: a Handler refused the stream without a more specific code.
	CodeRejected ErrorCode = 9
	// CodeNameConflict: the peer uses this node's name.
	CodeNameConflict ErrorCode = 10
	// CodeWrongRegion: the OPEN names a region this node does not serve.
	CodeWrongRegion ErrorCode = 11
	// CodeInternal: a local failure unrelated to the peer's behaviour.
	CodeInternal ErrorCode = 12
	// CodeHeartbeatTimeout: the peer stopped answering PINGs.
	CodeHeartbeatTimeout ErrorCode = 13
	// CodeUserBase is the first code free for the replication logic.
	CodeUserBase ErrorCode = 1000
)

var codeNames = map[ErrorCode]string{
	CodeNone:                   "none",
	CodeProtocolViolation:      "protocol violation",
	CodeIncompatibleVersion:    "incompatible version",
	CodePartitionCountMismatch: "partition count mismatch",
	CodeUnknownTopic:           "unknown topic",
	CodeNoReceiver:             "no receiver",
	CodeDuplicateConnection:    "duplicate connection",
	CodeCreditExceeded:         "credit exceeded",
	CodeShuttingDown:           "shutting down",
	CodeRejected:               "rejected",
	CodeNameConflict:           "node name conflict",
	CodeWrongRegion:            "wrong region",
	CodeInternal:               "internal error",
	CodeHeartbeatTimeout:       "heartbeat timeout",
}

// String names the code for logs and error messages.
func (c ErrorCode) String() string {
	if n, ok := codeNames[c]; ok {
		return n
	}
	if c >= CodeUserBase {
		return fmt.Sprintf("application code %d", uint32(c))
	}
	return fmt.Sprintf("code %d", uint32(c))
}

// LinkError is an ERROR frame as a Go error: a handler returns one to refuse a stream with a
// specific code, and a sender receives one (Remote set) when the peer refused or failed its
// stream. Callers that must act on the reason (a partition-count mismatch stops replication of
// that topic until an operator fixes it) check it with errors.As.
type LinkError struct {
	Code    ErrorCode
	Message string
	// Remote is true when the peer sent the error, false when this node raised it.
	Remote bool
}

// Error renders the code, the message and which side raised it.
func (e *LinkError) Error() string {
	side := "local"
	if e.Remote {
		side = "peer"
	}
	if e.Message == "" {
		return fmt.Sprintf("replicator: %s error: %s", side, e.Code)
	}
	return fmt.Sprintf("replicator: %s error: %s: %s", side, e.Code, e.Message)
}

// Is lets errors.Is match the sentinels that correspond to a code.
func (e *LinkError) Is(target error) bool {
	switch target {
	case ErrCreditExceeded:
		return e.Code == CodeCreditExceeded
	case ErrMalformedFrame:
		return e.Code == CodeProtocolViolation
	case ErrHeartbeatTimeout:
		return e.Code == CodeHeartbeatTimeout
	}
	return false
}
