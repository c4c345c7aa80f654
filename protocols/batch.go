package protocols

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BatchHeaderSize is the fixed part of a RecordBatch v2 before its records.
const BatchHeaderSize = 61

// Offsets of the RecordBatch v2 header fields. The CRC-32C covers everything
// from the attributes to the end, so the base offset and the partition
// leader epoch can be rewritten without recomputing it.
const (
	batchLengthAt      = 8
	batchEpochAt       = 12
	batchMagicAt       = 16
	batchCRCAt         = 17
	batchAttributesAt  = 21
	batchLastDeltaAt   = 23
	batchBaseTimeAt    = 27
	batchMaxTimeAt     = 35
	batchProducerIDAt  = 43
	batchProducerEpAt  = 51
	batchBaseSeqAt     = 53
	batchRecordCountAt = 57
)

// Attribute bits of a RecordBatch.
const (
	AttrCodecMask     = 0x07
	AttrLogAppendTime = 0x08
	AttrTransactional = 0x10
	AttrControl       = 0x20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// BatchHeader is the decoded fixed header of a RecordBatch v2.
type BatchHeader struct {
	BaseOffset      int64
	Length          int32
	LeaderEpoch     int32
	Magic           int8
	CRC             uint32
	Attributes      int16
	LastOffsetDelta int32
	BaseTimestamp   int64
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	NumRecords      int32
}

// Codec is the batch's compression codec.
func (h BatchHeader) Codec() Codec { return Codec(h.Attributes & AttrCodecMask) }

// Transactional reports the transactional attribute bit.
func (h BatchHeader) Transactional() bool { return h.Attributes&AttrTransactional != 0 }

// Control reports a control batch (transaction markers).
func (h BatchHeader) Control() bool { return h.Attributes&AttrControl != 0 }

// Size is the batch's length in bytes as its header gives it: the base
// offset and length fields, then batchLength bytes.
func (h BatchHeader) Size() int { return 12 + int(h.Length) }

// OffsetCount is how many offsets the batch covers: lastOffsetDelta+1.
func (h BatchHeader) OffsetCount() int64 { return int64(h.LastOffsetDelta) + 1 }

// LastSequence is the sequence number of the batch's last record, with
// int32 wrap-around as Kafka defines it.
func (h BatchHeader) LastSequence() int32 {
	if h.BaseSequence < 0 {
		return h.BaseSequence
	}
	return int32((int64(h.BaseSequence) + int64(h.LastOffsetDelta)) % (1 << 31))
}

// BatchCRC returns the CRC-32C a batch's header carries and the offset in
// the batch from which it covers the rest: whoever has checked it knows
// the checksum of those bytes without reading them again.
func BatchCRC(b []byte) (sum uint32, from int) {
	return binary.BigEndian.Uint32(b[batchCRCAt:]), batchAttributesAt
}

// ParseBatchHeader reads the fixed header without checking the CRC.
func ParseBatchHeader(b []byte) (BatchHeader, error) {
	var h BatchHeader
	if len(b) < BatchHeaderSize {
		return h, fmt.Errorf("%w: %d bytes is shorter than the %d-byte header", ErrCorruptBatch, len(b), BatchHeaderSize)
	}
	be := binary.BigEndian
	h.BaseOffset = int64(be.Uint64(b))
	h.Length = int32(be.Uint32(b[batchLengthAt:]))
	h.LeaderEpoch = int32(be.Uint32(b[batchEpochAt:]))
	h.Magic = int8(b[batchMagicAt])
	h.CRC = be.Uint32(b[batchCRCAt:])
	h.Attributes = int16(be.Uint16(b[batchAttributesAt:]))
	h.LastOffsetDelta = int32(be.Uint32(b[batchLastDeltaAt:]))
	h.BaseTimestamp = int64(be.Uint64(b[batchBaseTimeAt:]))
	h.MaxTimestamp = int64(be.Uint64(b[batchMaxTimeAt:]))
	h.ProducerID = int64(be.Uint64(b[batchProducerIDAt:]))
	h.ProducerEpoch = int16(be.Uint16(b[batchProducerEpAt:]))
	h.BaseSequence = int32(be.Uint32(b[batchBaseSeqAt:]))
	h.NumRecords = int32(be.Uint32(b[batchRecordCountAt:]))
	return h, nil
}

// ValidateBatch checks that b is exactly one well-formed RecordBatch v2:
// the length field matches, the magic is 2, the CRC-32C over attributes..end
// matches, the codec is known and the record count agrees with
// lastOffsetDelta. Records themselves are not decompressed here.
func ValidateBatch(b []byte) (BatchHeader, error) { return validateBatch(b, true) }

// validateBatch is ValidateBatch; without crc it checks all but the
// CRC-32C.
func validateBatch(b []byte, crc bool) (BatchHeader, error) {
	h, err := ParseBatchHeader(b)
	if err != nil {
		return h, err
	}
	if h.Size() != len(b) {
		return h, fmt.Errorf("%w: batchLength %d but %d bytes follow it", ErrCorruptBatch, h.Length, len(b)-12)
	}
	if h.Magic != 2 {
		return h, fmt.Errorf("%w: magic %d; only RecordBatch v2 (magic 2) is accepted", ErrCorruptBatch, h.Magic)
	}
	if crc {
		if got := crc32.Checksum(b[batchAttributesAt:], castagnoli); got != h.CRC {
			return h, fmt.Errorf("%w: CRC-32C %#08x does not match the header's %#08x", ErrCorruptBatch, got, h.CRC)
		}
	}
	if c := h.Codec(); c > CodecZstd {
		return h, fmt.Errorf("%w: codec %d", ErrUnsupportedCodec, c)
	}
	if h.NumRecords <= 0 {
		return h, fmt.Errorf("%w: %d records; a batch holds at least one", ErrCorruptBatch, h.NumRecords)
	}
	if h.LastOffsetDelta < 0 || int64(h.NumRecords) != int64(h.LastOffsetDelta)+1 {
		return h, fmt.Errorf("%w: %d records but lastOffsetDelta %d", ErrCorruptBatch, h.NumRecords, h.LastOffsetDelta)
	}
	return h, nil
}

// SetBatchBaseOffset rewrites the base offset in place (not CRC-covered).
func SetBatchBaseOffset(b []byte, off int64) { binary.BigEndian.PutUint64(b, uint64(off)) }

// SetBatchLeaderEpoch rewrites the partition leader epoch (not CRC-covered).
func SetBatchLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[batchEpochAt:], uint32(epoch))
}

// Header is one record header: a Kafka header or a Pulsar property.
type Header struct {
	Key   string
	Value []byte
}

// Message is one record in the neutral model.
type Message struct {
	// Offset is the record's offset in its partition.
	Offset int64
	// Timestamp is the event time in Unix milliseconds (the Kafka record
	// timestamp; a Pulsar message's event time).
	Timestamp int64
	// Key is the Kafka key and the Pulsar partition key; nil means none.
	Key []byte
	// Value is the payload; nil is a Kafka null value (Pulsar null_value).
	Value []byte
	// Headers are Kafka headers and Pulsar properties, in order.
	Headers []Header
}

// Records decodes every record of a validated batch, decompressing with d.
// The messages alias the batch (or d's buffer) and are valid until d is
// reused. Offsets are absolute: the batch's base offset plus each record's
// delta.
func Records(batch []byte, h BatchHeader, d *Decompressor) ([]Message, error) {
	raw := batch[BatchHeaderSize:]
	if c := h.Codec(); c != CodecNone {
		var err error
		raw, err = d.Decompress(c, raw)
		if err != nil {
			return nil, err
		}
	}
	if h.NumRecords < 0 || int(h.NumRecords) > len(raw) {
		return nil, fmt.Errorf("%w: %d records cannot fit in %d bytes", ErrCorruptBatch, h.NumRecords, len(raw))
	}
	msgs := make([]Message, 0, h.NumRecords)
	var rec kmsg.Record
	for i := int32(0); i < h.NumRecords; i++ {
		l, n := binary.Varint(raw)
		if n <= 0 || l < 0 || int64(len(raw)-n) < l {
			return nil, fmt.Errorf("%w: record %d length is malformed", ErrCorruptBatch, i)
		}
		end := n + int(l)
		if err := rec.ReadFrom(raw[:end]); err != nil {
			return nil, fmt.Errorf("%w: record %d: %v", ErrCorruptBatch, i, err)
		}
		raw = raw[end:]
		m := Message{
			Offset:    h.BaseOffset + int64(rec.OffsetDelta),
			Timestamp: h.BaseTimestamp + rec.TimestampDelta64,
			Key:       rec.Key,
			Value:     rec.Value,
		}
		if h.Attributes&AttrLogAppendTime != 0 {
			m.Timestamp = h.MaxTimestamp
		}
		if len(rec.Headers) > 0 {
			m.Headers = make([]Header, len(rec.Headers))
			for j, hd := range rec.Headers {
				m.Headers[j] = Header{Key: hd.Key, Value: hd.Value}
			}
		}
		msgs = append(msgs, m)
	}
	if len(raw) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last record", ErrCorruptBatch, len(raw))
	}
	return msgs, nil
}

// BatchSpec describes the header fields of a batch to build.
type BatchSpec struct {
	Codec         Codec
	ProducerID    int64 // -1 when not idempotent
	ProducerEpoch int16 // -1 when not idempotent
	BaseSequence  int32 // -1 when not idempotent
	Transactional bool
}

// AppendBatch encodes msgs as one RecordBatch v2 with base offset 0 and
// appends it to dst. Record offsets are their index; timestamps are stored as
// deltas from the first message's. c compresses when spec.Codec is set.
//
// The records are written straight into dst behind a header that is filled
// in last, so an uncompressed batch is built with one copy of each value.
func AppendBatch(dst []byte, spec BatchSpec, msgs []Message, c *Compressor) ([]byte, error) {
	if len(msgs) == 0 {
		return dst, fmt.Errorf("%w: a batch needs at least one message", ErrCorruptBatch)
	}
	base := msgs[0].Timestamp
	maxTs := base
	size := BatchHeaderSize
	// Sized from the messages, then written through one kmsg.Record, so
	// a batch costs no allocation per message (nor a slice of records).
	for i := range msgs {
		maxTs = max(maxTs, msgs[i].Timestamp)
		n := messageBodyLen(&msgs[i], i, base)
		size += varintLen(int64(n)) + n
	}
	var rec kmsg.Record
	var hdrs []kmsg.Header
	start := len(dst)
	dst = slices.Grow(dst, size)
	dst = append(dst, make([]byte, BatchHeaderSize)...)
	for i := range msgs {
		hdrs = fillRecord(&rec, hdrs, &msgs[i], i, base)
		dst = rec.AppendTo(dst)
	}
	attrs := int16(spec.Codec) & AttrCodecMask
	if spec.Codec != CodecNone {
		compressed, err := c.Compress(spec.Codec, dst[start+BatchHeaderSize:])
		if err != nil {
			return dst[:start], err
		}
		dst = append(dst[:start+BatchHeaderSize], compressed...)
	}
	if spec.Transactional {
		attrs |= AttrTransactional
	}
	h := dst[start:]
	be := binary.BigEndian
	be.PutUint64(h, 0)
	be.PutUint32(h[batchLengthAt:], uint32(len(h)-12))
	be.PutUint32(h[batchEpochAt:], uint32(0xffffffff)) // leader epoch -1
	h[batchMagicAt] = 2
	be.PutUint16(h[batchAttributesAt:], uint16(attrs))
	be.PutUint32(h[batchLastDeltaAt:], uint32(len(msgs)-1))
	be.PutUint64(h[batchBaseTimeAt:], uint64(base))
	be.PutUint64(h[batchMaxTimeAt:], uint64(maxTs))
	be.PutUint64(h[batchProducerIDAt:], uint64(spec.ProducerID))
	be.PutUint16(h[batchProducerEpAt:], uint16(spec.ProducerEpoch))
	be.PutUint32(h[batchBaseSeqAt:], uint32(spec.BaseSequence))
	be.PutUint32(h[batchRecordCountAt:], uint32(len(msgs)))
	be.PutUint32(h[batchCRCAt:], crc32.Checksum(h[batchAttributesAt:], castagnoli))
	return dst, nil
}

// fillRecord sets rec to message i of a batch whose first timestamp is
// base, with its length; its headers go in hdrs, which it returns for
// the next message to reuse.
func fillRecord(rec *kmsg.Record, hdrs []kmsg.Header, m *Message, i int, base int64) []kmsg.Header {
	hdrs = hdrs[:0]
	for _, h := range m.Headers {
		hdrs = append(hdrs, kmsg.Header{Key: h.Key, Value: h.Value})
	}
	*rec = kmsg.Record{
		TimestampDelta64: m.Timestamp - base,
		OffsetDelta:      int32(i),
		Key:              m.Key,
		Value:            m.Value,
		Headers:          hdrs,
	}
	rec.Length = int32(messageBodyLen(m, i, base))
	return hdrs
}

// messageBodyLen is the encoded size of the record fillRecord makes of
// message i of a batch whose first timestamp is base, after its length
// varint: attributes, timestamp and offset deltas, key, value, headers.
func messageBodyLen(m *Message, i int, base int64) int {
	n := 1 + varintLen(m.Timestamp-base) + varintLen(int64(i))
	n += bytesLen(m.Key) + bytesLen(m.Value) + varintLen(int64(len(m.Headers)))
	for _, h := range m.Headers {
		n += varintLen(int64(len(h.Key))) + len(h.Key) + bytesLen(h.Value)
	}
	return n
}

func bytesLen(b []byte) int {
	if b == nil {
		return varintLen(-1)
	}
	return varintLen(int64(len(b))) + len(b)
}

func varintLen(v int64) int {
	u := uint64((v << 1) ^ (v >> 63))
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}
