package replicator

// The link protocol, version 1.
//
// Every frame is a 5-byte header, type (1 byte) and payload length (4 bytes, big-endian), then
// the payload. The reader checks the length against its limit before allocating anything:
// ENTRIES frames may be as large as the receiver's MaxFrameBytes (announced in HELLO), every other
// frame at most maxControlPayload. Integers in payloads are unsigned LEB128 varints
// (encoding/binary Uvarint); strings and byte strings are a varint length then the bytes. A
// payload must be consumed exactly: trailing bytes are a protocol violation.
//
//	HELLO    min version, max version, node, region, max frame bytes, incarnation, features
//	OPEN     topic, partition, partition count, destination region, start offset, extra
//	ENTRIES  n >= 1, then n times: offset, count >= 1, value
//	ACK      next (every entry below this offset is durable at the receiver)
//	CREDIT   bytes, entries (added to the sender's allowance)
//	ERROR    code, message
//	PING     nonce
//	PONG     nonce
//
// Streams: the dialing node opens the control stream first and sends HELLO; the accepting node
// answers with HELLO (the chosen version in both version fields) or ERROR, and then both sides
// exchange PING/PONG/ERROR on it. Each replicated partition gets its own stream, opened by the
// sending node with OPEN; the sender then sends ENTRIES (and ERROR); the receiver sends ACK,
// CREDIT (and ERROR). A malformed frame on a partition stream closes that stream only.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Link protocol versions this build speaks.
const (
	ProtocolVersionMin = 1
	ProtocolVersionMax = 1
)

type frameType uint8

const (
	frameHello   frameType = 1
	frameOpen    frameType = 2
	frameEntries frameType = 3
	frameAck     frameType = 4
	frameCredit  frameType = 5
	frameError   frameType = 6
	framePing    frameType = 7
	framePong    frameType = 8
)

func (t frameType) String() string {
	switch t {
	case frameHello:
		return "HELLO"
	case frameOpen:
		return "OPEN"
	case frameEntries:
		return "ENTRIES"
	case frameAck:
		return "ACK"
	case frameCredit:
		return "CREDIT"
	case frameError:
		return "ERROR"
	case framePing:
		return "PING"
	case framePong:
		return "PONG"
	}
	return fmt.Sprintf("type %d", uint8(t))
}

const (
	frameHeaderLen    = 5
	maxControlPayload = 64 << 10
	maxTopicLength    = 4096
	maxMessageLength  = 4096
	maxExtraLength    = 4096
	// entryOverhead bounds the varint framing of one entry (offset, count, length).
	entryOverhead = 3 * binary.MaxVarintLen64
	// entriesOverhead bounds the framing of an ENTRIES frame beyond its entries.
	entriesOverhead = frameHeaderLen + binary.MaxVarintLen64
)

// frame is one decoded link frame.
type frame interface{ frameType() frameType }

type helloFrame struct {
	MinVersion, MaxVersion uint64
	Node, Region           string
	MaxFrame               uint64
	Incarnation            uint64
	Features               uint64
}

type openFrame struct{ Req OpenRequest }

type entriesFrame struct {
	Entries []Entry
	// Bytes is the sum of the value lengths: the credit the frame consumes.
	Bytes int64
}

type ackFrame struct{ Next int64 }

type creditFrame struct{ Credit Credit }

type errorFrame struct {
	Code    ErrorCode
	Message string
}

type pingFrame struct{ Nonce uint64 }

type pongFrame struct{ Nonce uint64 }

func (helloFrame) frameType() frameType   { return frameHello }
func (openFrame) frameType() frameType    { return frameOpen }
func (entriesFrame) frameType() frameType { return frameEntries }
func (ackFrame) frameType() frameType     { return frameAck }
func (creditFrame) frameType() frameType  { return frameCredit }
func (errorFrame) frameType() frameType   { return frameError }
func (pingFrame) frameType() frameType    { return framePing }
func (pongFrame) frameType() frameType    { return framePong }

// appendFrame encodes f after dst.
func appendFrame(dst []byte, f frame) []byte {
	start := len(dst)
	dst = append(dst, byte(f.frameType()), 0, 0, 0, 0)
	switch f := f.(type) {
	case helloFrame:
		dst = binary.AppendUvarint(dst, f.MinVersion)
		dst = binary.AppendUvarint(dst, f.MaxVersion)
		dst = appendString(dst, f.Node)
		dst = appendString(dst, f.Region)
		dst = binary.AppendUvarint(dst, f.MaxFrame)
		dst = binary.AppendUvarint(dst, f.Incarnation)
		dst = binary.AppendUvarint(dst, f.Features)
	case openFrame:
		dst = appendString(dst, f.Req.Topic)
		dst = binary.AppendUvarint(dst, uint64(f.Req.Partition))
		dst = binary.AppendUvarint(dst, uint64(f.Req.PartitionCount))
		dst = appendString(dst, f.Req.DestRegion)
		dst = binary.AppendUvarint(dst, uint64(f.Req.StartOffset))
		dst = appendBytes(dst, f.Req.Extra)
	case entriesFrame:
		return appendEntries(dst[:start], f.Entries)
	case ackFrame:
		dst = binary.AppendUvarint(dst, uint64(f.Next))
	case creditFrame:
		dst = binary.AppendUvarint(dst, uint64(f.Credit.Bytes))
		dst = binary.AppendUvarint(dst, uint64(f.Credit.Entries))
	case errorFrame:
		dst = binary.AppendUvarint(dst, uint64(f.Code))
		dst = appendString(dst, f.Message)
	case pingFrame:
		dst = binary.AppendUvarint(dst, f.Nonce)
	case pongFrame:
		dst = binary.AppendUvarint(dst, f.Nonce)
	default:
		panic(fmt.Sprintf("replicator: appendFrame of unknown frame %T", f))
	}
	binary.BigEndian.PutUint32(dst[start+1:], uint32(len(dst)-start-frameHeaderLen))
	return dst
}

// appendEntries encodes an ENTRIES frame without building an entriesFrame, for the send path.
func appendEntries(dst []byte, entries []Entry) []byte {
	start := len(dst)
	dst = append(dst, byte(frameEntries), 0, 0, 0, 0)
	dst = binary.AppendUvarint(dst, uint64(len(entries)))
	for _, e := range entries {
		dst = binary.AppendUvarint(dst, uint64(e.Offset))
		dst = binary.AppendUvarint(dst, uint64(e.Count))
		dst = appendBytes(dst, e.Value)
	}
	binary.BigEndian.PutUint32(dst[start+1:], uint32(len(dst)-start-frameHeaderLen))
	return dst
}

// entryWireSize is an upper bound of the bytes one entry adds to an ENTRIES frame.
func entryWireSize(e Entry) int { return len(e.Value) + entryOverhead }

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendBytes(dst []byte, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// frameReader reads frames from one stream. It is used by one goroutine.
type frameReader struct {
	r   *bufio.Reader
	hdr [frameHeaderLen]byte
	// maxEntries is the payload limit for ENTRIES frames (this node's MaxFrameBytes).
	maxEntries int
}

func newFrameReader(r io.Reader, maxFrame int) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, 32<<10), maxEntries: maxFrame}
}

// next reads one frame. It returns the frame and its size on the wire. io.EOF means the peer
// ended the stream cleanly between frames; an error wrapping ErrMalformedFrame or
// ErrFrameTooLarge means the bytes were bad; anything else came from the stream.
func (fr *frameReader) next() (frame, int, error) {
	n, err := io.ReadFull(fr.r, fr.hdr[:])
	if err != nil {
		if err == io.EOF {
			return nil, 0, io.EOF
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, n, fmt.Errorf("%w: stream ended inside a frame header (%d of %d bytes)", ErrMalformedFrame, n, frameHeaderLen)
		}
		return nil, n, err
	}
	typ := frameType(fr.hdr[0])
	size := binary.BigEndian.Uint32(fr.hdr[1:])
	limit := maxControlPayload
	if typ == frameEntries {
		limit = fr.maxEntries
	}
	if typ < frameHello || typ > framePong {
		return nil, frameHeaderLen, fmt.Errorf("%w: unknown frame type %d", ErrMalformedFrame, uint8(typ))
	}
	if uint64(size) > uint64(limit) {
		return nil, frameHeaderLen, fmt.Errorf("%w: %s frame of %d bytes, limit %d", ErrFrameTooLarge, typ, size, limit)
	}
	payload := make([]byte, size)
	if n, err := io.ReadFull(fr.r, payload); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || err == io.EOF {
			return nil, frameHeaderLen + n, fmt.Errorf("%w: stream ended inside a %s frame (%d of %d bytes)", ErrMalformedFrame, typ, n, size)
		}
		return nil, frameHeaderLen + n, err
	}
	f, err := decodePayload(typ, payload)
	return f, frameHeaderLen + int(size), err
}

// decodePayload decodes the payload of a frame of type typ. ENTRIES values alias payload.
func decodePayload(typ frameType, payload []byte) (frame, error) {
	d := decoder{b: payload, typ: typ}
	var f frame
	switch typ {
	case frameHello:
		h := helloFrame{
			MinVersion: d.uvarint("min version"),
			MaxVersion: d.uvarint("max version"),
			Node:       d.string("node", maxNameLength),
			Region:     d.string("region", maxNameLength),
			MaxFrame:   d.uvarint("max frame"),
		}
		h.Incarnation = d.uvarint("incarnation")
		h.Features = d.uvarint("features")
		if d.err == nil && (h.MinVersion == 0 || h.MinVersion > h.MaxVersion) {
			d.fail("version range %d..%d is empty", h.MinVersion, h.MaxVersion)
		}
		if d.err == nil && (h.Node == "" || h.Region == "") {
			d.fail("empty node name or region")
		}
		if d.err == nil && (h.MaxFrame < minFrameBytes || h.MaxFrame > maxFrameBytes) {
			d.fail("max frame %d outside %d..%d", h.MaxFrame, minFrameBytes, maxFrameBytes)
		}
		f = h
	case frameOpen:
		var r OpenRequest
		r.Topic = d.string("topic", maxTopicLength)
		r.Partition = d.int32("partition")
		r.PartitionCount = d.int32("partition count")
		r.DestRegion = d.string("destination region", maxNameLength)
		r.StartOffset = d.int64("start offset")
		r.Extra = d.bytes("extra", maxExtraLength, true)
		if d.err == nil {
			if err := r.Validate(); err != nil {
				d.fail("%v", err)
			}
		}
		f = openFrame{Req: r}
	case frameEntries:
		f = d.entries()
	case frameAck:
		f = ackFrame{Next: d.int64("next")}
	case frameCredit:
		f = creditFrame{Credit: Credit{Bytes: d.int64("bytes"), Entries: d.int64("entries")}}
	case frameError:
		code := d.uvarint("code")
		if d.err == nil && code > math.MaxUint32 {
			d.fail("error code %d does not fit 32 bits", code)
		}
		f = errorFrame{Code: ErrorCode(code), Message: d.string("message", maxMessageLength)}
	case framePing:
		f = pingFrame{Nonce: d.uvarint("nonce")}
	case framePong:
		f = pongFrame{Nonce: d.uvarint("nonce")}
	default:
		return nil, fmt.Errorf("%w: unknown frame type %d", ErrMalformedFrame, uint8(typ))
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return nil, d.err
	}
	return f, nil
}

// decoder consumes a payload; the first error sticks and later reads return zero values.
type decoder struct {
	b   []byte
	typ frameType
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s: %s", ErrMalformedFrame, d.typ, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) uvarint(field string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad varint for %s", field)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int64(field string) int64 {
	v := d.uvarint(field)
	if v > math.MaxInt64 {
		d.fail("%s %d exceeds the int64 range", field, v)
		return 0
	}
	return int64(v)
}

func (d *decoder) int32(field string) int32 {
	v := d.uvarint(field)
	if v > math.MaxInt32 {
		d.fail("%s %d exceeds the int32 range", field, v)
		return 0
	}
	return int32(v)
}

func (d *decoder) bytes(field string, limit int, copyOut bool) []byte {
	n := d.uvarint(field + " length")
	if d.err != nil {
		return nil
	}
	if n > uint64(limit) {
		d.fail("%s of %d bytes exceeds %d", field, n, limit)
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("%s of %d bytes but %d left", field, n, len(d.b))
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	if copyOut {
		if n == 0 {
			return nil
		}
		return append([]byte(nil), v...)
	}
	return v
}

func (d *decoder) string(field string, limit int) string {
	return string(d.bytes(field, limit, false))
}

func (d *decoder) entries() frame {
	n := d.uvarint("entry count")
	if d.err != nil {
		return nil
	}
	// Each entry takes at least 3 bytes, so a count beyond that is a lie: refuse it before
	// allocating the slice.
	if n == 0 || n > uint64(len(d.b))/3 {
		d.fail("entry count %d with %d bytes left", n, len(d.b))
		return nil
	}
	f := entriesFrame{Entries: make([]Entry, 0, n)}
	var next int64
	for i := range n {
		off := d.int64("offset")
		cnt := d.int32("count")
		val := d.bytes("value", maxFrameBytes, false)
		if d.err != nil {
			return nil
		}
		if cnt < 1 {
			d.fail("entry %d at offset %d has count %d: it must cover at least one message", i, off, cnt)
			return nil
		}
		if off > math.MaxInt64-int64(cnt) {
			d.fail("entry %d: offset %d + count %d overflows", i, off, cnt)
			return nil
		}
		if i > 0 && off < next {
			d.fail("entry %d at offset %d overlaps the previous entry ending at %d", i, off, next)
			return nil
		}
		next = off + int64(cnt)
		f.Entries = append(f.Entries, Entry{Offset: off, Count: cnt, Value: val})
		f.Bytes += int64(len(val))
	}
	return f
}
