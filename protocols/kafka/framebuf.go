package kafka

import (
	"math/bits"
	"slices"
	"sync"
	"time"
)

// Produce frames over maxSpareFrame are read into buffers the node maps
// outside Go's heap and keeps for later frames, node-wide (smaller ones use
// their connection's spare, on the heap). A producer of many partitions sends
// requests of megabytes (kgo puts every partition's ready batch in one
// request, up to 100 MiB; 7 MB on average from a producer of 100 partitions
// at a million 1 KiB messages a second); read into fresh heap buffers, the
// runtime cleared each one (12 % of the node's CPU under that producer)
// and, with the live heap near its soft limit, collected 118-133 times in
// 10 s.
// Kept on the heap instead, the buffers held the live heap at that limit:
// 415-464 collections. Outside the heap they are neither cleared nor
// scanned, and do not count against the limit. A Produce handler copies its
// request's batches into the log before it returns, so a frame is handed
// back as soon as its handler is done.
//
// The pool keeps at most frameIdleMax bytes of buffers nobody uses, and
// unmaps any unused for frameIdleAge: a producer that stopped leaves none
// behind for long.
const (
	frameIdleMax = 64 << 20
	frameIdleAge = 10 * time.Second
	// frameMin is the smallest buffer made; larger ones are a power of two,
	// so a frame a little larger than the last still fits the next size.
	frameMin = 64 << 10
)

// frameBuf is one buffer: the whole of it, mapped outside the heap unless
// mapping failed (then it is Go's).
type frameBuf struct {
	b      []byte
	mapped bool
	idle   time.Time // when it was handed back
}

// framePool is the node's produce frame buffers not in use.
type framePool struct {
	maxIdle int
	age     time.Duration

	mu        sync.Mutex
	idle      []frameBuf // in the order they were handed back
	idleBytes int
	sweeping  bool // a sweep of old buffers is scheduled
	maps      int  // buffers mapped and not yet unmapped, for tests
}

var produceFrames = &framePool{maxIdle: frameIdleMax, age: frameIdleAge}

// get gives a buffer of at least size bytes: the smallest idle one that
// fits, or a new one.
func (p *framePool) get(size int) frameBuf {
	p.mu.Lock()
	best := -1
	for i := range p.idle {
		if n := len(p.idle[i].b); n >= size && (best < 0 || n < len(p.idle[best].b)) {
			best = i
		}
	}
	if best >= 0 {
		fb := p.idle[best]
		p.idle = slices.Delete(p.idle, best, best+1)
		p.idleBytes -= len(fb.b)
		p.mu.Unlock()
		return fb
	}
	p.mu.Unlock()
	n := max(frameMin, 1<<bits.Len(uint(size-1)))
	if b, err := mapFrame(n); err == nil {
		p.mu.Lock()
		p.maps++
		p.mu.Unlock()
		return frameBuf{b: b, mapped: true}
	}
	return frameBuf{b: make([]byte, n)}
}

// put takes back a buffer get gave; its user is done with every byte of it.
// The oldest idle buffers make room for it, and one larger than the pool
// keeps is unmapped at once.
func (p *framePool) put(fb frameBuf) {
	fb.idle = time.Now()
	var drop []frameBuf
	p.mu.Lock()
	if len(fb.b) > p.maxIdle {
		drop = append(drop, fb)
	} else {
		n := 0
		for p.idleBytes+len(fb.b) > p.maxIdle {
			p.idleBytes -= len(p.idle[n].b)
			n++
		}
		drop = append(drop, p.idle[:n]...)
		p.idle = append(slices.Delete(p.idle, 0, n), fb)
		p.idleBytes += len(fb.b)
		if !p.sweeping {
			p.sweeping = true
			time.AfterFunc(p.age, p.sweep)
		}
	}
	p.unmapLocked(drop)
	p.mu.Unlock()
}

// sweep unmaps the buffers idle for p.age, and comes back while any are
// left.
func (p *framePool) sweep() {
	p.mu.Lock()
	defer p.mu.Unlock()
	cut := time.Now().Add(-p.age)
	n := 0
	for n < len(p.idle) && !p.idle[n].idle.After(cut) {
		p.idleBytes -= len(p.idle[n].b)
		n++
	}
	p.unmapLocked(p.idle[:n])
	p.idle = slices.Delete(p.idle, 0, n)
	p.sweeping = len(p.idle) > 0
	if p.sweeping {
		time.AfterFunc(p.idle[0].idle.Sub(cut), p.sweep)
	}
}

// unmapLocked unmaps fbs' mapped buffers; p.mu is held.
func (p *framePool) unmapLocked(fbs []frameBuf) {
	for _, fb := range fbs {
		if fb.mapped {
			unmapFrame(fb.b)
			p.maps--
		}
	}
}

// stats gives the buffers mapped and the bytes idle.
func (p *framePool) stats() (maps, idleBytes int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.maps, p.idleBytes
}
