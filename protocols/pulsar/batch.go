package pulsar

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"google.golang.org/protobuf/proto"

	"github.com/ternmq/tern/protocols/pulsar/pb"
)

// A batch payload is what a producer sends when MessageMetadata has
// num_messages_in_batch: that many items, each
//
//	[metadataSize u32][SingleMessageMetadata][payload_size bytes]
//
// back to back with nothing after the last one, then compressed as a whole.
// The functions here work on the decompressed form.

// BatchReader walks the messages of a decompressed batch payload. It checks
// every size against the bytes actually present and the message count
// against the metadata, so a truncated or padded batch is an error rather
// than a short or garbled read.
type BatchReader struct {
	data  []byte
	off   int
	count int
	read  int
}

// NewBatchReader returns a reader of the count messages in data; count is
// the batch's num_messages_in_batch.
func NewBatchReader(data []byte, count int) BatchReader {
	return BatchReader{data: data, count: count}
}

// Next decodes the next message's metadata into md (reset first) and returns
// its payload, which aliases the batch data. After the last message it
// returns io.EOF, or an error matching ErrBatch if bytes are left over.
func (r *BatchReader) Next(md *pb.SingleMessageMetadata) ([]byte, error) {
	if r.count < 0 {
		return nil, fmt.Errorf("%w: num_messages_in_batch is %d", ErrBatch, r.count)
	}
	if r.read >= r.count {
		if left := len(r.data) - r.off; left != 0 {
			return nil, fmt.Errorf("%w: %d bytes follow the %d messages the metadata announces",
				ErrBatch, left, r.count)
		}
		return nil, io.EOF
	}
	i := r.read + 1
	rest := r.data[r.off:]
	if len(rest) < 4 {
		return nil, fmt.Errorf("%w: message %d of %d: batch ends %d bytes into its size field",
			ErrBatch, i, r.count, len(rest))
	}
	mdSize := binary.BigEndian.Uint32(rest)
	rest = rest[4:]
	if uint64(mdSize) > uint64(len(rest)) {
		return nil, fmt.Errorf("%w: message %d of %d: metadata of %d bytes does not fit the %d bytes left",
			ErrBatch, i, r.count, mdSize, len(rest))
	}
	if err := proto.Unmarshal(rest[:mdSize], md); err != nil {
		return nil, fmt.Errorf("%w: message %d of %d: metadata: %w", ErrBatch, i, r.count, err)
	}
	rest = rest[mdSize:]
	ps := md.GetPayloadSize()
	if ps < 0 || int64(ps) > int64(len(rest)) {
		return nil, fmt.Errorf("%w: message %d of %d: payload_size %d does not fit the %d bytes left",
			ErrBatch, i, r.count, ps, len(rest))
	}
	r.off += 4 + int(mdSize) + int(ps)
	r.read++
	return rest[:ps:ps], nil
}

// BatchMessage is one message of a batch payload.
type BatchMessage struct {
	Metadata *pb.SingleMessageMetadata
	// Payload aliases the batch data.
	Payload []byte
}

// ParseBatch splits a decompressed batch payload of count messages. It
// allocates per message; hot paths use BatchReader with one reused
// SingleMessageMetadata instead.
func ParseBatch(data []byte, count int) ([]BatchMessage, error) {
	if count < 0 {
		return nil, fmt.Errorf("%w: num_messages_in_batch is %d", ErrBatch, count)
	}
	// Every message takes at least 6 bytes (size field and payload_size), so
	// a count larger than that is wrong and must not size the slice.
	if count > len(data)/6 {
		return nil, fmt.Errorf("%w: %d messages cannot fit in %d bytes", ErrBatch, count, len(data))
	}
	msgs := make([]BatchMessage, 0, count)
	r := NewBatchReader(data, count)
	for {
		md := &pb.SingleMessageMetadata{}
		p, err := r.Next(md)
		if err == io.EOF {
			return msgs, nil
		}
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, BatchMessage{Metadata: md, Payload: p})
	}
}

// AppendBatchMessage appends one message to a batch payload being built in
// dst. It sets md.PayloadSize to len(payload), so the caller need not.
func AppendBatchMessage(dst []byte, md *pb.SingleMessageMetadata, payload []byte) ([]byte, error) {
	if len(payload) > math.MaxInt32 {
		return dst, fmt.Errorf("%w: batch message of %d bytes exceeds the 2 GiB payload_size can express",
			ErrEncode, len(payload))
	}
	if n := int32(len(payload)); !md.HasPayloadSize() || md.GetPayloadSize() != n {
		md.SetPayloadSize(n)
	}
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	// Its one required field, payload_size, is set above: the check for
	// required fields that marshalChecked makes would only walk each
	// message's fields again.
	dst, err := marshalPartial.MarshalAppend(dst, md)
	if err != nil {
		return dst[:start], fmt.Errorf("%w: single message metadata: %w", ErrEncode, err)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return append(dst, payload...), nil
}
