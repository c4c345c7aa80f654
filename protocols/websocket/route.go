package websocket

import (
	"math/rand/v2"
	"unicode/utf16"

	"github.com/twmb/murmur3"
)

// router picks the partition of each message of a producer session on a
// partitioned topic the way Pulsar's Java producer, which backs Pulsar's
// WebSocket service, does with batching off: a message with a key goes to
// hash(key) mod n, where hash is Java's String.hashCode over UTF-16 units
// (JavaStringHash, the default) or Murmur3 32-bit with seed 0
// (Murmur3_32Hash), either masked to 31 bits; a message without a key
// goes to one partition picked at random when the session opens
// (SinglePartition, the WebSocket default) or to the next partition in turn
// (RoundRobinPartition). One session's messages with the same key therefore
// land where a Java or Go client with the same settings puts them (the Go
// client agrees for keys whose hash has the top bit clear).
type router struct {
	n          int
	roundRobin bool
	murmur     bool
	single     int
	cursor     uint32
}

func newRouter(n int, mode, scheme string) *router {
	r := &router{n: n, roundRobin: mode == "RoundRobinPartition", murmur: scheme == "Murmur3_32Hash"}
	if n > 1 {
		r.single = rand.IntN(n)
		r.cursor = rand.Uint32()
	}
	return r
}

// pick is the partition index for a message with key (nil: none). Only
// the session's reading goroutine calls it.
func (r *router) pick(key []byte) int {
	if r.n <= 1 {
		return 0
	}
	if key != nil {
		var h uint32
		if r.murmur {
			h = murmur3.Sum32(key)
		} else {
			h = javaStringHash(string(key))
		}
		return int(h&0x7fffffff) % r.n
	}
	if r.roundRobin {
		p := int(r.cursor % uint32(r.n))
		r.cursor++
		return p
	}
	return r.single
}

// javaStringHash is Java's String.hashCode: s[0]*31^(n-1) + ... + s[n-1]
// over the string's UTF-16 code units, in 32-bit arithmetic.
func javaStringHash(s string) uint32 {
	var h uint32
	for _, r := range s {
		if r >= 0x10000 {
			a, b := utf16.EncodeRune(r)
			h = 31*h + uint32(a)
			h = 31*h + uint32(b)
			continue
		}
		h = 31*h + uint32(r)
	}
	return h
}
