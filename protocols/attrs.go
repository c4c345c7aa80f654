package protocols

import (
	"encoding/binary"
	"fmt"
)

// Entry attributes (Envelope.Attrs) that the Pulsar-model front ends write
// and every reader of the log may interpret. They carry what a Pulsar message
// has beyond a record (key, value, headers, timestamp) so that a message
// produced through one front end reads back the same through another. Keys
// are short because they are stored with every entry that has them; each is
// absent when it would say nothing.
const (
	// AttrDeliverAt is the earliest delivery time of the entry's messages,
	// Unix ms, as 8 bytes big-endian (Pulsar deliver_at_time). Shared and
	// Key_Shared subscriptions hold the messages until then.
	AttrDeliverAt = "dat"
	// AttrOrderingKeys lists per-message ordering keys (Pulsar
	// ordering_key), which route Key_Shared dispatch ahead of the key.
	AttrOrderingKeys = "okey"
	// AttrNoEventTime marks messages the producer gave no event time: their
	// record timestamp is the producer's publish time, which Kafka readers
	// see, while Pulsar readers see no event time. An empty value marks
	// every message; otherwise it is a bitset (bit i for message i, bytes
	// little-endian first).
	AttrNoEventTime = "noet"
	// AttrChunk marks an entry holding one chunk of a larger message
	// (Pulsar chunking); see ChunkInfo.
	AttrChunk = "chnk"
)

// MessageExtras are the per-message properties a Message does not carry.
type MessageExtras struct {
	// OrderingKey routes Key_Shared dispatch ahead of Message.Key; nil if
	// none.
	OrderingKey []byte
	// NoEventTime is set when the producer gave no event time.
	NoEventTime bool
}

// SetMessageExtras records per-message extras in env's attributes, adding
// only what is not empty.
func SetMessageExtras(env *Envelope, extras []MessageExtras) {
	var anyKey bool
	noet := 0
	for _, x := range extras {
		if x.OrderingKey != nil {
			anyKey = true
		}
		if x.NoEventTime {
			noet++
		}
	}
	if anyKey {
		var b []byte
		b = binary.AppendUvarint(b, uint64(len(extras)))
		for _, x := range extras {
			if x.OrderingKey == nil {
				b = binary.AppendUvarint(b, 0)
				continue
			}
			b = binary.AppendUvarint(b, uint64(len(x.OrderingKey))+1)
			b = append(b, x.OrderingKey...)
		}
		env.Attrs = append(env.Attrs, Attr{Key: AttrOrderingKeys, Value: b})
	}
	switch {
	case noet == len(extras) && noet > 0:
		env.Attrs = append(env.Attrs, Attr{Key: AttrNoEventTime, Value: []byte{}})
	case noet > 0:
		b := make([]byte, (len(extras)+7)/8)
		for i, x := range extras {
			if x.NoEventTime {
				b[i/8] |= 1 << (i % 8)
			}
		}
		env.Attrs = append(env.Attrs, Attr{Key: AttrNoEventTime, Value: b})
	}
}

// MessageExtrasOf decodes the per-message extras of an entry of n messages.
// An entry without the attributes has zero extras for every message.
func MessageExtrasOf(env *Envelope, n int) ([]MessageExtras, error) {
	out := make([]MessageExtras, n)
	if v, ok := env.Attr(AttrOrderingKeys); ok {
		cnt, k := binary.Uvarint(v)
		if k <= 0 || cnt != uint64(n) {
			return nil, fmt.Errorf("%w: ordering keys attribute lists %d messages, the entry has %d", ErrCorruptEntry, cnt, n)
		}
		v = v[k:]
		for i := range out {
			l, k := binary.Uvarint(v)
			if k <= 0 || l > uint64(len(v)-k)+1 {
				return nil, fmt.Errorf("%w: ordering keys attribute truncated at message %d", ErrCorruptEntry, i)
			}
			v = v[k:]
			if l > 0 {
				out[i].OrderingKey = v[: l-1 : l-1]
				v = v[l-1:]
			}
		}
	}
	if v, ok := env.Attr(AttrNoEventTime); ok {
		if len(v) == 0 {
			for i := range out {
				out[i].NoEventTime = true
			}
		} else {
			if len(v) != (n+7)/8 {
				return nil, fmt.Errorf("%w: event time bitset of %d bytes for %d messages", ErrCorruptEntry, len(v), n)
			}
			for i := range out {
				out[i].NoEventTime = v[i/8]&(1<<(i%8)) != 0
			}
		}
	}
	return out, nil
}

// DeliverAt returns the entry's delivery time (AttrDeliverAt), if any.
func DeliverAt(env *Envelope) (int64, bool) {
	v, ok := env.Attr(AttrDeliverAt)
	if !ok || len(v) != 8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(v)), true
}

// SetDeliverAt records a delivery time.
func SetDeliverAt(env *Envelope, ms int64) {
	env.Attrs = append(env.Attrs, Attr{Key: AttrDeliverAt, Value: binary.BigEndian.AppendUint64(nil, uint64(ms))})
}

// ChunkInfo describes one chunk of a message too large for one entry. The
// chunk's bytes are the entry's single record value, exactly as the producer
// sent them (compressed as a whole message before it was cut, if at all).
type ChunkInfo struct {
	// UUID is shared by every chunk of one message.
	UUID string
	// ID is this chunk's index, of Count.
	ID, Count int32
	// TotalSize is the whole message's size as chunked.
	TotalSize int32
	// Codec is the front end's compression codec number for the whole
	// message, and UncompressedSize its size before compression.
	Codec            int8
	UncompressedSize int32
}

// SetChunk records chunk information.
func SetChunk(env *Envelope, c ChunkInfo) {
	b := make([]byte, 0, 17+len(c.UUID))
	b = binary.BigEndian.AppendUint32(b, uint32(c.ID))
	b = binary.BigEndian.AppendUint32(b, uint32(c.Count))
	b = binary.BigEndian.AppendUint32(b, uint32(c.TotalSize))
	b = append(b, byte(c.Codec))
	b = binary.BigEndian.AppendUint32(b, uint32(c.UncompressedSize))
	b = append(b, c.UUID...)
	env.Attrs = append(env.Attrs, Attr{Key: AttrChunk, Value: b})
}

// Chunk returns the entry's chunk information, if it holds a chunk.
func Chunk(env *Envelope) (ChunkInfo, bool) {
	v, ok := env.Attr(AttrChunk)
	if !ok || len(v) < 17 {
		return ChunkInfo{}, false
	}
	be := binary.BigEndian
	return ChunkInfo{
		ID:               int32(be.Uint32(v)),
		Count:            int32(be.Uint32(v[4:])),
		TotalSize:        int32(be.Uint32(v[8:])),
		Codec:            int8(v[12]),
		UncompressedSize: int32(be.Uint32(v[13:])),
		UUID:             string(v[17:]),
	}, true
}
