package protocols

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// Entry attributes that cross-region replication reads. A front end that
// lets a producer restrict where a message goes (Pulsar's replicate_to and
// disable_replication) writes AttrReplicateTo; the replicator writes
// AttrOriginEpoch when it stamps an entry's origin.
const (
	// AttrReplicateTo lists the regions an entry may be replicated to, as
	// u8 count then count x (u8 length + name). Absent: the entry follows
	// the topic's replication policy. Present: it goes only to regions both
	// in the policy and in this list, so an empty list, or one holding only
	// ReplicateLocalOnly, keeps the entry in the region it was produced in.
	AttrReplicateTo = "rto"
	// AttrOriginEpoch is the incarnation of the origin region's partition
	// (its creation time, Unix ms, as 8 bytes big-endian). Replication
	// deduplication compares origin offsets only within one incarnation, so
	// a topic deleted and created again in its origin region replicates
	// afresh instead of being taken for a run of duplicates.
	AttrOriginEpoch = "oep"
	// AttrOriginTime is the entry's append (publish) time in its origin
	// region, Unix ms, as 8 bytes big-endian. A replicated copy is stamped
	// with its own local append time; this keeps the original, so readers
	// can show the first publish time and measure replication latency.
	AttrOriginTime = "oat"
)

// ReplicateLocalOnly is the pseudo-region Pulsar clients send in
// replicate_to for a message with replication disabled.
const ReplicateLocalOnly = "__local__"

// ReplicateTo returns the regions an entry is restricted to, and false when
// it carries no restriction.
func ReplicateTo(env *Envelope) ([]string, bool, error) {
	v, ok := env.Attr(AttrReplicateTo)
	if !ok {
		return nil, false, nil
	}
	if len(v) == 0 {
		return nil, true, fmt.Errorf("%w: empty %s attribute", ErrCorruptEntry, AttrReplicateTo)
	}
	n := int(v[0])
	v = v[1:]
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		if len(v) < 1 || len(v) < 1+int(v[0]) {
			return nil, true, fmt.Errorf("%w: truncated %s attribute", ErrCorruptEntry, AttrReplicateTo)
		}
		out = append(out, string(v[1:1+int(v[0])]))
		v = v[1+int(v[0]):]
	}
	if len(v) != 0 {
		return nil, true, fmt.Errorf("%w: %d stray bytes in the %s attribute", ErrCorruptEntry, len(v), AttrReplicateTo)
	}
	return out, true, nil
}

// SetReplicateTo restricts an entry to the given regions (replacing any
// earlier restriction). nil or an empty list keeps the entry local, as does
// a list holding only ReplicateLocalOnly.
func SetReplicateTo(env *Envelope, regions []string) error {
	if len(regions) > 255 {
		return fmt.Errorf("%w: replicate_to names %d regions; at most 255", ErrCorruptEntry, len(regions))
	}
	b := []byte{byte(len(regions))}
	for _, r := range regions {
		if len(r) == 0 || len(r) > 255 {
			return fmt.Errorf("%w: replicate_to region %q must be 1 to 255 bytes", ErrCorruptEntry, r)
		}
		b = append(b, byte(len(r)))
		b = append(b, r...)
	}
	env.Attrs = slices.DeleteFunc(env.Attrs, func(a Attr) bool { return a.Key == AttrReplicateTo })
	env.Attrs = append(env.Attrs, Attr{Key: AttrReplicateTo, Value: b})
	return nil
}

// OriginEpoch returns the entry's origin incarnation, 0 when absent.
func OriginEpoch(env *Envelope) (int64, error) {
	v, ok := env.Attr(AttrOriginEpoch)
	if !ok {
		return 0, nil
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: %s attribute is %d bytes, want 8", ErrCorruptEntry, AttrOriginEpoch, len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// SetOriginEpoch records the origin incarnation (replacing any earlier one).
func SetOriginEpoch(env *Envelope, epoch int64) {
	env.Attrs = slices.DeleteFunc(env.Attrs, func(a Attr) bool { return a.Key == AttrOriginEpoch })
	env.Attrs = append(env.Attrs, Attr{Key: AttrOriginEpoch, Value: binary.BigEndian.AppendUint64(nil, uint64(epoch))})
}

// OriginTime returns the entry's append time in its origin region, and
// false when the entry carries none (it was not replicated).
func OriginTime(env *Envelope) (int64, bool, error) {
	v, ok := env.Attr(AttrOriginTime)
	if !ok {
		return 0, false, nil
	}
	if len(v) != 8 {
		return 0, true, fmt.Errorf("%w: %s attribute is %d bytes, want 8", ErrCorruptEntry, AttrOriginTime, len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), true, nil
}

// SetOriginTime records the origin append time (replacing any earlier one).
func SetOriginTime(env *Envelope, ms int64) {
	env.Attrs = slices.DeleteFunc(env.Attrs, func(a Attr) bool { return a.Key == AttrOriginTime })
	env.Attrs = append(env.Attrs, Attr{Key: AttrOriginTime, Value: binary.BigEndian.AppendUint64(nil, uint64(ms))})
}
