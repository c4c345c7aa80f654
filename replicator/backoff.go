package replicator

import (
	"math/rand/v2"
	"time"
)

// backoff yields jittered, exponentially growing redial delays: initial, 2x, 4x ... capped at
// max, each spread uniformly by +-jitter so links that broke together do not redial together.
// It is owned by one link goroutine.
type backoff struct {
	initial, max time.Duration
	jitter       float64
	next         time.Duration
	rand         func() float64 // [0,1); replaceable in tests
}

func newBackoff(initial, max time.Duration, jitter float64) *backoff {
	return &backoff{initial: initial, max: max, jitter: jitter, next: initial, rand: rand.Float64}
}

// Next returns the delay before the next attempt and doubles the base for the one after.
func (b *backoff) Next() time.Duration {
	base := b.next
	if b.next < b.max {
		b.next *= 2
		if b.next > b.max || b.next <= 0 {
			b.next = b.max
		}
	}
	d := time.Duration(float64(base) * (1 + b.jitter*(2*b.rand()-1)))
	if d < 0 {
		d = 0
	}
	return d
}

// Reset starts over from the initial delay after a link came up.
func (b *backoff) Reset() { b.next = b.initial }
