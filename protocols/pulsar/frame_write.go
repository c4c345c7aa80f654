package pulsar

import (
	"encoding/binary"
	"fmt"
	"math"

	"google.golang.org/protobuf/proto"

	"github.com/ternmq/tern/protocols/pulsar/pb"
)

// Frames are written by appending to a caller-owned slice. A connection's
// writer keeps one buffer, truncates it to zero length, appends the frames of
// a batch of responses and writes them in one call; once the buffer has grown
// to its working size, encoding allocates nothing beyond what protobuf
// marshalling itself needs. Size fields are reserved up front and filled in
// once the parts behind them are in place, so nothing is encoded twice or
// moved.
//
// All functions leave dst unchanged in length when they fail.

// AppendCommand appends a frame holding cmd alone (every command but SEND and
// MESSAGE).
func AppendCommand(dst []byte, cmd *pb.BaseCommand) ([]byte, error) {
	if HasPayload(cmd.GetType()) {
		return dst, fmt.Errorf("%w: %s needs a payload section; use AppendPayloadCommand", ErrEncode, cmd.GetType())
	}
	start := len(dst)
	dst, err := appendHead(dst, cmd)
	if err != nil {
		return dst[:start], err
	}
	return finishFrame(dst, start)
}

// appendHead appends the frame size placeholder, the command size and the
// command.
func appendHead(dst []byte, cmd *pb.BaseCommand) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	dst, err := marshalChecked.MarshalAppend(dst, cmd)
	if err != nil {
		return dst, fmt.Errorf("%w: %s command: %w", ErrEncode, cmd.GetType(), err)
	}
	binary.BigEndian.PutUint32(dst[start+4:], uint32(len(dst)-start-8))
	return dst, nil
}

// finishFrame fills in the size prefix of the frame starting at start.
func finishFrame(dst []byte, start int) ([]byte, error) {
	size := len(dst) - start - 4
	if uint64(size) > math.MaxUint32 {
		return dst[:start], fmt.Errorf("%w: frame of %d bytes exceeds the 4 GiB the size prefix can express",
			ErrEncode, size)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(size))
	return dst, nil
}

// appendPayloadHead appends the head of a SEND or MESSAGE frame: sizes,
// command and the optional broker entry metadata.
func appendPayloadHead(dst []byte, cmd *pb.BaseCommand, bem *pb.BrokerEntryMetadata) ([]byte, error) {
	if !HasPayload(cmd.GetType()) {
		return dst, fmt.Errorf("%w: %s carries no payload; use AppendCommand", ErrEncode, cmd.GetType())
	}
	dst, err := appendHead(dst, cmd)
	if err != nil || bem == nil {
		return dst, err
	}
	dst = append(dst, magicBrokerEntry>>8, magicBrokerEntry&0xff, 0, 0, 0, 0)
	at := len(dst)
	dst, err = marshalChecked.MarshalAppend(dst, bem)
	if err != nil {
		return dst, fmt.Errorf("%w: broker entry metadata: %w", ErrEncode, err)
	}
	binary.BigEndian.PutUint32(dst[at-4:], uint32(len(dst)-at))
	return dst, nil
}

// PayloadMark remembers where a payload frame begun by StartPayloadCommand
// needs its sizes and checksum filled in.
type PayloadMark struct {
	start      int // offset of the frame size prefix
	checksumAt int // offset of the checksum; it covers what follows it
}

// StartPayloadCommand appends a SEND or MESSAGE frame up to and including
// its message metadata; bem, if not nil, becomes the broker entry metadata
// prefix. The caller then appends the payload to the returned slice (a batch
// item by item with AppendBatchMessage, or compressed with Codec.Compress)
// and seals the frame with FinishPayloadCommand. This way the payload is
// written once, straight into the frame.
func StartPayloadCommand(dst []byte, cmd *pb.BaseCommand, bem *pb.BrokerEntryMetadata,
	md *pb.MessageMetadata) ([]byte, PayloadMark, error) {
	start := len(dst)
	dst, err := appendPayloadHead(dst, cmd, bem)
	if err != nil {
		return dst[:start], PayloadMark{}, err
	}
	mark := PayloadMark{start: start, checksumAt: len(dst) + 2}
	dst = append(dst, magicChecksum>>8, magicChecksum&0xff, 0, 0, 0, 0, 0, 0, 0, 0)
	at := len(dst)
	dst, err = marshalChecked.MarshalAppend(dst, md)
	if err != nil {
		return dst[:start], PayloadMark{}, fmt.Errorf("%w: message metadata: %w", ErrEncode, err)
	}
	binary.BigEndian.PutUint32(dst[at-4:], uint32(len(dst)-at))
	return dst, mark, nil
}

// FinishPayloadCommand seals a frame begun by StartPayloadCommand: it fills
// in the frame size and computes the checksum over the metadata and
// everything appended since.
func FinishPayloadCommand(dst []byte, m PayloadMark) ([]byte, error) {
	if m.checksumAt == 0 || m.checksumAt+8 > len(dst) {
		return dst, fmt.Errorf("%w: payload mark does not belong to this buffer", ErrEncode)
	}
	dst, err := finishFrame(dst, m.start)
	if err != nil {
		return dst, err
	}
	binary.BigEndian.PutUint32(dst[m.checksumAt:], Checksum(dst[m.checksumAt+4:]))
	return dst, nil
}

// AppendPayloadCommand appends a complete SEND or MESSAGE frame: cmd, the
// optional broker entry metadata bem, md and payload (already compressed, if
// md says so).
func AppendPayloadCommand(dst []byte, cmd *pb.BaseCommand, bem *pb.BrokerEntryMetadata,
	md *pb.MessageMetadata, payload []byte) ([]byte, error) {
	dst, mark, err := StartPayloadCommand(dst, cmd, bem, md)
	if err != nil {
		return dst, err
	}
	return FinishPayloadCommand(append(dst, payload...), mark)
}

// AppendChecksummedPayloadCommand appends a SEND or MESSAGE frame around a
// payload section that is already complete from its 0x0e01 magic number on,
// such as Payload.Checksummed of a received SEND. The section is copied
// unchanged: neither metadata nor checksum is recomputed, so the caller
// vouches for it (ParsePayload verified it on the way in).
func AppendChecksummedPayloadCommand(dst []byte, cmd *pb.BaseCommand, bem *pb.BrokerEntryMetadata,
	checksummed []byte) ([]byte, error) {
	if len(checksummed) < 10 || binary.BigEndian.Uint16(checksummed) != magicChecksum {
		return dst, fmt.Errorf("%w: a checksummed payload section starts with 0x0e01 and has at least 10 bytes",
			ErrEncode)
	}
	start := len(dst)
	dst, err := appendPayloadHead(dst, cmd, bem)
	if err != nil {
		return dst[:start], err
	}
	return finishFrame(append(dst, checksummed...), start)
}

// AppendRawPayloadCommand appends a SEND or MESSAGE frame around
// [metadataSize u32][MessageMetadata][payload] that the caller already has
// encoded, adding the checksum header. Nothing is re-marshalled.
func AppendRawPayloadCommand(dst []byte, cmd *pb.BaseCommand, bem *pb.BrokerEntryMetadata,
	metadataAndPayload []byte) ([]byte, error) {
	if len(metadataAndPayload) < 4 ||
		uint64(binary.BigEndian.Uint32(metadataAndPayload)) > uint64(len(metadataAndPayload)-4) {
		return dst, fmt.Errorf("%w: metadata and payload must start with a metadata size that fits them", ErrEncode)
	}
	start := len(dst)
	dst, err := appendPayloadHead(dst, cmd, bem)
	if err != nil {
		return dst[:start], err
	}
	dst = binary.BigEndian.AppendUint16(dst, magicChecksum)
	dst = binary.BigEndian.AppendUint32(dst, Checksum(metadataAndPayload))
	return finishFrame(append(dst, metadataAndPayload...), start)
}

// NewBrokerEntryMetadata is a convenience for building the bem argument:
// broker timestamp in milliseconds and the index (offset) of the entry's last
// message.
func NewBrokerEntryMetadata(brokerTimestamp, index uint64) *pb.BrokerEntryMetadata {
	return &pb.BrokerEntryMetadata{BrokerTimestamp: proto.Uint64(brokerTimestamp), Index: proto.Uint64(index)}
}
