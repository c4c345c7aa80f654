package protocols

import (
	"encoding/binary"
	"fmt"
)

// An entry is the unit the log stores: an envelope followed by one
// RecordBatch v2, byte for byte.
//
//	off 0   u8   envelope version (1)
//	off 1   u8   flags: which optional sections follow
//	off 2   u16  envelope length L, counted from offset 0 to the batch
//	off 4   i64  append (publish) time, Unix ms, stamped by the log
//	[origin]   u8 len + region, i64 origin offset, u8 n + n x (u8 len + region)
//	[producer] u16 len + name, i64 first sequence, i64 last sequence
//	[schema]   u16 len + schema version bytes
//	[txn]      u64 high, u64 low
//	[attrs]    u8 n + n x (u8 len + key, u32 len + value)
//	off L   RecordBatch v2 (its baseOffset stamped by the log)
//
// All integers are big-endian. The two stamped fields sit at fixed places so
// the log can write them into a buffer it owns without re-encoding.

const (
	// EnvelopeVersion is the only envelope version this build reads.
	EnvelopeVersion = 1
	envelopeFixed   = 12

	flagOrigin   = 1 << 0
	flagProducer = 1 << 1
	flagSchema   = 1 << 2
	flagTxn      = 1 << 3
	flagAttrs    = 1 << 4
	flagsKnown   = flagOrigin | flagProducer | flagSchema | flagTxn | flagAttrs

	appendTimeAt = 4
)

// Envelope carries what a RecordBatch cannot: where an entry came from and
// which protocol-level identity produced it.
type Envelope struct {
	// AppendTime is the publish time in Unix milliseconds. The log sets it.
	AppendTime int64

	// OriginRegion is the region where the entry was first appended; empty
	// means here. OriginOffset is its base offset there. Visited lists the
	// regions the entry already passed through (replication never sends an
	// entry to its origin or to a visited region).
	OriginRegion string
	OriginOffset int64
	Visited      []string

	// ProducerName and the sequence range identify a Pulsar producer's send
	// for deduplication (layer 1).
	ProducerName  string
	SequenceFirst int64
	SequenceLast  int64

	// SchemaVersion is the Pulsar schema version the payloads were written with.
	SchemaVersion []byte

	// TxnHigh and TxnLow name the transaction the entry belongs to, if Txn.
	Txn             bool
	TxnHigh, TxnLow uint64

	// Attrs holds batch-level properties a protocol needs to round-trip
	// (for example a delivery time). Keys are short and stable.
	Attrs []Attr
}

// Attr is one batch-level property of an entry.
type Attr struct {
	Key   string
	Value []byte
}

// Attr returns the value of the attribute named key.
func (e *Envelope) Attr(key string) ([]byte, bool) {
	for _, a := range e.Attrs {
		if a.Key == key {
			return a.Value, true
		}
	}
	return nil, false
}

// size is the encoded envelope length.
func (e *Envelope) size() int {
	n := envelopeFixed
	if e.OriginRegion != "" {
		n += 1 + len(e.OriginRegion) + 8 + 1
		for _, v := range e.Visited {
			n += 1 + len(v)
		}
	}
	if e.ProducerName != "" {
		n += 2 + len(e.ProducerName) + 16
	}
	if len(e.SchemaVersion) > 0 {
		n += 2 + len(e.SchemaVersion)
	}
	if e.Txn {
		n += 16
	}
	if len(e.Attrs) > 0 {
		n++
		for _, a := range e.Attrs {
			n += 1 + len(a.Key) + 4 + len(a.Value)
		}
	}
	return n
}

// check reports fields too long for the encoding.
func (e *Envelope) check() error {
	if len(e.OriginRegion) > 255 || len(e.Visited) > 255 || len(e.Attrs) > 255 {
		return fmt.Errorf("%w: envelope origin, visited or attrs too long", ErrCorruptEntry)
	}
	for _, v := range e.Visited {
		if len(v) > 255 {
			return fmt.Errorf("%w: visited region name over 255 bytes", ErrCorruptEntry)
		}
	}
	for _, a := range e.Attrs {
		if len(a.Key) > 255 {
			return fmt.Errorf("%w: attr key over 255 bytes", ErrCorruptEntry)
		}
	}
	if len(e.ProducerName) > 65535 || len(e.SchemaVersion) > 65535 {
		return fmt.Errorf("%w: producer name or schema version over 65535 bytes", ErrCorruptEntry)
	}
	if e.size() > 65535 {
		return fmt.Errorf("%w: envelope over 65535 bytes", ErrCorruptEntry)
	}
	return nil
}

// EntrySize is the encoded size of an entry with envelope e and a batch of
// batchLen bytes, or an error if the envelope cannot be encoded. A caller
// that writes the entry into space it sized in advance (the log encodes
// straight into its write batch) calls it first.
func EntrySize(e *Envelope, batchLen int) (int, error) {
	if err := e.check(); err != nil {
		return 0, err
	}
	return e.size() + batchLen, nil
}

// AppendEntry appends the encoded entry (envelope then batch) to dst.
func AppendEntry(dst []byte, e *Envelope, batch []byte) ([]byte, error) {
	dst, err := AppendEnvelope(dst, e)
	if err != nil {
		return dst, err
	}
	return append(dst, batch...), nil
}

// AppendEnvelope appends the encoded envelope to dst: the entry up to its
// batch, for a writer that sends the batch on from where it already is.
func AppendEnvelope(dst []byte, e *Envelope) ([]byte, error) {
	if err := e.check(); err != nil {
		return dst, err
	}
	var flags byte
	if e.OriginRegion != "" {
		flags |= flagOrigin
	}
	if e.ProducerName != "" {
		flags |= flagProducer
	}
	if len(e.SchemaVersion) > 0 {
		flags |= flagSchema
	}
	if e.Txn {
		flags |= flagTxn
	}
	if len(e.Attrs) > 0 {
		flags |= flagAttrs
	}
	dst = append(dst, EnvelopeVersion, flags)
	dst = binary.BigEndian.AppendUint16(dst, uint16(e.size()))
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.AppendTime))
	if flags&flagOrigin != 0 {
		dst = append(dst, byte(len(e.OriginRegion)))
		dst = append(dst, e.OriginRegion...)
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.OriginOffset))
		dst = append(dst, byte(len(e.Visited)))
		for _, v := range e.Visited {
			dst = append(dst, byte(len(v)))
			dst = append(dst, v...)
		}
	}
	if flags&flagProducer != 0 {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(e.ProducerName)))
		dst = append(dst, e.ProducerName...)
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.SequenceFirst))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.SequenceLast))
	}
	if flags&flagSchema != 0 {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(e.SchemaVersion)))
		dst = append(dst, e.SchemaVersion...)
	}
	if flags&flagTxn != 0 {
		dst = binary.BigEndian.AppendUint64(dst, e.TxnHigh)
		dst = binary.BigEndian.AppendUint64(dst, e.TxnLow)
	}
	if flags&flagAttrs != 0 {
		dst = append(dst, byte(len(e.Attrs)))
		for _, a := range e.Attrs {
			dst = append(dst, byte(len(a.Key)))
			dst = append(dst, a.Key...)
			dst = binary.BigEndian.AppendUint32(dst, uint32(len(a.Value)))
			dst = append(dst, a.Value...)
		}
	}
	return dst, nil
}

// Entry is a decoded entry. Batch and the envelope's byte fields alias the
// decoded buffer.
type Entry struct {
	Envelope Envelope
	Header   BatchHeader
	Batch    []byte
}

// SplitEntry returns the batch bytes of an encoded entry without decoding the
// envelope: the hot path of a Kafka fetch.
func SplitEntry(b []byte) (batch []byte, err error) {
	if len(b) < envelopeFixed || b[0] != EnvelopeVersion {
		return nil, fmt.Errorf("%w: short entry or unknown envelope version", ErrCorruptEntry)
	}
	l := int(binary.BigEndian.Uint16(b[2:]))
	if l < envelopeFixed || l > len(b) {
		return nil, fmt.Errorf("%w: envelope length %d outside entry of %d bytes", ErrCorruptEntry, l, len(b))
	}
	return b[l:], nil
}

// DecodeEntry decodes the envelope and validates the batch (magic, lengths,
// CRC-32C, record count). It never panics on any input.
func DecodeEntry(b []byte) (Entry, error) { return decodeEntry(b, true) }

// DecodeStoredEntry is DecodeEntry for an entry just read from the store,
// which checked it against its own checksum as it read it (a segment
// record's CRC-32C, pebble's block checksums): it validates the batch as
// DecodeEntry does but for the batch's CRC-32C, which covers the same bytes
// again. Dispatch decodes every entry it delivers with it.
func DecodeStoredEntry(b []byte) (Entry, error) { return decodeEntry(b, false) }

func decodeEntry(b []byte, crc bool) (Entry, error) {
	var e Entry
	batch, err := SplitEntry(b)
	if err != nil {
		return e, err
	}
	if err := decodeEnvelope(b[:len(b)-len(batch)], &e.Envelope); err != nil {
		return e, err
	}
	h, err := validateBatch(batch, crc)
	if err != nil {
		return e, err
	}
	e.Header = h
	e.Batch = batch
	return e, nil
}

// DecodeEnvelope decodes only the envelope of an encoded entry.
func DecodeEnvelope(b []byte) (Envelope, error) {
	var env Envelope
	batch, err := SplitEntry(b)
	if err != nil {
		return env, err
	}
	err = decodeEnvelope(b[:len(b)-len(batch)], &env)
	return env, err
}

type envReader struct {
	b   []byte
	bad bool
}

func (r *envReader) take(n int) []byte {
	if r.bad || n > len(r.b) {
		r.bad = true
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *envReader) u8() int {
	v := r.take(1)
	if v == nil {
		return 0
	}
	return int(v[0])
}

func (r *envReader) u16() int {
	v := r.take(2)
	if v == nil {
		return 0
	}
	return int(binary.BigEndian.Uint16(v))
}

func (r *envReader) u32() int {
	v := r.take(4)
	if v == nil {
		return 0
	}
	return int(binary.BigEndian.Uint32(v))
}

func (r *envReader) u64() uint64 {
	v := r.take(8)
	if v == nil {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

func decodeEnvelope(b []byte, e *Envelope) error {
	flags := b[1]
	if flags&^flagsKnown != 0 {
		return fmt.Errorf("%w: unknown envelope flags %#x", ErrCorruptEntry, flags)
	}
	r := envReader{b: b[4:]}
	e.AppendTime = int64(r.u64())
	if flags&flagOrigin != 0 {
		e.OriginRegion = string(r.take(r.u8()))
		e.OriginOffset = int64(r.u64())
		n := r.u8()
		if !r.bad && n > 0 {
			e.Visited = make([]string, 0, n)
			for i := 0; i < n && !r.bad; i++ {
				e.Visited = append(e.Visited, string(r.take(r.u8())))
			}
		}
		if e.OriginRegion == "" && !r.bad {
			return fmt.Errorf("%w: origin flag with an empty region", ErrCorruptEntry)
		}
	}
	if flags&flagProducer != 0 {
		e.ProducerName = string(r.take(r.u16()))
		e.SequenceFirst = int64(r.u64())
		e.SequenceLast = int64(r.u64())
	}
	if flags&flagSchema != 0 {
		e.SchemaVersion = r.take(r.u16())
	}
	if flags&flagTxn != 0 {
		e.Txn = true
		e.TxnHigh = r.u64()
		e.TxnLow = r.u64()
	}
	if flags&flagAttrs != 0 {
		n := r.u8()
		for i := 0; i < n && !r.bad; i++ {
			k := string(r.take(r.u8()))
			v := r.take(r.u32())
			e.Attrs = append(e.Attrs, Attr{Key: k, Value: v})
		}
	}
	if r.bad {
		return fmt.Errorf("%w: envelope truncated", ErrCorruptEntry)
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%w: %d stray bytes after the envelope", ErrCorruptEntry, len(r.b))
	}
	return nil
}

// EntryBatchOffset is where the batch starts in an encoded entry.
func EntryBatchOffset(b []byte) (int, error) {
	batch, err := SplitEntry(b)
	if err != nil {
		return 0, err
	}
	return len(b) - len(batch), nil
}

// StampEntry writes the log-assigned base offset and append time into an
// encoded entry in place. Neither field is covered by the batch CRC.
func StampEntry(b []byte, baseOffset, appendTime int64) error {
	at, err := EntryBatchOffset(b)
	if err != nil {
		return err
	}
	if len(b)-at < BatchHeaderSize {
		return fmt.Errorf("%w: entry holds no batch", ErrCorruptEntry)
	}
	binary.BigEndian.PutUint64(b[appendTimeAt:], uint64(appendTime))
	binary.BigEndian.PutUint64(b[at:], uint64(baseOffset))
	return nil
}
