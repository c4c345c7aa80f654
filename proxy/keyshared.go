package proxy

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/twmb/murmur3"

	"github.com/ternmq/tern/protocols"
)

// Key_Shared routing. A message's sticky key is its ordering key, else its
// key, else a fixed key shared by every keyless message; its hash is
// Murmur3-32 of that key, made non-negative and taken modulo the hash range,
// the way Pulsar hashes sticky keys (so STICKY ranges that clients compute
// for a key select the same consumer here).
//
// AUTO_SPLIT places each consumer at keySharedReplicas points of a hash
// ring and gives a hash to the consumer at the first point at or after it:
// consistent hashing, so a consumer that joins or leaves moves only the
// hashes next to its own points. STICKY consumers declare their ranges, which
// must not overlap.

// keySharedReplicas is the number of ring points per AUTO_SPLIT consumer.
const keySharedReplicas = 100

// noKey is the sticky key of messages without one.
var noKey = []byte("NONE_KEY")

// stickyHash is the Key_Shared hash of a message.
func stickyHash(m *protocols.Message, x *protocols.MessageExtras) uint32 {
	k := m.Key
	if x != nil && x.OrderingKey != nil {
		k = x.OrderingKey
	}
	if len(k) == 0 {
		k = noKey
	}
	return (murmur3.Sum32(k) & 0x7fffffff) % protocols.KeyHashRange
}

type ringPoint struct {
	hash uint32
	c    *consumer
}

type stickyRange struct {
	r protocols.HashRange
	c *consumer
}

// keySelector maps hashes to consumers. It belongs to the subscription's
// goroutine.
type keySelector struct {
	mode   protocols.KeySharedMode
	ring   []ringPoint   // AUTO_SPLIT, sorted by hash
	ranges []stickyRange // STICKY, sorted by start
}

func newKeySelector(mode protocols.KeySharedMode) *keySelector {
	return &keySelector{mode: mode}
}

// add places a consumer; STICKY ranges are checked first.
func (k *keySelector) add(c *consumer) error {
	pol := c.req.KeyShared
	if pol.Mode != k.mode {
		return fmt.Errorf("%w: the subscription uses Key_Shared mode %s; this consumer asks for %s",
			protocols.ErrConsumerBusy, modeName(k.mode), modeName(pol.Mode))
	}
	if k.mode == protocols.KeySharedAutoSplit {
		for i := 0; i < keySharedReplicas; i++ {
			h := (murmur3.Sum32([]byte(strconv.FormatUint(c.id, 10)+":"+strconv.Itoa(i))) & 0x7fffffff) % protocols.KeyHashRange
			k.ring = append(k.ring, ringPoint{hash: h, c: c})
		}
		slices.SortStableFunc(k.ring, func(a, b ringPoint) int { return int(a.hash) - int(b.hash) })
		return nil
	}
	if len(pol.Ranges) == 0 {
		return fmt.Errorf("%w: a STICKY Key_Shared consumer must declare hash ranges", protocols.ErrInvalidSubscription)
	}
	for _, r := range pol.Ranges {
		if r.Start < 0 || r.End < r.Start || r.End >= protocols.KeyHashRange {
			return fmt.Errorf("%w: hash range [%d, %d]: want 0 <= start <= end < %d", protocols.ErrInvalidSubscription, r.Start, r.End, protocols.KeyHashRange)
		}
		for _, o := range k.ranges {
			if r.Start <= o.r.End && o.r.Start <= r.End {
				return fmt.Errorf("%w: range [%d, %d] overlaps [%d, %d] of consumer %q",
					protocols.ErrConsumerAssign, r.Start, r.End, o.r.Start, o.r.End, o.c.req.ConsumerName)
			}
		}
	}
	for _, r := range pol.Ranges {
		k.ranges = append(k.ranges, stickyRange{r: r, c: c})
	}
	slices.SortFunc(k.ranges, func(a, b stickyRange) int { return int(a.r.Start) - int(b.r.Start) })
	return nil
}

// remove takes a consumer out.
func (k *keySelector) remove(c *consumer) {
	k.ring = slices.DeleteFunc(k.ring, func(p ringPoint) bool { return p.c == c })
	k.ranges = slices.DeleteFunc(k.ranges, func(r stickyRange) bool { return r.c == c })
}

// pick returns the consumer that owns hash h, or nil.
func (k *keySelector) pick(h uint32) *consumer {
	if k.mode == protocols.KeySharedAutoSplit {
		if len(k.ring) == 0 {
			return nil
		}
		i, _ := slices.BinarySearchFunc(k.ring, h, func(p ringPoint, h uint32) int { return int(p.hash) - int(h) })
		if i == len(k.ring) {
			i = 0
		}
		return k.ring[i].c
	}
	i, found := slices.BinarySearchFunc(k.ranges, int32(h), func(r stickyRange, h int32) int { return int(r.r.Start) - int(h) })
	if found {
		return k.ranges[i].c
	}
	if i > 0 && k.ranges[i-1].r.End >= int32(h) {
		return k.ranges[i-1].c
	}
	return nil
}

func modeName(m protocols.KeySharedMode) string {
	if m == protocols.KeySharedSticky {
		return "STICKY"
	}
	return "AUTO_SPLIT"
}
