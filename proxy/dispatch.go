package proxy

import (
	"container/heap"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ternmq/tern/localstore"
	"github.com/ternmq/tern/protocols"
)

// Dispatch. The goroutine run owns a subscription. After every event (a
// command, new entries, a timer) it calls dispatch, which pushes as much as
// the consumers' permits allow:
//
//  1. Redeliveries first (the replay set), oldest offset first, re-read from
//     the log through a small cache of decoded entries.
//  2. Then new entries from the read position, decoded into a short
//     look-ahead buffer that keeps entries no consumer could take yet.
//
// When the read position reaches the high watermark and a consumer still
// has permits, the helper goroutine waiter blocks in Store.Wait and posts a
// wake-up when the log grows. Entries are never dispatched past the high
// watermark, so consumers see only durable entries.

const (
	// fetchBytes bounds one read of new entries; with many subscriptions
	// loaded, each reads its share of fetchNodeBytes, at least
	// fetchMinBytes. A subscription keeps the rest of its last read, and
	// the buffer it was read into, until it has dispatched it: 100
	// subscriptions reading backlogs in 1 MiB reads kept 174 MB of read
	// buffers live.
	fetchBytes     = 1 << 20
	fetchNodeBytes = 16 << 20
	fetchMinBytes  = 64 << 10
	// maxReplayScan bounds the entries read for redeliveries per pass.
	maxReplayScan = 256
	// maxReplay stops Key_Shared from reading ahead while this many
	// messages wait for busy consumers.
	maxReplay = 20000
	// maxUnits bounds the delivery table; older deliveries then fall back
	// to the entry bounds in the log.
	maxUnits = 1 << 16
)

// readEntry is a decoded entry.
type readEntry struct {
	base, count int64
	env         protocols.Envelope
	msgs        []protocols.Message
	extras      []protocols.MessageExtras
	// skip marks entries never delivered: control batches (transaction
	// markers) and entries that cannot be decoded.
	skip bool
	// hashes are the Key_Shared sticky hashes, computed on first use.
	hashes []uint32
	// size is the bytes the entry keeps from being collected: the stored
	// entry (and the read buffer it lies in), and its messages when they
	// were decompressed into a buffer of their own.
	size int
	// buf is the read buffer the entry lies in, while the entry holds a
	// reference to it (readbuf.go); nil for entries read for redelivery.
	buf *readBuf
}

func (e *readEntry) end() int64 { return e.base + e.count }

func (e *readEntry) hash(i int64) uint32 {
	if e.hashes == nil {
		e.hashes = make([]uint32, len(e.msgs))
		for j := range e.msgs {
			e.hashes[j] = stickyHash(&e.msgs[j], &e.extras[j])
		}
	}
	return e.hashes[i-e.base]
}

// decodeEntry decodes a stored entry for dispatch.
func decodeEntry(se protocols.StoredEntry) (*readEntry, error) {
	re := &readEntry{base: se.BaseOffset, count: se.Count, size: len(se.Value)}
	e, err := protocols.DecodeStoredEntry(se.Value)
	if err != nil {
		re.skip = true
		return re, err
	}
	re.env = e.Envelope
	if e.Header.Control() {
		re.skip = true
		return re, nil
	}
	var d *protocols.Decompressor
	if e.Header.Codec() != protocols.CodecNone {
		// A fresh decompressor per entry: the messages alias its buffer
		// and go out with the delivery.
		d = &protocols.Decompressor{}
	}
	msgs, err := protocols.Records(e.Batch, e.Header, d)
	if err == nil && int64(len(msgs)) != se.Count {
		err = protocols.ErrCorruptBatch
	}
	if err != nil {
		re.skip = true
		return re, err
	}
	re.msgs = msgs
	if d != nil {
		for i := range msgs {
			re.size += len(msgs[i].Key) + len(msgs[i].Value)
		}
	}
	if re.extras, err = protocols.MessageExtrasOf(&re.env, len(msgs)); err != nil {
		re.skip = true
		return re, err
	}
	return re, nil
}

// entryCache keeps recently decoded entries for redeliveries, at most
// entryCacheSize of them and, in bytes, the share of entryCacheBytes its
// subscription has.
type entryCache struct {
	m     map[int64]*readEntry
	order []int64
	bytes int
}

// The caches' bounds. The bytes bound matters for batched entries, each of
// which keeps its read buffer (1 MiB) from being collected: with a bound
// in entries alone, a consumer of 10 partitions reading a backlog of
// Pulsar batches of 128 KiB had 113 MiB of read buffers live, over Go's
// 72 MiB soft limit, and the runtime collected continuously. The node's
// subscriptions share entryCacheBytes, each at least entryCacheMinBytes:
// one subscription alone keeps as much as before (64 such batches), and
// many keep little each. A cached entry also keeps its read buffer from
// being reused (readbuf.go): with 256 KiB each, 100 subscriptions kept
// 25 MiB cached, and their buffers were seldom free; at 64 KiB (at least
// one entry each, as an entry larger than the share is kept alone) a
// Pulsar consumer of 100 partitions read 0.66-0.72M msg/s against
// 0.47-0.48M.
const (
	entryCacheSize     = 64
	entryCacheBytes    = 8 << 20
	entryCacheMinBytes = 64 << 10
)

func (c *entryCache) init() { c.m = map[int64]*readEntry{} }

// put adds e, dropping the oldest entries while the cache holds
// entryCacheSize entries or more than maxBytes with e. An entry larger
// than maxBytes is kept alone. It reports whether it kept e: not when
// the cache holds an entry at e's offset already.
func (c *entryCache) put(e *readEntry, maxBytes int) bool {
	if _, ok := c.m[e.base]; ok {
		return false
	}
	for len(c.order) > 0 && (len(c.order) >= entryCacheSize || c.bytes+e.size > maxBytes) {
		old := c.m[c.order[0]]
		c.bytes -= old.size
		old.unref()
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
	c.m[e.base] = e
	c.order = append(c.order, e.base)
	c.bytes += e.size
	return true
}

// readBytes is how much s reads of new entries at a time.
func (s *subscription) readBytes() int {
	return max(fetchMinBytes, min(fetchBytes, fetchNodeBytes/max(1, int(s.reg.loadedN.Load()))))
}

// cacheBytes is s's share of entryCacheBytes.
func (s *subscription) cacheBytes() int {
	return max(entryCacheMinBytes, entryCacheBytes/max(1, int(s.reg.loadedN.Load())))
}

// find returns the cached entry holding off.
func (c *entryCache) find(off int64) *readEntry {
	for _, e := range c.m {
		if e.base <= off && off < e.end() {
			return e
		}
	}
	return nil
}

// reset drops every entry.
func (c *entryCache) reset() {
	for _, e := range c.m {
		e.unref()
	}
	c.init()
	c.order, c.bytes = nil, 0
}

// run is the subscription's goroutine.
func (s *subscription) run() {
	defer s.reg.wg.Done()
	defer close(s.done)
	defer s.cancel()
	for {
		select {
		case f := <-s.cmds:
			f()
		case err := <-s.wakeCh:
			s.waiting = false
			if err != nil && s.ctx.Err() == nil {
				s.failed(err)
			}
		case <-s.saveTimer.C:
			s.saveArmed = false
			s.save()
		case <-s.delayTimer.C:
			s.delayArmed = false
			s.releaseDelayed()
		case <-s.ackTimer.C:
			s.ackArmed = false
			s.expireAcks()
		}
		if s.ending {
			s.finish()
			return
		}
		s.dispatch()
		if s.ending {
			s.finish()
			return
		}
	}
}

// waiter blocks in Store.Wait on behalf of run.
func (s *subscription) waiter() {
	defer s.reg.wg.Done()
	for {
		select {
		case <-s.ctx.Done():
			return
		case off := <-s.waitReq:
			err := s.n.store.Wait(s.ctx, []localstore.Watch{{PID: s.key.pid, Offset: off}})
			if s.ctx.Err() != nil {
				return
			}
			select {
			case s.wakeCh <- mapStoreErr(err):
			case <-s.ctx.Done():
				return
			}
		}
	}
}

// failed ends the subscription after a storage error: the partition is
// gone (topic deleted) or the store is closing or broken.
func (s *subscription) failed(err error) {
	switch {
	case errors.Is(err, protocols.ErrPartitionNotFound), errors.Is(err, protocols.ErrTopicNotFound):
		s.beginEnd(protocols.ErrTopicNotFound)
		s.durable = false // nothing left to save
	case errors.Is(err, protocols.ErrClosed):
		s.beginEnd(protocols.ErrClosed)
	default:
		s.n.log.Error("subscription stopped by a storage error", "topic", s.part.Name().String(), "subscription", s.name, "err", err)
		s.beginEnd(err)
	}
}

// beginEnd ends every consumer with err; run then exits.
func (s *subscription) beginEnd(err error) {
	if s.ending {
		return
	}
	s.ending = true
	s.endErr = err
	s.reg.forget(s)
	for _, c := range s.consumers {
		s.endConsumer(c, err)
	}
	s.consumers = nil
}

// finish saves the cursor and stops the timers.
func (s *subscription) finish() {
	s.save()
	s.saveTimer.Stop()
	s.delayTimer.Stop()
	s.ackTimer.Stop()
}

func (s *subscription) endConsumer(c *consumer, err error) {
	if c.gone.Swap(true) {
		return
	}
	c.sink.Ended(err)
}

// attach adds a consumer (on the goroutine).
func (s *subscription) attach(req protocols.SubscribeRequest, sink protocols.ConsumerSink) (*consumer, error) {
	if s.ending {
		return nil, errSubGone
	}
	if len(s.consumers) == 0 && req.Type != s.typ {
		s.typ = req.Type
		s.keys = nil
		s.props[propType] = s.typ.String()
		s.dirty = true
	}
	if req.Type != s.typ {
		return nil, errorf(protocols.ErrConsumerBusy, "subscription %q is %s; a %s consumer cannot join it while it has consumers",
			s.name, s.typ, req.Type)
	}
	if s.typ == protocols.SubExclusive && len(s.consumers) > 0 {
		return nil, errorf(protocols.ErrConsumerBusy, "exclusive subscription %q already has consumer %q", s.name, s.consumers[0].req.ConsumerName)
	}
	c := &consumer{id: s.reg.nextID.Add(1), req: req, sink: sink}
	c.full, _ = sink.(protocols.FullSink)
	if s.typ == protocols.SubKeyShared {
		if s.keys == nil || len(s.consumers) == 0 {
			s.keys = newKeySelector(req.KeyShared.Mode)
		}
		if err := s.keys.add(c); err != nil {
			return nil, err
		}
	}
	s.consumers = append(s.consumers, c)
	switch s.typ {
	case protocols.SubExclusive, protocols.SubFailover:
		if !s.elect() && s.active != c {
			sink.ActiveChanged(false)
		}
	}
	return c, nil
}

// detach removes a consumer and hands back what it held.
func (s *subscription) detach(c *consumer, err error) {
	i := slices.Index(s.consumers, c)
	if i < 0 {
		return
	}
	s.consumers = slices.Delete(s.consumers, i, i+1)
	if err != nil {
		s.endConsumer(c, err)
	} else {
		c.gone.Store(true)
	}
	s.handBack(c, false)
	c.timeouts = nil
	if s.keys != nil {
		s.keys.remove(c)
	}
	if s.active == c {
		s.active = nil
	}
	if s.typ == protocols.SubExclusive || s.typ == protocols.SubFailover {
		s.elect()
	}
	if len(s.consumers) == 0 && !s.durable {
		s.beginEnd(nil)
	}
}

// handBack moves a consumer's unacknowledged messages to the replay set,
// counting a redelivery when count is set.
func (s *subscription) handBack(c *consumer, count bool) {
	for _, sp := range c.pending.spans {
		s.requeue(sp.from, sp.to, count)
	}
	c.pending.clear()
}

// requeue puts the unacknowledged offsets of [from, to) up for
// redelivery.
func (s *subscription) requeue(from, to int64, count bool) {
	s.release(from, to)
	for o := from; o < to; o++ {
		if s.cursor.IsAcked(o) {
			continue
		}
		s.replay.add(o, o+1)
		if count {
			s.redeliveries[o]++
		}
	}
}

// elect picks the active consumer of an Exclusive or Failover
// subscription and reports whether it changed.
func (s *subscription) elect() bool {
	var a *consumer
	if len(s.consumers) > 0 {
		sorted := slices.Clone(s.consumers)
		slices.SortStableFunc(sorted, func(x, y *consumer) int {
			if x.req.PriorityLevel != y.req.PriorityLevel {
				return int(x.req.PriorityLevel - y.req.PriorityLevel)
			}
			return strings.Compare(x.req.ConsumerName, y.req.ConsumerName)
		})
		i := 0
		if s.part.Index >= 0 {
			i = s.part.Index % len(sorted)
		}
		a = sorted[i]
	}
	if a == s.active {
		return false
	}
	old := s.active
	s.active = a
	if old != nil && !old.gone.Load() {
		old.sink.ActiveChanged(false)
		s.handBack(old, false)
	}
	if a != nil {
		a.sink.ActiveChanged(true)
	}
	return true
}

// anyPermits reports whether some consumer can take a message.
func (s *subscription) anyPermits() bool {
	for _, c := range s.consumers {
		if c.canSend() {
			return true
		}
	}
	return false
}

// dispatch pushes what the permits allow.
func (s *subscription) dispatch() {
	if len(s.consumers) == 0 || !s.anyPermits() {
		return
	}
	blocked := map[uint32]bool{}
	complete := true
	if !s.replay.empty() {
		complete = s.dispatchReplay(blocked)
	}
	if s.typ == protocols.SubKeyShared {
		if !complete || s.replay.count() > maxReplay {
			return
		}
	} else if !s.replay.empty() {
		return
	}
	s.dispatchNew(blocked)
}

// entry returns the decoded entry holding off, from the look-ahead buffer,
// the cache or the log; nil when the offset is gone from the log.
func (s *subscription) entry(off int64) *readEntry {
	for _, e := range s.ahead {
		if e.base <= off && off < e.end() {
			return e
		}
	}
	if e := s.cache.find(off); e != nil {
		return e
	}
	es, err := s.n.store.Read(s.key.pid, off, 1)
	if err != nil || len(es) == 0 {
		var oor *protocols.OffsetOutOfRangeError
		if err != nil && !errors.As(err, &oor) {
			s.failed(mapStoreErr(err))
		}
		return nil
	}
	e, derr := decodeEntry(es[0])
	if derr != nil {
		s.n.log.Error("undecodable entry skipped by subscription", "topic", s.part.Name().String(), "subscription", s.name, "offset", e.base, "err", derr)
	}
	// Not kept when the cache holds this offset: it was looked up above.
	s.cache.put(e, s.cacheBytes())
	return e
}

// dispatchReplay delivers redeliveries. It reports whether it looked at the
// whole replay set; undelivered Key_Shared hashes are added to blocked so
// newer messages of the same keys wait behind them.
func (s *subscription) dispatchReplay(blocked map[uint32]bool) bool {
	scanned := 0
	off := s.replay.spans[0].from
	for !s.ending {
		sps := s.replay.intersect(off, 1<<62)
		if len(sps) == 0 {
			return true
		}
		off = sps[0].from
		if scanned >= maxReplayScan || !s.anyPermits() {
			return false
		}
		e := s.entry(off)
		scanned++
		if s.ending {
			return false
		}
		if e == nil || e.skip {
			// Gone by retention, or never deliverable: settle it.
			end := off + 1
			if e != nil {
				end = e.end()
			}
			s.replay.remove(off, end)
			s.cursor.Ack(off, end)
			s.dirty = true
			off = end
			continue
		}
		for _, sp := range s.replay.intersect(e.base, e.end()) {
			s.place(e, sp.from, sp.to, blocked, true)
		}
		off = e.end()
	}
	return false
}

// dispatchNew delivers entries from the read position.
func (s *subscription) dispatchNew(blocked map[uint32]bool) {
	for !s.ending && s.anyPermits() {
		e := s.next()
		if e == nil {
			return
		}
		from := max(e.base, s.readPos)
		if !e.skip && !s.canTake() {
			return // keep the entry for when a consumer has permits
		}
		s.ahead[0] = nil
		s.ahead = s.ahead[1:]
		s.readPos = e.end()
		if e.skip {
			e.unref()
			s.cursor.Ack(from, e.end())
			s.dirty = true
			continue
		}
		if at, ok := protocols.DeliverAt(&e.env); ok && at > s.n.now().UnixMilli() &&
			(s.typ == protocols.SubShared || s.typ == protocols.SubKeyShared) {
			e.unref() // the delay queue keeps offsets; they are read again
			s.delay(e, from, at)
			continue
		}
		// Tests of front ends keep entries out of the cache, so that a
		// buffer is freed as soon as its deliveries are released
		// (PoisonFreedBuffers).
		kept := !poisonNoCache.Load() && s.cache.put(e, s.cacheBytes())
		for _, sp := range s.unackedRuns(from, e.end()) {
			s.place(e, sp.from, sp.to, blocked, false)
		}
		if !kept {
			e.unref() // after place: its deliveries hold their own references
		}
	}
}

// next returns the entry at the read position, reading ahead from the log
// when the buffer is empty; nil when there is none yet (the waiter is
// armed).
func (s *subscription) next() *readEntry {
	if len(s.ahead) > 0 {
		return s.ahead[0]
	}
	start, hw, err := s.n.store.Offsets(s.key.pid)
	if err != nil {
		s.failed(mapStoreErr(err))
		return nil
	}
	if s.readPos < start {
		s.cursor.AckUpTo(start)
		s.replay.removeBelow(start)
		s.readPos = start
		s.dirty = true
	}
	if s.readPos >= hw {
		s.armWait()
		return nil
	}
	// Read on: a subscription behind the high watermark has its next
	// reads started ahead. It hands the store a buffer that its entries
	// and deliveries no longer hold, when it has one (readbuf.go).
	spare := s.free.get()
	s.reg.reads.Add(1)
	if spare != nil {
		s.reg.bufReused.Add(1)
	}
	es, b, err := s.n.store.ReadOn(s.key.pid, s.readPos, s.readBytes(), spare)
	if err != nil {
		var oor *protocols.OffsetOutOfRangeError
		if errors.As(err, &oor) {
			return nil // retention moved the start; the next pass catches up
		}
		s.failed(mapStoreErr(err))
		return nil
	}
	rb := &readBuf{b: b, free: &s.free}
	rb.refs.Store(int32(len(es)))
	for _, se := range es {
		e, derr := decodeEntry(se)
		if derr != nil {
			s.n.log.Error("undecodable entry skipped by subscription", "topic", s.part.Name().String(), "subscription", s.name, "offset", se.BaseOffset, "err", derr)
		}
		e.buf = rb
		s.ahead = append(s.ahead, e)
	}
	if len(es) == 0 && cap(b) > 0 {
		s.free.put(rb)
	}
	if len(s.ahead) == 0 {
		s.armWait()
		return nil
	}
	return s.ahead[0]
}

func (s *subscription) armWait() {
	if s.waiting {
		return
	}
	s.waiting = true
	select {
	case s.waitReq <- s.readPos:
	default:
	}
}

// unackedRuns splits [from, to) into runs of unacknowledged offsets.
func (s *subscription) unackedRuns(from, to int64) []span {
	var out []span
	if from < s.cursor.MarkDelete {
		from = s.cursor.MarkDelete
	}
	start := int64(-1)
	for o := from; o < to; o++ {
		if s.cursor.IsAcked(o) {
			if start >= 0 {
				out = append(out, span{start, o})
				start = -1
			}
			continue
		}
		if start < 0 {
			start = o
		}
	}
	if start >= 0 {
		out = append(out, span{start, to})
	}
	return out
}

// canSend reports whether c can take a message now: it has permits, and
// its sink has room (protocols.FullSink).
func (c *consumer) canSend() bool {
	return c.permits > 0 && (c.full == nil || !c.full.Full())
}

// canTake reports whether a new entry can go out now.
func (s *subscription) canTake() bool {
	switch s.typ {
	case protocols.SubExclusive, protocols.SubFailover:
		return s.active != nil && s.active.canSend()
	}
	return s.anyPermits()
}

// pick chooses the consumer for the next non-Key_Shared delivery.
func (s *subscription) pick() *consumer {
	switch s.typ {
	case protocols.SubExclusive, protocols.SubFailover:
		if s.active != nil && s.active.canSend() {
			return s.active
		}
		return nil
	}
	best := int32(1<<31 - 1)
	found := false
	for _, c := range s.consumers {
		if c.canSend() && c.req.PriorityLevel <= best {
			best, found = c.req.PriorityLevel, true
		}
	}
	if !found {
		return nil
	}
	n := len(s.consumers)
	for i := 0; i < n; i++ {
		c := s.consumers[(s.rr+i)%n]
		if c.canSend() && c.req.PriorityLevel == best {
			s.rr = (s.rr + i + 1) % n
			return c
		}
	}
	return nil
}

// place delivers the unacknowledged offsets of [from, to) of e, or puts
// what cannot go out now in the replay set. fromReplay says the offsets
// are in the replay set already.
func (s *subscription) place(e *readEntry, from, to int64, blocked map[uint32]bool, fromReplay bool) {
	if s.typ != protocols.SubKeyShared {
		for _, sp := range s.unackedRuns(from, to) {
			c := s.pick()
			if c == nil {
				if !fromReplay {
					s.replay.add(sp.from, sp.to)
				}
				continue
			}
			s.deliver(c, e, sp.from, sp.to)
		}
		return
	}
	// Key_Shared: runs of consecutive messages with the same target.
	type run struct {
		c        *consumer
		from, to int64
		ok       bool
	}
	var runs []run
	for o := from; o < to; o++ {
		if s.cursor.IsAcked(o) {
			continue
		}
		h := e.hash(o)
		c := s.keys.pick(h)
		ok := c != nil && c.canSend() && !blocked[h] && !s.draining(c, h)
		if !ok {
			blocked[h] = true
		}
		if n := len(runs); n > 0 && runs[n-1].to == o && runs[n-1].c == c && runs[n-1].ok == ok {
			runs[n-1].to = o + 1
			continue
		}
		runs = append(runs, run{c: c, from: o, to: o + 1, ok: ok})
	}
	for _, r := range runs {
		if !r.ok {
			if !fromReplay {
				s.replay.add(r.from, r.to)
			}
			continue
		}
		s.deliver(r.c, e, r.from, r.to)
	}
}

// heldMsg is a Key_Shared message out with a consumer.
type heldMsg struct {
	hash uint32
	c    *consumer
}

// draining reports whether another consumer still holds messages of hash
// h: a hash that moved to c (a consumer joined or left) reaches c only once
// its previous holder has acknowledged or handed back all of them, so no
// key is processed out of order across consumers.
func (s *subscription) draining(c *consumer, h uint32) bool {
	if c.req.KeyShared.AllowOutOfOrder {
		return false
	}
	for holder, n := range s.holders[h] {
		if holder != c && n > 0 {
			return true
		}
	}
	return false
}

// hold records Key_Shared messages delivered to c.
func (s *subscription) hold(c *consumer, e *readEntry, from, to int64) {
	for o := from; o < to; o++ {
		h := e.hash(o)
		if old, ok := s.held[o]; ok {
			s.unhold(o, old)
		}
		s.held[o] = heldMsg{hash: h, c: c}
		m := s.holders[h]
		if m == nil {
			m = map[*consumer]int{}
			s.holders[h] = m
		}
		m[c]++
	}
}

// release forgets the holders of [from, to): the messages were acknowledged
// or handed back.
func (s *subscription) release(from, to int64) {
	if len(s.held) == 0 {
		return
	}
	if to-from > int64(len(s.held)) {
		for o, hm := range s.held {
			if o >= from && o < to {
				s.unhold(o, hm)
			}
		}
		return
	}
	for o := from; o < to; o++ {
		if hm, ok := s.held[o]; ok {
			s.unhold(o, hm)
		}
	}
}

func (s *subscription) unhold(o int64, hm heldMsg) {
	delete(s.held, o)
	if m := s.holders[hm.hash]; m != nil {
		if m[hm.c]--; m[hm.c] <= 0 {
			delete(m, hm.c)
		}
		if len(m) == 0 {
			delete(s.holders, hm.hash)
		}
	}
}

// deliver pushes [from, to) of e to c.
func (s *subscription) deliver(c *consumer, e *readEntry, from, to int64) {
	i, j := from-e.base, to-e.base
	d := protocols.Delivery{
		Offset:      from,
		Messages:    e.msgs[i:j:j],
		Extras:      e.extras[i:j:j],
		Envelope:    e.env,
		EntryOffset: e.base,
		EntryCount:  len(e.msgs),
	}
	if e.buf != nil {
		e.buf.refs.Add(1) // while e holds one: the count is above zero
		d.Buffer = e.buf
	}
	for o := from; o < to; o++ {
		d.RedeliveryCount = max(d.RedeliveryCount, s.redeliveries[o])
	}
	s.replay.remove(from, to)
	c.permits -= to - from
	c.pending.add(from, to)
	if s.typ == protocols.SubKeyShared {
		s.hold(c, e, from, to)
	}
	if s.durable {
		if len(s.units) >= maxUnits {
			s.pruneUnits()
		}
		if len(s.units) < maxUnits {
			s.units[from] = to
		}
	}
	if t := c.req.AckTimeout; t > 0 {
		c.timeouts = append(c.timeouts, ackDeadline{from: from, to: to, at: time.Now().Add(t)})
		s.armAckTimer()
	}
	c.sink.Deliver(d)
}

// pruneUnits drops deliveries that are fully acknowledged.
func (s *subscription) pruneUnits() {
	for from, to := range s.units {
		if s.fullyAcked(from, to) {
			delete(s.units, from)
		}
	}
}

// fullyAcked reports whether every offset of [from, to) is acknowledged.
func (s *subscription) fullyAcked(from, to int64) bool {
	if to <= s.cursor.MarkDelete {
		return true
	}
	from = max(from, s.cursor.MarkDelete)
	for _, r := range s.cursor.Acked {
		if r.From <= from && r.To >= to {
			return true
		}
	}
	return false
}

// delayQueue holds messages whose delivery time lies ahead.
type delayQueue []delayed

type delayed struct {
	at       int64
	from, to int64
}

func (q delayQueue) Len() int           { return len(q) }
func (q delayQueue) Less(i, j int) bool { return q[i].at < q[j].at }
func (q delayQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *delayQueue) Push(x any)        { *q = append(*q, x.(delayed)) }
func (q *delayQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

func (s *subscription) delay(e *readEntry, from, at int64) {
	for _, sp := range s.unackedRuns(from, e.end()) {
		heap.Push(&s.delayed, delayed{at: at, from: sp.from, to: sp.to})
	}
	s.armDelayTimer()
}

func (s *subscription) armDelayTimer() {
	if len(s.delayed) == 0 {
		return
	}
	d := time.Duration(s.delayed[0].at-s.n.now().UnixMilli()) * time.Millisecond
	if s.delayArmed {
		s.delayTimer.Stop()
	}
	s.delayTimer.Reset(max(d, time.Millisecond))
	s.delayArmed = true
}

// releaseDelayed moves messages whose time has come to the replay set.
func (s *subscription) releaseDelayed() {
	now := s.n.now().UnixMilli()
	for len(s.delayed) > 0 && s.delayed[0].at <= now {
		d := heap.Pop(&s.delayed).(delayed)
		s.requeue(d.from, d.to, false)
	}
	s.armDelayTimer()
}

func (s *subscription) armAckTimer() {
	if s.ackArmed {
		return
	}
	var next time.Time
	for _, c := range s.consumers {
		if len(c.timeouts) > 0 && (next.IsZero() || c.timeouts[0].at.Before(next)) {
			next = c.timeouts[0].at
		}
	}
	if next.IsZero() {
		return
	}
	s.ackTimer.Reset(max(time.Until(next), time.Millisecond))
	s.ackArmed = true
}

// expireAcks redelivers what consumers with an ack timeout held too long.
func (s *subscription) expireAcks() {
	now := time.Now()
	for _, c := range s.consumers {
		for len(c.timeouts) > 0 && !c.timeouts[0].at.After(now) {
			d := c.timeouts[0]
			c.timeouts = c.timeouts[1:]
			for _, sp := range c.pending.intersect(d.from, d.to) {
				c.pending.remove(sp.from, sp.to)
				s.requeue(sp.from, sp.to, true)
			}
		}
	}
	s.armAckTimer()
}

// save writes a durable cursor if it changed.
func (s *subscription) save() {
	if !s.durable || !s.dirty {
		return
	}
	s.cursor.Props = s.props
	if err := s.n.store.SaveCursor(s.key.pid, s.name, s.cursor); err != nil {
		if !errors.Is(err, localstore.ErrClosed) && !errors.Is(err, localstore.ErrPartitionNotFound) {
			s.n.log.Warn("saving a subscription cursor failed", "topic", s.part.Name().String(), "subscription", s.name, "err", err)
		}
		return
	}
	s.dirty = false
}

// touched marks the cursor changed and schedules a save.
func (s *subscription) touched() {
	s.dirty = true
	if s.durable && !s.saveArmed {
		s.saveTimer.Reset(saveDelay)
		s.saveArmed = true
	}
}

// errorf wraps a sentinel with a message.
func errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)
}
