package dedup

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/ternmq/tern/protocols"
)

// KindKafka is the localstore producer-state kind byte of Kafka idempotence.
const KindKafka byte = 0x4B

// DefaultExpiry is how long a producer's state is kept after its last
// append (Kafka's producer.id.expiration.ms default). A producer that comes
// back later is treated as unknown and may start at any sequence (KIP-360).
const DefaultExpiry = 24 * time.Hour

// sweepEvery bounds how often a partition looks for expired producers.
const sweepEvery = time.Minute

// RetainedBatches is how many batches per producer and partition are
// remembered, matching the five requests an idempotent producer may have in
// flight (Kafka's NUM_BATCHES_TO_RETAIN).
const RetainedBatches = 5

// BatchMeta is one remembered batch: its sequence range and where it landed.
type BatchMeta struct {
	FirstSeq, LastSeq int32
	BaseOffset        int64
	// Count is how many offsets the batch covers.
	Count int64
}

// State is one producer's idempotence state on one partition.
type State struct {
	Epoch int16
	// Batches are the most recent batches, oldest first, at most
	// RetainedBatches.
	Batches []BatchMeta
	// Updated is when the state last changed (Unix ms), for expiry.
	Updated int64
}

// Batch is what the check needs of an incoming batch.
type Batch struct {
	ProducerID int64
	Epoch      int16
	FirstSeq   int32
	LastSeq    int32
	// Count is how many offsets the batch covers.
	Count int64
}

// BatchOf reads the idempotence fields of a RecordBatch header. ok is
// false for batches that carry no producer id or sequence (not idempotent).
func BatchOf(h *protocols.BatchHeader) (Batch, bool) {
	if h.ProducerID < 0 || h.BaseSequence < 0 {
		return Batch{}, false
	}
	return Batch{ProducerID: h.ProducerID, Epoch: h.ProducerEpoch, FirstSeq: h.BaseSequence, LastSeq: h.LastSequence(), Count: h.OffsetCount()}, true
}

// Decision is the outcome of Check for an accepted or duplicate batch.
type Decision struct {
	// Duplicate is set for a resend of a remembered batch: nothing is to
	// be written and the batch's original offsets are BaseOffset and
	// Count.
	Duplicate  bool
	BaseOffset int64
	Count      int64
	// ProducerID and State are the producer's state after the append, to
	// persist (EncodeState) with the entry, when not Duplicate.
	ProducerID int64
	State      State
	// Expired lists producers whose state has expired, to delete in the
	// same write.
	Expired []int64
	seq     uint64
}

// Kafka is the idempotence state of one partition. Check runs under the
// partition's append lock; Commit or Abort follows once the append has been
// applied or has failed.
//
// An accepted batch's new state is pending until Commit: later checks on
// the same partition see it (a resend arriving on another connection while
// the original is being written must be recognised), but the committed
// state only moves when the write is applied. Abort drops pending state
// and goes back to the committed state; a failed write stops the store, so
// no later append can have been applied on top of it.
type Kafka struct {
	expiry    time.Duration
	lastSweep int64

	mu        sync.Mutex
	seq       uint64
	committed map[int64]State
	// committedSeq is the Check sequence of each committed state, so that
	// commits arriving out of order keep the latest.
	committedSeq map[int64]uint64
	pending      map[int64]*pendingState
}

type pendingState struct {
	state       State
	outstanding int
}

// NewKafka starts a partition's state from what was persisted. State not
// updated for expiry is dropped (0 means DefaultExpiry).
func NewKafka(loaded map[int64]State, expiry time.Duration) *Kafka {
	if loaded == nil {
		loaded = map[int64]State{}
	}
	if expiry <= 0 {
		expiry = DefaultExpiry
	}
	return &Kafka{expiry: expiry, committed: loaded, committedSeq: map[int64]uint64{}, pending: map[int64]*pendingState{}}
}

// State returns a producer's current state (pending included).
func (k *Kafka) State(producerID int64) (State, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.viewLocked(producerID)
}

func (k *Kafka) viewLocked(pid int64) (State, bool) {
	if p, ok := k.pending[pid]; ok {
		return p.state, true
	}
	s, ok := k.committed[pid]
	return s, ok
}

// Check decides about batch b, which would be appended at offset base, at
// time now (Unix ms). It returns ErrOutOfOrderSequence (a gap, or a new
// epoch not starting at 0) or ErrInvalidProducerEpoch (a fenced epoch),
// wrapped with the detail; a Decision otherwise. An accepted batch's
// Decision must be passed to Commit or Abort.
func (k *Kafka) Check(b Batch, base, now int64) (Decision, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	st, known := k.viewLocked(b.ProducerID)
	meta := BatchMeta{FirstSeq: b.FirstSeq, LastSeq: b.LastSeq, BaseOffset: base, Count: b.Count}
	var next State
	switch {
	case !known:
		// KIP-360: a producer this partition does not remember (new, or
		// its state expired) may start at any sequence.
		next = State{Epoch: b.Epoch, Batches: []BatchMeta{meta}}
	case b.Epoch < st.Epoch:
		return Decision{}, fmt.Errorf("%w: producer %d epoch %d is older than the current epoch %d", protocols.ErrInvalidProducerEpoch, b.ProducerID, b.Epoch, st.Epoch)
	case b.Epoch > st.Epoch:
		if b.FirstSeq != 0 {
			return Decision{}, fmt.Errorf("%w: producer %d starts epoch %d at sequence %d; a new epoch starts at 0", protocols.ErrOutOfOrderSequence, b.ProducerID, b.Epoch, b.FirstSeq)
		}
		next = State{Epoch: b.Epoch, Batches: []BatchMeta{meta}}
	default:
		for _, m := range st.Batches {
			if m.FirstSeq == b.FirstSeq && m.LastSeq == b.LastSeq {
				return Decision{Duplicate: true, BaseOffset: m.BaseOffset, Count: m.Count, ProducerID: b.ProducerID}, nil
			}
		}
		last := st.Batches[len(st.Batches)-1].LastSeq
		if !inSequence(last, b.FirstSeq) {
			return Decision{}, fmt.Errorf("%w: producer %d epoch %d sent sequence %d after %d; expected %d", protocols.ErrOutOfOrderSequence, b.ProducerID, b.Epoch, b.FirstSeq, last, nextSeq(last))
		}
		keep := st.Batches
		if len(keep) >= RetainedBatches {
			keep = keep[len(keep)-RetainedBatches+1:]
		}
		next = State{Epoch: b.Epoch, Batches: append(append(make([]BatchMeta, 0, len(keep)+1), keep...), meta)}
	}
	next.Updated = now
	k.seq++
	var expired []int64
	if now-k.lastSweep >= sweepEvery.Milliseconds() {
		k.lastSweep = now
		expired = k.expiredLocked(now, b.ProducerID)
	}
	p := k.pending[b.ProducerID]
	if p == nil {
		p = &pendingState{}
		k.pending[b.ProducerID] = p
	}
	p.state = next
	p.outstanding++
	return Decision{ProducerID: b.ProducerID, State: next, Expired: expired, seq: k.seq}, nil
}

// expiredLocked lists committed producers idle for longer than the expiry,
// other than except, with no append in flight.
func (k *Kafka) expiredLocked(now, except int64) []int64 {
	var out []int64
	for id, st := range k.committed {
		if _, busy := k.pending[id]; !busy && id != except && now-st.Updated > k.expiry.Milliseconds() {
			out = append(out, id)
		}
	}
	return out
}

func nextSeq(last int32) int32 {
	if last == math.MaxInt32 {
		return 0
	}
	return last + 1
}

func inSequence(last, first int32) bool { return first == nextSeq(last) }

// Commit records that d's append was applied.
func (k *Kafka) Commit(d Decision) {
	if d.Duplicate || d.seq == 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	p := k.pending[d.ProducerID]
	if d.seq > k.committedSeq[d.ProducerID] {
		k.committed[d.ProducerID] = d.State
		k.committedSeq[d.ProducerID] = d.seq
	}
	for _, id := range d.Expired {
		if _, busy := k.pending[id]; !busy {
			delete(k.committed, id)
			delete(k.committedSeq, id)
		}
	}
	if p != nil {
		p.outstanding--
		if p.outstanding <= 0 {
			delete(k.pending, d.ProducerID)
		}
	}
}

// Abort records that d's append failed: pending state goes back to the
// committed state.
func (k *Kafka) Abort(d Decision) {
	if d.Duplicate || d.seq == 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	p := k.pending[d.ProducerID]
	if p == nil {
		return
	}
	p.outstanding--
	cur, ok := k.committed[d.ProducerID]
	if !ok || p.outstanding <= 0 {
		delete(k.pending, d.ProducerID)
		return
	}
	p.state = cur
}

// ProducerKey is the producer part of the localstore key.
func ProducerKey(producerID int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(producerID))
}

// ParseProducerKey reads ProducerKey's encoding.
func ParseProducerKey(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("%w: producer key of %d bytes", ErrCorruptState, len(b))
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

// State encoding, version 1:
//
//	u8 version, i16 epoch, i64 updated, u8 n, n x (i32 first, i32 last, i64 base, i64 count)
const stateFixed = 1 + 2 + 8 + 1

const batchSize = 4 + 4 + 8 + 8

// EncodeState encodes a state to persist.
func EncodeState(s State) []byte {
	b := make([]byte, 0, stateFixed+len(s.Batches)*batchSize)
	b = append(b, 1)
	b = binary.BigEndian.AppendUint16(b, uint16(s.Epoch))
	b = binary.BigEndian.AppendUint64(b, uint64(s.Updated))
	b = append(b, byte(len(s.Batches)))
	for _, m := range s.Batches {
		b = binary.BigEndian.AppendUint32(b, uint32(m.FirstSeq))
		b = binary.BigEndian.AppendUint32(b, uint32(m.LastSeq))
		b = binary.BigEndian.AppendUint64(b, uint64(m.BaseOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(m.Count))
	}
	return b
}

// DecodeState decodes EncodeState's output; it never panics.
func DecodeState(b []byte) (State, error) {
	var s State
	if len(b) < stateFixed || b[0] != 1 {
		return s, fmt.Errorf("%w: %d bytes or unknown version", ErrCorruptState, len(b))
	}
	s.Epoch = int16(binary.BigEndian.Uint16(b[1:]))
	s.Updated = int64(binary.BigEndian.Uint64(b[3:]))
	n := int(b[11])
	if n == 0 || n > RetainedBatches || len(b) != stateFixed+n*batchSize {
		return State{}, fmt.Errorf("%w: %d batches in %d bytes", ErrCorruptState, n, len(b))
	}
	rest := b[stateFixed:]
	s.Batches = make([]BatchMeta, n)
	for i := range s.Batches {
		m := &s.Batches[i]
		m.FirstSeq = int32(binary.BigEndian.Uint32(rest))
		m.LastSeq = int32(binary.BigEndian.Uint32(rest[4:]))
		m.BaseOffset = int64(binary.BigEndian.Uint64(rest[8:]))
		m.Count = int64(binary.BigEndian.Uint64(rest[16:]))
		rest = rest[batchSize:]
	}
	return s, nil
}
