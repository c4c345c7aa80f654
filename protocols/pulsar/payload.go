package pulsar

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"google.golang.org/protobuf/proto"

	"github.com/ternmq/tern/protocols/pulsar/pb"
)

// castagnoli is the CRC-32C table; hash/crc32 uses the CPU's CRC32
// instruction for it where there is one.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC-32C the protocol puts in front of
// [metadataSize][metadata][payload].
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Payload is the payload section of a SEND or MESSAGE frame, split into its
// parts. Its slices alias the frame.
type Payload struct {
	// BrokerEntryMetadata is the encoded BrokerEntryMetadata of the optional
	// 0x0e02 prefix, nil when absent.
	BrokerEntryMetadata []byte
	// Checksummed is the section from the 0x0e01 magic number to the end:
	// magic, checksum, metadata size, metadata and payload. It is what a
	// broker keeps of a SEND and can send back unchanged in a MESSAGE.
	Checksummed []byte
	// Checksum is the CRC-32C carried in the frame (and verified).
	Checksum uint32
	// Metadata is the encoded MessageMetadata.
	Metadata []byte
	// Data is the message payload after the metadata: one message, or a batch
	// payload, possibly compressed.
	Data []byte
}

// IsZero reports whether p is the empty Payload of a command without one.
func (p Payload) IsZero() bool { return p.Checksummed == nil }

// ParsePayload splits a payload section and verifies its checksum. A
// mismatch gives a *ChecksumError with the other fields of the returned
// Payload filled in; any other problem gives an error matching ErrPayload.
//
// The section must carry the 0x0e01 checksum header: every client since
// protocol version 6 writes it, and a broker that stores sections unchanged
// needs it because clients refuse MESSAGE frames without it.
func ParsePayload(b []byte) (Payload, error) {
	var p Payload
	if len(b) >= 2 && binary.BigEndian.Uint16(b) == magicBrokerEntry {
		if len(b) < 6 {
			return Payload{}, fmt.Errorf("%w: broker entry metadata header cut off after %d bytes", ErrPayload, len(b))
		}
		n := binary.BigEndian.Uint32(b[2:])
		if uint64(n) > uint64(len(b)-6) {
			return Payload{}, fmt.Errorf("%w: broker entry metadata of %d bytes does not fit the %d bytes left",
				ErrPayload, n, len(b)-6)
		}
		p.BrokerEntryMetadata = b[6 : 6+n]
		b = b[6+n:]
	}
	// magic (2) + checksum (4) + metadata size (4)
	if len(b) < 10 {
		return Payload{}, fmt.Errorf("%w: payload section of %d bytes is shorter than its 10-byte header",
			ErrPayload, len(b))
	}
	if m := binary.BigEndian.Uint16(b); m != magicChecksum {
		return Payload{}, fmt.Errorf("%w: payload section starts with 0x%04x instead of the checksum magic 0x%04x",
			ErrPayload, m, magicChecksum)
	}
	p.Checksummed = b
	p.Checksum = binary.BigEndian.Uint32(b[2:])
	mdSize := binary.BigEndian.Uint32(b[6:])
	if uint64(mdSize) > uint64(len(b)-10) {
		return Payload{}, fmt.Errorf("%w: message metadata of %d bytes does not fit the %d bytes left",
			ErrPayload, mdSize, len(b)-10)
	}
	p.Metadata = b[10 : 10+mdSize]
	p.Data = b[10+mdSize:]
	if got := Checksum(b[6:]); got != p.Checksum {
		return p, &ChecksumError{Want: p.Checksum, Got: got}
	}
	return p, nil
}

// DecodeMetadata decodes the section's MessageMetadata into md, which is
// reset first. See DecodeMessageMetadata.
func (p Payload) DecodeMetadata(md *pb.MessageMetadata) error {
	return DecodeMessageMetadata(p.Metadata, md)
}

// DecodeBrokerEntryMetadata decodes the broker entry metadata into bem and
// reports whether the section had any.
func (p Payload) DecodeBrokerEntryMetadata(bem *pb.BrokerEntryMetadata) (bool, error) {
	if p.BrokerEntryMetadata == nil {
		return false, nil
	}
	if err := unmarshalPartial.Unmarshal(p.BrokerEntryMetadata, bem); err != nil {
		return true, fmt.Errorf("%w: broker entry metadata: %w", ErrPayload, err)
	}
	return true, nil
}

// DecodeMessageMetadata decodes an encoded MessageMetadata into md (reset
// first) and checks it: required fields set, a known compression codec, a
// non-negative batch size.
func DecodeMessageMetadata(b []byte, md *pb.MessageMetadata) error {
	if err := proto.Unmarshal(b, md); err != nil {
		return fmt.Errorf("%w: message metadata: %w", ErrPayload, err)
	}
	if _, known := pb.CompressionType_name[int32(md.GetCompression())]; !known {
		return fmt.Errorf("%w: message metadata names compression codec %d, which is unknown; "+
			"use NONE, LZ4, ZLIB, ZSTD or SNAPPY", ErrPayload, md.GetCompression())
	}
	if md.NumMessagesInBatch != nil && md.GetNumMessagesInBatch() < 0 {
		return fmt.Errorf("%w: message metadata has num_messages_in_batch %d", ErrPayload, md.GetNumMessagesInBatch())
	}
	return nil
}

// IsBatch reports whether a payload with metadata md is a batch payload.
// Clients mark batches by setting num_messages_in_batch, even to 1.
func IsBatch(md *pb.MessageMetadata) bool { return md.NumMessagesInBatch != nil }
