package dedup

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Layer 3: replication deduplication.
//
// A replicated entry carries its origin region, its offset in the origin
// region's partition log (OriginOffset, the entry's first message) and the
// incarnation of that partition (Epoch). For each (origin region, local
// partition) the receiving node keeps one ReplState: the incarnation seen
// last and the origin offset just past the highest entry applied from it.
//
//   - an entry of the same incarnation starting at or above Next is new: it
//     is appended and Next moves past it;
//   - one starting below Next is a copy already applied (a resend after a
//     reconnect or restart, or the same entry arriving by a second path):
//     nothing is written;
//   - one that starts below Next but ends above it would mean origin entries
//     overlap, which origin logs never do: the check fails with
//     ErrReplOverlap so the stream stops visibly instead of guessing;
//   - an entry of a newer incarnation (the topic was deleted and created
//     again in its origin region, so its offsets restarted) resets the state;
//     one of an older incarnation is stale and skipped.
//
// Gaps (an entry starting above Next) are normal: entries a policy or a
// producer's replicate_to kept from this region are never sent.

// ErrReplOverlap reports an entry that overlaps one already applied from the
// same origin, which no origin log can produce: the sender or the stored
// state is corrupt.
var ErrReplOverlap = errors.New("dedup: replicated entry overlaps an applied one")

// ErrReplState reports a persisted layer-3 state that does not decode.
var ErrReplState = errors.New("dedup: corrupt replication state")

// ReplEntry is what the check needs of an incoming replicated entry.
type ReplEntry struct {
	// Epoch is the origin partition's incarnation (0 if unknown).
	Epoch int64
	// Offset is the entry's first offset in the origin partition's log.
	Offset int64
	// Count is how many offsets the entry covers (at least 1).
	Count int64
}

// End is the origin offset just past the entry.
func (e ReplEntry) End() int64 { return e.Offset + e.Count }

// ReplState is the layer-3 state of one (origin region, partition). The zero
// value is the state before anything was applied.
type ReplState struct {
	// Epoch is the incarnation of the origin partition Next refers to.
	Epoch int64
	// Next is the origin offset just past the highest entry applied.
	Next int64
	// LocalBase and LocalCount say where that entry landed in the local
	// log, so a duplicate can be answered with a real position.
	LocalBase, LocalCount int64
}

// ReplVerdict is the outcome of a check.
type ReplVerdict uint8

const (
	// ReplApply: the entry is new; append it and persist Applied's state.
	ReplApply ReplVerdict = iota + 1
	// ReplDuplicate: the entry was applied before; write nothing.
	ReplDuplicate
	// ReplStale: the entry belongs to an older incarnation of the origin
	// partition than one already applied; write nothing.
	ReplStale
)

var verdictNames = [...]string{ReplApply: "apply", ReplDuplicate: "duplicate", ReplStale: "stale"}

func (v ReplVerdict) String() string {
	if int(v) < len(verdictNames) && verdictNames[v] != "" {
		return verdictNames[v]
	}
	return fmt.Sprintf("verdict(%d)", uint8(v))
}

// Check decides what to do with an entry given the state.
func (s ReplState) Check(e ReplEntry) (ReplVerdict, error) {
	if e.Count < 1 || e.Offset < 0 {
		return 0, fmt.Errorf("dedup: replicated entry at origin offset %d with %d offsets is invalid", e.Offset, e.Count)
	}
	switch {
	case e.Epoch > s.Epoch:
		return ReplApply, nil
	case e.Epoch < s.Epoch:
		return ReplStale, nil
	case e.End() <= s.Next:
		return ReplDuplicate, nil
	case e.Offset < s.Next:
		return 0, fmt.Errorf("%w: entry covers origin offsets %d to %d, but offsets up to %d were applied already",
			ErrReplOverlap, e.Offset, e.End()-1, s.Next-1)
	}
	return ReplApply, nil
}

// Applied is the state after applying e at local offset localBase.
func (s ReplState) Applied(e ReplEntry, localBase int64) ReplState {
	return ReplState{Epoch: e.Epoch, Next: e.End(), LocalBase: localBase, LocalCount: e.Count}
}

const replStateVersion = 1

// replStateLen is the encoded length: a version byte and four int64s.
const replStateLen = 1 + 4*8

// Encode is the persisted form of the state (the value under
// localstore.ReplHWMKey).
func (s ReplState) Encode() []byte {
	b := make([]byte, 0, replStateLen)
	b = append(b, replStateVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(s.Epoch))
	b = binary.BigEndian.AppendUint64(b, uint64(s.Next))
	b = binary.BigEndian.AppendUint64(b, uint64(s.LocalBase))
	return binary.BigEndian.AppendUint64(b, uint64(s.LocalCount))
}

// DecodeReplState reads a persisted state.
func DecodeReplState(b []byte) (ReplState, error) {
	if len(b) != replStateLen || b[0] != replStateVersion {
		return ReplState{}, fmt.Errorf("%w: %d bytes, version %d (want %d bytes, version %d)",
			ErrReplState, len(b), first(b), replStateLen, replStateVersion)
	}
	s := ReplState{
		Epoch:      int64(binary.BigEndian.Uint64(b[1:])),
		Next:       int64(binary.BigEndian.Uint64(b[9:])),
		LocalBase:  int64(binary.BigEndian.Uint64(b[17:])),
		LocalCount: int64(binary.BigEndian.Uint64(b[25:])),
	}
	if s.Next < 0 || s.LocalBase < 0 || s.LocalCount < 0 {
		return ReplState{}, fmt.Errorf("%w: negative offset in %+v", ErrReplState, s)
	}
	return s, nil
}

func first(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	return int(b[0])
}
