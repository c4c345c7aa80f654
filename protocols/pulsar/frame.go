package pulsar

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/ternmq/tern/protocols/pulsar/pb"
)

const (
	// DefaultMaxMessageSize is the message size (metadata plus payload)
	// Pulsar brokers and clients assume when CONNECTED does not say
	// otherwise: 5 MiB.
	DefaultMaxMessageSize = 5 << 20

	// FramePadding is what a frame may add on top of the message size for the
	// command, the payload header and broker entry metadata. Clients close the
	// connection on a frame larger than max_message_size + FramePadding.
	FramePadding = 10 << 10

	// DefaultMaxFrameSize bounds a frame's size prefix by default.
	DefaultMaxFrameSize = DefaultMaxMessageSize + FramePadding

	// MinFrameSize is the smallest frame size prefix that can hold a
	// command: the command size and a BaseCommand of at least two bytes (the
	// tag and value of its type).
	MinFrameSize = 4 + 2

	// magicChecksum opens the checksummed payload section.
	magicChecksum = 0x0e01
	// magicBrokerEntry opens the optional broker entry metadata.
	magicBrokerEntry = 0x0e02

	// frameBufferRetain is the largest read buffer a FrameReader keeps
	// between frames. Larger frames get a buffer of their own, so that a
	// connection that once received a big frame does not pin that memory.
	frameBufferRetain = 1 << 20

	// readerBufferSize sizes the bufio.Reader a FrameReader wraps around a
	// plain io.Reader. Frames up to this size are returned without copying.
	readerBufferSize = 64 << 10
)

// Frame is one frame as read from the wire, split but not decoded. Its
// slices alias the reader's buffer and stay valid only until the next read.
type Frame struct {
	// Command is the encoded BaseCommand.
	Command []byte
	// Payload is everything after the command: the payload section of a
	// SEND or MESSAGE, nil for other commands.
	Payload []byte
}

// FrameReader reads frames from a connection. It is not safe for concurrent
// use: one reader goroutine owns it, as each connection has one.
type FrameReader struct {
	r   *bufio.Reader
	max uint32
	buf []byte
}

// NewFrameReader returns a reader of frames from r that rejects frames whose
// size prefix exceeds maxFrameSize bytes (DefaultMaxFrameSize for a client
// that keeps the default max_message_size). If r is a *bufio.Reader it is
// used as is; otherwise it is buffered.
func NewFrameReader(r io.Reader, maxFrameSize int) *FrameReader {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, readerBufferSize)
	}
	return &FrameReader{r: br, max: clampFrameSize(maxFrameSize)}
}

func clampFrameSize(n int) uint32 {
	switch {
	case n < MinFrameSize:
		return MinFrameSize
	case uint64(n) > 1<<31-1:
		return 1<<31 - 1
	}
	return uint32(n)
}

// SetMaxFrameSize changes the frame size limit, for example after the
// handshake settles the connection's max_message_size.
func (fr *FrameReader) SetMaxFrameSize(n int) { fr.max = clampFrameSize(n) }

// ReadFrame reads the next frame. It returns io.EOF when the stream ends
// cleanly between frames; a stream that ends inside a frame gives an error
// matching ErrFrame and io.ErrUnexpectedEOF. A size prefix out of range gives
// a *FrameSizeError before the frame body is read or memory reserved for it.
func (fr *FrameReader) ReadFrame() (Frame, error) {
	var hdr [4]byte
	if n, err := io.ReadFull(fr.r, hdr[:]); err != nil {
		if err == io.EOF && n == 0 {
			return Frame{}, io.EOF
		}
		return Frame{}, fmt.Errorf("%w: reading the frame size: %w", ErrFrame, err)
	}
	size := binary.BigEndian.Uint32(hdr[:])
	if size < MinFrameSize || size > fr.max {
		return Frame{}, &FrameSizeError{Size: size, Min: MinFrameSize, Max: fr.max}
	}
	b, err := fr.body(int(size))
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, fmt.Errorf("%w: reading a frame of %d bytes: %w", ErrFrame, size, err)
	}
	return SplitFrame(b)
}

// body returns the next n bytes of the stream, from the bufio.Reader's own
// buffer when they fit there (no copy) and from fr.buf otherwise.
func (fr *FrameReader) body(n int) ([]byte, error) {
	if n <= fr.r.Size() {
		b, err := fr.r.Peek(n)
		if err != nil {
			return nil, err
		}
		// Discard cannot fail for bytes Peek has returned.
		_, _ = fr.r.Discard(n)
		return b, nil
	}
	var b []byte
	switch {
	case n <= cap(fr.buf):
		b = fr.buf[:n]
	case n <= frameBufferRetain:
		fr.buf = make([]byte, n)
		b = fr.buf
	default:
		b = make([]byte, n)
	}
	if _, err := io.ReadFull(fr.r, b); err != nil {
		return nil, err
	}
	return b, nil
}

// SplitFrame splits a frame body (the bytes after the size prefix) into its
// command and payload.
func SplitFrame(b []byte) (Frame, error) {
	if len(b) < MinFrameSize {
		return Frame{}, fmt.Errorf("%w: frame of %d bytes is too short for a command", ErrFrame, len(b))
	}
	cmdSize := binary.BigEndian.Uint32(b)
	if cmdSize < 2 || uint64(cmdSize) > uint64(len(b)-4) {
		return Frame{}, fmt.Errorf("%w: command size %d does not fit a frame of %d bytes",
			ErrFrame, cmdSize, len(b))
	}
	f := Frame{Command: b[4 : 4+cmdSize]}
	if rest := b[4+cmdSize:]; len(rest) > 0 {
		f.Payload = rest
	}
	return f, nil
}

// ReadCommand reads the next frame and decodes its command into cmd. For
// SEND and MESSAGE it also parses and verifies the payload section; for other
// commands the returned Payload is empty. The Payload aliases the reader's
// buffer and stays valid only until the next read.
//
// On a *ChecksumError, cmd is fully decoded so that the broker can name the
// producer and sequence id in its SEND_ERROR. On any other error cmd must not
// be used.
func (fr *FrameReader) ReadCommand(cmd *pb.BaseCommand) (Payload, error) {
	f, err := fr.ReadFrame()
	if err != nil {
		return Payload{}, err
	}
	return DecodeFrame(f, cmd)
}

// DecodeFrame decodes a frame's command into cmd and, for SEND and MESSAGE,
// parses and verifies its payload section. See ReadCommand.
func DecodeFrame(f Frame, cmd *pb.BaseCommand) (Payload, error) {
	if err := DecodeCommand(f.Command, cmd); err != nil {
		return Payload{}, err
	}
	t := cmd.GetType()
	if !HasPayload(t) {
		if f.Payload != nil {
			return Payload{}, fmt.Errorf("%w: %s carries %d bytes after the command; only SEND and MESSAGE have a payload",
				ErrCommand, t, len(f.Payload))
		}
		return Payload{}, nil
	}
	if f.Payload == nil {
		return Payload{}, fmt.Errorf("%w: %s without a payload section", ErrPayload, t)
	}
	return ParsePayload(f.Payload)
}

// HasPayload reports whether commands of type t carry a payload section.
func HasPayload(t pb.BaseCommand_Type) bool {
	return t == pb.BaseCommand_SEND || t == pb.BaseCommand_MESSAGE
}
