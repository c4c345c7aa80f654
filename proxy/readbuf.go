package proxy

import (
	"sync"
	"sync/atomic"
)

// Read buffers of subscriptions. A subscription reads new entries into a
// buffer, decodes them, and hands their messages to consumers without
// copying: the entries in its look-ahead buffer and entry cache, and the
// deliveries a front end has not yet encoded, all point into it. Left to
// the garbage collector, every read allocated a new buffer: a Pulsar
// consumer of 100 partitions reading a backlog allocated about 500 MB a
// second of them, and with the live heap near the soft limit the runtime
// collected about 25 times a second; the node spent 2.0-2.3 us a message,
// against 1.2 with the collector held off by a 400 MiB limit.
//
// So a readBuf counts its holders: each entry decoded from it while the
// subscription keeps the entry, and each delivery of its messages until
// the front end releases it (protocols.Delivery.Buffer). The subscription
// counts entries on its goroutine and a front end releases deliveries on
// its own; every reference is taken while the subscription still holds
// one of its entries, so the count reaches zero only once nobody can reach
// the buffer. The buffer then goes to its subscription's free list, and
// the subscription's next read hands it to the store, which reads into it
// (or into it the read after, started ahead). A front end that keeps the
// messages never releases: that buffer is collected, as before. (The
// WebSocket front end keeps them until its client has them, and does not
// release.)
//
// Buffers are freed only if little holds them: the entry caches' shares
// (dispatch.go) and the Pulsar connections' bounded queues (FullSink) keep
// that so. With all three, the consumer of 100 partitions read 0.66-0.72M
// msg/s at 1.23-1.29 us a message; without the reuse 0.57-0.58M, without
// the queue bound 0.54-0.58M, without the smaller cache shares 0.47-0.48M.
type readBuf struct {
	b    []byte
	refs atomic.Int32
	free *bufFree
}

// Release implements protocols.Releaser: it drops one reference, and
// frees the buffer with the last.
func (rb *readBuf) Release() {
	switch n := rb.refs.Add(-1); {
	case n == 0:
		rb.free.put(rb)
	case n < 0:
		// A second release of one reference: the buffer may already be
		// read into again under a holder. Stop rather than send what
		// another read wrote there.
		panic("proxy: a read buffer was released more often than it was referenced")
	}
}

// bufFree is a subscription's free read buffer: one, as each read frees
// about one, and a free buffer kept is live heap, which makes the
// collector run sooner: with two each, the consumer of 100 partitions read
// 0.46-0.48M msg/s, against 0.66-0.70M with one. Release may run on any
// goroutine.
type bufFree struct {
	mu  sync.Mutex
	buf []byte // nil when there is none
}

// poisonFreed makes put overwrite each freed buffer, and poisonNoCache
// keeps read entries out of the entry caches (PoisonFreedBuffers).
var poisonFreed, poisonNoCache atomic.Bool

// PoisonFreedBuffers makes the process's subscriptions overwrite every
// read buffer they free, at once, so that a delivery still pointing into
// one reads garbage instead of the next read's data some time later. With
// noCache they also keep no new entries for redelivery, so that a buffer
// is freed as soon as the front end releases its deliveries, and one
// released too early shows. It is for tests: it costs a pass over each
// freed buffer (the proxy package's tests run with it, the end-to-end
// tests with noCache).
func PoisonFreedBuffers(noCache bool) {
	poisonNoCache.Store(noCache)
	poisonFreed.Store(true)
}

func (f *bufFree) put(rb *readBuf) {
	b := rb.b
	rb.b = nil
	if poisonFreed.Load() {
		b = b[:cap(b)]
		for i := range b {
			b[i] = 0xEE
		}
	}
	f.mu.Lock()
	if f.buf == nil {
		f.buf = b[:0]
	}
	f.mu.Unlock()
}

// get returns the free buffer, or nil.
func (f *bufFree) get() []byte {
	f.mu.Lock()
	b := f.buf
	f.buf = nil
	f.mu.Unlock()
	return b
}

// unref drops e's reference to its read buffer, when it is dropped from
// the look-ahead buffer or the cache.
func (e *readEntry) unref() {
	if e.buf != nil {
		e.buf.Release()
		e.buf = nil
	}
}
