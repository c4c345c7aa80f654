package dedup

import (
	"encoding/binary"
	"fmt"
)

// Layer 1: Pulsar producer deduplication.
//
// A Pulsar producer numbers its messages with sequence ids that only grow
// and, when deduplication is on, resumes after a reconnect or a broker
// restart from the highest id the broker reports as persisted. An entry is a
// resend when its first sequence id is at or below the highest one already
// stored for the producer's name; the broker then writes nothing and answers
// with a receipt, as Pulsar does. A batch carries the first message's id and
// the highest one (SequenceFirst and SequenceLast of the envelope); the
// highest is what the producer resumes from.
//
// The state per partition is a map from producer name to the highest
// sequence id and the offsets of the entry that carried it, so that a resend
// of the latest entry is answered with its real position. Resends of older
// entries get no position (-1), which is also what Pulsar answers.

// PulsarKind is the producer-state kind byte (localstore.ProducerKey) of
// layer 1. The Kafka idempotence layer uses a different byte.
const PulsarKind byte = 'p'

// PulsarState is what is persisted per producer name and partition.
type PulsarState struct {
	// Sequence is the highest sequence id stored for the name.
	Sequence int64
	// Base and Last are the first and last offsets of the entry that
	// carried Sequence.
	Base, Last int64
}

const pulsarStateVersion = 1

// Encode returns the stored form: u8 version, i64 sequence, i64 base,
// i64 last, big-endian.
func (s PulsarState) Encode() []byte {
	b := make([]byte, 0, 25)
	b = append(b, pulsarStateVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(s.Sequence))
	b = binary.BigEndian.AppendUint64(b, uint64(s.Base))
	return binary.BigEndian.AppendUint64(b, uint64(s.Last))
}

// DecodePulsarState decodes a stored state.
func DecodePulsarState(b []byte) (PulsarState, error) {
	if len(b) != 25 || b[0] != pulsarStateVersion {
		return PulsarState{}, fmt.Errorf("%w: Pulsar producer record of %d bytes", ErrCorruptState, len(b))
	}
	return PulsarState{
		Sequence: int64(binary.BigEndian.Uint64(b[1:])),
		Base:     int64(binary.BigEndian.Uint64(b[9:])),
		Last:     int64(binary.BigEndian.Uint64(b[17:])),
	}, nil
}

// PulsarVerdict is the decision for one entry.
type PulsarVerdict struct {
	// Duplicate is set when the entry is a resend and must not be written.
	Duplicate bool
	// Base and Last are the original entry's offsets when the resend is of
	// the latest entry stored for the name, else -1.
	Base, Last int64
}

// PulsarProducers is the layer-1 state of one partition. It is not safe for
// concurrent use: the caller holds the partition's append lock.
type PulsarProducers struct {
	names map[string]PulsarState
}

// NewPulsarProducers returns an empty state.
func NewPulsarProducers() *PulsarProducers {
	return &PulsarProducers{names: map[string]PulsarState{}}
}

// Load installs a state read back from storage.
func (p *PulsarProducers) Load(name string, s PulsarState) { p.names[name] = s }

// Last is the highest sequence id stored for name, or -1.
func (p *PulsarProducers) Last(name string) int64 {
	if s, ok := p.names[name]; ok {
		return s.Sequence
	}
	return -1
}

// Check decides whether an entry of producer name with sequence ids
// first..last is a resend.
func (p *PulsarProducers) Check(name string, first, last int64) PulsarVerdict {
	s, ok := p.names[name]
	if !ok || first > s.Sequence {
		return PulsarVerdict{Base: -1, Last: -1}
	}
	v := PulsarVerdict{Duplicate: true, Base: -1, Last: -1}
	if last == s.Sequence {
		v.Base, v.Last = s.Base, s.Last
	}
	return v
}

// Record notes that an entry with sequence ids up to last landed at offsets
// base..lastOffset and returns the state to persist with it. The stored
// sequence never goes back.
func (p *PulsarProducers) Record(name string, last, base, lastOffset int64) PulsarState {
	s := PulsarState{Sequence: last, Base: base, Last: lastOffset}
	if old, ok := p.names[name]; ok && old.Sequence > last {
		s = old
	}
	p.names[name] = s
	return s
}

// State returns the state stored for name.
func (p *PulsarProducers) State(name string) (PulsarState, bool) {
	s, ok := p.names[name]
	return s, ok
}

// Restore puts back a state returned by State (or forgets the name when
// it had none), for an append that failed before it was written.
func (p *PulsarProducers) Restore(name string, s PulsarState, had bool) {
	if had {
		p.names[name] = s
	} else {
		delete(p.names, name)
	}
}

// Len is the number of producer names tracked.
func (p *PulsarProducers) Len() int { return len(p.names) }
