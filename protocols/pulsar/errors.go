package pulsar

import (
	"errors"
	"fmt"

	"github.com/ternmq/tern/protocols/pulsar/pb"
)

// The codec's errors fall into classes that call for different reactions.
// Test the class with errors.Is; the typed errors below carry the details.
var (
	// ErrFrame means the byte stream itself is broken (a size prefix out of
	// range, a command size that does not fit its frame, a cut-off frame).
	// The connection cannot be resynchronised and must be closed.
	ErrFrame = errors.New("pulsar: malformed frame")

	// ErrCommand means a frame arrived intact but its BaseCommand is not a
	// valid command: undecodable, a required field missing, or the body for
	// its type absent. The stream is still in sync.
	ErrCommand = errors.New("pulsar: malformed command")

	// ErrUnsupportedCommand means a valid command of a type tern does not
	// serve. The stream is still in sync. See *UnsupportedCommandError.
	ErrUnsupportedCommand = errors.New("pulsar: unsupported command")

	// ErrPayload means the payload section of a SEND or MESSAGE frame is
	// malformed (magic number, sizes, metadata) while the frame around it is
	// intact.
	ErrPayload = errors.New("pulsar: malformed payload section")

	// ErrChecksum means the CRC-32C of a payload section does not match. A
	// broker answers a SEND with SEND_ERROR(ChecksumError) and keeps the
	// connection. See *ChecksumError.
	ErrChecksum = errors.New("pulsar: payload checksum mismatch")

	// ErrBatch means a batch payload does not match its metadata.
	ErrBatch = errors.New("pulsar: malformed batch payload")

	// ErrCompression means a payload cannot be decompressed: an unknown
	// codec, corrupt data, or output of a different size than announced.
	ErrCompression = errors.New("pulsar: decompression failed")

	// ErrTooLarge means an announced size exceeds a configured limit. It is
	// returned before anything of that size is allocated.
	ErrTooLarge = errors.New("pulsar: size over limit")

	// ErrMessageID means a message id in its base64 form cannot be decoded.
	ErrMessageID = errors.New("pulsar: malformed message id")

	// ErrEncode means a command or metadata cannot be encoded, usually
	// because a required field is unset. It points at a bug in the caller.
	ErrEncode = errors.New("pulsar: cannot encode")
)

// FrameSizeError reports a frame size prefix outside the accepted range. It
// matches ErrFrame, and ErrTooLarge when the frame is too big.
type FrameSizeError struct {
	// Size is the value of the size prefix, in bytes after the prefix.
	Size uint32
	// Min and Max are the accepted bounds, inclusive.
	Min, Max uint32
}

// Error says which bound the size broke and what to change.
func (e *FrameSizeError) Error() string {
	if e.Size > e.Max {
		return fmt.Sprintf("pulsar: frame of %d bytes exceeds the limit of %d bytes; "+
			"raise the maximum frame size or send smaller messages", e.Size, e.Max)
	}
	return fmt.Sprintf("pulsar: frame of %d bytes is shorter than the smallest possible frame (%d bytes)",
		e.Size, e.Min)
}

// Is lets errors.Is match the error classes.
func (e *FrameSizeError) Is(target error) bool {
	return target == ErrFrame || (target == ErrTooLarge && e.Size > e.Max)
}

// ChecksumError reports a payload section whose CRC-32C does not match. It
// matches ErrChecksum.
type ChecksumError struct {
	// Want is the checksum carried in the frame, Got the one computed.
	Want, Got uint32
}

// Error names both checksums, which tells corruption from a wrong algorithm.
func (e *ChecksumError) Error() string {
	return fmt.Sprintf("pulsar: payload checksum mismatch: frame carries 0x%08x, content hashes to 0x%08x",
		e.Want, e.Got)
}

// Is lets errors.Is match ErrChecksum.
func (e *ChecksumError) Is(target error) bool { return target == ErrChecksum }

// UnsupportedCommandError reports a well-formed command of a type this
// package has no body for. It matches ErrUnsupportedCommand.
type UnsupportedCommandError struct {
	// Type is the command's type number (it may be outside BaseCommand_Type).
	Type int32
}

// Error names the command type so that the log shows what the client wanted.
func (e *UnsupportedCommandError) Error() string {
	if _, known := pb.BaseCommand_Type_name[e.Type]; !known {
		return fmt.Sprintf("pulsar: command type %d is unknown to this broker", e.Type)
	}
	return fmt.Sprintf("pulsar: command %s (type %d) is not supported by this broker",
		pb.BaseCommand_Type(e.Type), e.Type)
}

// Is lets errors.Is match ErrUnsupportedCommand.
func (e *UnsupportedCommandError) Is(target error) bool { return target == ErrUnsupportedCommand }
