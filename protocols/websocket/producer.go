package websocket

// Producer sessions: /ws/v2/producer/persistent/{tenant}/{namespace}/{topic}.
//
// Parameters as in Pulsar: producerName (the name is registered on every
// partition, as a Pulsar producer's is; a name in use gives HTTP 409),
// initialSequenceId, hashingScheme and messageRoutingMode (see router),
// compressionType (entries are stored compressed with the Kafka codec of
// the same family: LZ4 -> lz4, ZLIB -> gzip, ZSTD -> zstd, SNAPPY ->
// snappy), and maxPendingMessages (how many messages may wait to become
// durable before the session stops reading). sendTimeoutMillis is checked
// and otherwise ignored. encryptionKeys is refused: tern does not encrypt.
//
// Without batchingEnabled, each message becomes one entry exactly as a
// Pulsar client's SEND of one message does (see protocols/pulsar
// cmd_send.go): key, payload,
// properties as headers, eventTime as the record timestamp (or the publish
// time, marked as no event time), deliverAt/deliverAfterMs as the entry's
// delivery time, and an envelope naming the producer and the message's
// sequence id. The sequence id is the message's sequenceId if it has one,
// else the next of a counter per partition that starts after
// initialSequenceId, or after the last sequence id stored for the name when
// the namespace deduplicates, as Pulsar's producer starts. With
// deduplication on, a message whose sequence id is not above the last one
// stored for the name is a duplicate: it is acknowledged "ok" with the
// original's message id and not written again.
//
// Answers keep the order of the messages: {"result":"ok","messageId":...}
// once the entry is durable, or {"result":"send-error:<n>","errorMsg":...}
// with Pulsar's numbers: 3 for a message that is not valid JSON, 7 for a
// payload that is not base64 (or too large) or an eventTime that does not
// parse, 8 for a failed append. Bad messages do not close the session.
//
// With batchingEnabled=true, as Pulsar's proxy does through its client's
// batching, consecutive messages for one partition become one entry, a
// batch, as a Pulsar client's batched SEND does: each message keeps its
// key, properties, event time and sequence id, and its answer's message id
// carries its batch index. A batch is written once it holds
// batchingMaxMessages messages (default 1000) or 128 KiB of payload, or
// batchingMaxPublishDelay milliseconds (default 1) after its first
// message, the Java client's defaults; a message for another partition,
// one with deliverAt or deliverAfterMs (which goes alone, as Pulsar's
// clients send delayed messages unbatched), one whose sequence id is not
// above the batch's last, or a bad message ends the batch first. Fewer
// entries mean less work per message for the node: one append, one
// checksum and one index write per batch. maxPendingMessages still counts
// messages, those in the batch being filled included: when the session
// holds that many, it waits for answers, and writes the batch at once if
// its messages are all it holds (no answer could come otherwise).

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/ternmq/tern/protocols"
)

// producerSession is a producer set up for a session.
type producerSession struct {
	s       *Server
	t       target
	slots   []slot
	leases  []protocols.ProducerLease
	nextSeq []int64
	route   *router
	codec   protocols.Codec
	comp    protocols.Compressor
	// scratch is used by the reading goroutine or, in a batching session,
	// under mu.
	scratch entryScratch

	receipts chan receipt
	inflight atomic.Int64
	drained  chan struct{}
	draining chan struct{}
	drainSet atomic.Bool

	// batching is set by batchingEnabled; mu guards batch, which the
	// reading goroutine fills and it or the batch's timer writes.
	batching *batchLimits
	mu       sync.Mutex
	batch    *openBatch
	// held has a token for each message of a batching session read and
	// not yet answered, maxPendingMessages at most: a receipt of a batch
	// answers many messages, so the receipts channel alone would bound
	// batches, not messages.
	held chan struct{}
}

// receipt is one answer in message order: an append to wait for, or a
// ready answer. An append of a batch has the contexts of its messages,
// which are answered one by one.
type receipt struct {
	pending  protocols.PendingProduce
	slot     int
	context  *string
	contexts []*string // a batch's; nil for one message
	size     int64
	frame    []byte
}

// batchLimits are a batching session's limits.
type batchLimits struct {
	messages int
	bytes    int
	delay    time.Duration
}

// openBatch is the batch a batching session is filling.
type openBatch struct {
	slot  int
	msgs  []message
	seqs  []int64
	bytes int
	timer *time.Timer
}

// batchMaxBytes is the payload a batch holds at most, the Java client's
// batchingMaxBytes default.
const batchMaxBytes = 128 << 10

var codecs = map[string]protocols.Codec{
	"NONE": protocols.CodecNone, "LZ4": protocols.CodecLZ4, "ZLIB": protocols.CodecGzip,
	"ZSTD": protocols.CodecZstd, "SNAPPY": protocols.CodecSnappy,
}

func (s *Server) setupProducer(ctx context.Context, t target, p *params, remote string) (*producerSession, error) {
	name := p.str("producerName")
	initial := p.int64("initialSequenceId", -2, -1, 1<<62)
	scheme := p.oneOf("hashingScheme", "JavaStringHash", "JavaStringHash", "Murmur3_32Hash")
	mode := p.oneOf("messageRoutingMode", "SinglePartition", "SinglePartition", "RoundRobinPartition", "CustomPartition")
	codec := p.oneOf("compressionType", "NONE", "NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY")
	maxPending := p.int64("maxPendingMessages", int64(s.cfg.MaxPendingMessages), 1, 1<<20)
	p.int64("sendTimeoutMillis", 0, 0, 1<<31)
	batching := p.bool("batchingEnabled", false)
	batchMsgs := p.int64("batchingMaxMessages", 0, 0, 1<<31)
	batchDelay := p.int64("batchingMaxPublishDelay", 1, 0, 1<<31)
	if p.has("encryptionKeys") {
		p.fail("encryptionKeys: tern does not encrypt messages; produce without it")
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	parts, err := s.resolve(ctx, t.topic)
	if err != nil {
		return nil, err
	}
	slots, err := s.incarnations(ctx, parts)
	if err != nil {
		return nil, err
	}
	ps := &producerSession{
		s: s, t: t, slots: slots, codec: codecs[codec],
		route:    newRouter(len(slots), mode, scheme),
		receipts: make(chan receipt, maxPending),
		drained:  make(chan struct{}, 1),
		draining: make(chan struct{}),
	}
	if batching {
		if batchMsgs == 0 {
			batchMsgs = 1000
		}
		ps.batching = &batchLimits{messages: int(batchMsgs), bytes: min(batchMaxBytes, s.cfg.MaxMessageSize),
			delay: time.Duration(batchDelay) * time.Millisecond}
		ps.held = make(chan struct{}, maxPending)
	}
	for _, sl := range slots {
		l, err := s.b.OpenProducer(ctx, sl.part, protocols.ProducerRequest{Name: name, Address: remote})
		if err != nil {
			ps.abort()
			return nil, err
		}
		name = l.Name()
		ps.leases = append(ps.leases, l)
		next := l.LastSequence() + 1
		if initial >= -1 {
			next = initial + 1
		}
		ps.nextSeq = append(ps.nextSeq, next)
	}
	return ps, nil
}

func (ps *producerSession) abort() {
	for _, l := range ps.leases {
		l.Close()
	}
}

// goAway stops taking messages, answers those in flight and then closes
// the session.
func (ps *producerSession) goAway(*session) {
	if ps.drainSet.CompareAndSwap(false, true) {
		close(ps.draining)
	}
}

func (ps *producerSession) run(ss *session) {
	answered := make(chan struct{})
	ss.start(func() {
		defer close(answered)
		ps.answer(ss)
	})
	for i, l := range ps.leases {
		ss.wg.Add(1)
		go func() {
			defer ss.wg.Done()
			select {
			case <-l.Revoked():
				ss.fail(CloseFailedToCreateProducer, fmt.Sprintf("the producer %q on %s was taken away (another session took the name over, an exclusive producer fenced it, or the topic was deleted)",
					l.Name(), ps.slots[i].part.Name()))
			case <-ss.ctx.Done():
			}
		}()
	}
	for {
		b, err := ss.read()
		if err != nil {
			ss.readErr(err)
			break
		}
		ps.handle(ss, b)
	}
	// Messages read are appended, as they are without batching.
	ps.mu.Lock()
	ps.flush(ss)
	ps.mu.Unlock()
	ss.closeNow()
	close(ps.receipts)
	<-answered
	ps.abort()
}

// handle turns one message into an append, or an error answer.
func (ps *producerSession) handle(ss *session, b []byte) {
	if ps.held != nil && !ps.hold(ss) {
		return
	}
	now := time.Now()
	m, code, err := decodeProducerMessage(b, ps.s.cfg.MaxMessageSize, now)
	if err != nil {
		ps.s.m.badInput.Add(1)
		ss.log.Debug("producer message refused", "code", PulsarCode(code), "err", err)
		ps.answerNow(ss, receipt{frame: errorAck(code, err.Error(), m.context)})
		return
	}
	if ps.drainSet.Load() {
		ps.answerNow(ss, receipt{frame: errorAck(CloseUnknownError, "the node is shutting down; send the message again on a new session", m.context)})
		return
	}
	i := ps.route.pick(m.key)
	seq := ps.nextSeq[i]
	if m.seq != nil {
		seq = *m.seq
	} else {
		ps.nextSeq[i]++
	}
	if ps.batching != nil {
		ps.add(ss, i, m, seq)
		return
	}
	req, err := ps.entry(i, &m, seq, now)
	if err != nil {
		ps.receipts <- receipt{frame: errorAck(CloseUnknownError, err.Error(), m.context)}
		return
	}
	ps.start(ss, i, req, int64(len(m.payload))+1, receipt{context: m.context})
}

// start appends an entry of size bytes and queues its receipt r.
func (ps *producerSession) start(ss *session, i int, req protocols.ProduceRequest, size int64, r receipt) {
	if !ps.acquire(ss, size) {
		return
	}
	pending, err := ps.s.b.StartProduce(ss.ctx, ps.slots[i].part, req)
	if err != nil {
		ps.release(size)
		ps.answerErr(r, err)
		return
	}
	r.pending, r.slot, r.size = pending, i, size
	ps.receipts <- r
}

// hold takes a batching session's token for one more message. With none
// left, it waits for an answer to give one back; false if the session
// ends first. If the batch being filled holds every token, no answer can
// come until it is written, so it is written first. Otherwise it is left
// to grow: answers to messages written before free tokens one by one, and
// writing the batch at each moment they run out made batches of one.
func (ps *producerSession) hold(ss *session) bool {
	select {
	case ps.held <- struct{}{}:
		return true
	default:
	}
	ps.mu.Lock()
	if b := ps.batch; b != nil && len(b.msgs) >= len(ps.held) {
		ps.flush(ss)
	}
	ps.mu.Unlock()
	select {
	case ps.held <- struct{}{}:
		return true
	case <-ss.ctx.Done():
		return false
	}
}

// answerErr queues a failed append's answers: one per message.
func (ps *producerSession) answerErr(r receipt, err error) {
	if r.contexts == nil {
		ps.receipts <- receipt{frame: errorAck(CloseUnknownError, err.Error(), r.context)}
		return
	}
	for _, c := range r.contexts {
		ps.receipts <- receipt{frame: errorAck(CloseUnknownError, err.Error(), c)}
	}
}

// answerNow queues an answer that needs no append, after the batch being
// filled, whose messages came first.
func (ps *producerSession) answerNow(ss *session, r receipt) {
	if ps.batching != nil {
		ps.mu.Lock()
		defer ps.mu.Unlock()
		ps.flush(ss)
	}
	ps.receipts <- r
}

// add puts a message into the batch being filled, after writing that
// batch first if the message cannot join it, and writes the batch once it
// is full.
func (ps *producerSession) add(ss *session, i int, m message, seq int64) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if b := ps.batch; b != nil && (b.slot != i || m.deliverAt > 0 || seq <= b.seqs[len(b.seqs)-1] || b.bytes+len(m.payload) > ps.batching.bytes) {
		ps.flush(ss)
	}
	b := ps.batch
	if b == nil {
		b = &openBatch{slot: i}
		ps.batch = b
		b.timer = time.AfterFunc(ps.batching.delay, func() {
			ps.mu.Lock()
			defer ps.mu.Unlock()
			if ps.batch == b {
				ps.flush(ss)
			}
		})
	}
	b.msgs = append(b.msgs, m)
	b.seqs = append(b.seqs, seq)
	b.bytes += len(m.payload)
	if m.deliverAt > 0 || len(b.msgs) >= ps.batching.messages || b.bytes >= ps.batching.bytes {
		ps.flush(ss)
	}
}

// flush writes the batch being filled, if any, as one entry. ps.mu is
// held.
func (ps *producerSession) flush(ss *session) {
	b := ps.batch
	if b == nil {
		return
	}
	ps.batch = nil
	b.timer.Stop()
	r := receipt{context: b.msgs[0].context}
	if len(b.msgs) > 1 {
		r.contexts = make([]*string, len(b.msgs))
		for k := range b.msgs {
			r.contexts[k] = b.msgs[k].context
		}
	}
	req, err := batchEntry(ps.leases[b.slot].Name(), b.msgs, b.seqs, ps.codec, &ps.comp, &ps.scratch, time.Now())
	if err != nil {
		ps.answerErr(r, err)
		return
	}
	ps.start(ss, b.slot, req, int64(b.bytes+len(b.msgs)), r)
}

// entry builds the entry for one message.
func (ps *producerSession) entry(i int, m *message, seq int64, now time.Time) (protocols.ProduceRequest, error) {
	return messageEntry(ps.leases[i].Name(), m, seq, ps.codec, &ps.comp, &ps.scratch, now)
}

// entryScratch is what building an entry reuses from one entry to the
// next. StartProduce copies the batch before it returns, so the next
// entry may overwrite it.
type entryScratch struct {
	batch  []byte
	msgs   []protocols.Message
	extras []protocols.MessageExtras
}

// scratchRetain is the largest batch buffer an entryScratch keeps: one
// full batch of 1 KiB messages, so a session that once sent a large
// message does not pin its buffer.
const scratchRetain = 256 << 10

// messageEntry builds the entry of one producer message, as the Pulsar
// binary protocol builds the entry of a SEND of one message.
func messageEntry(producer string, m *message, seq int64, codec protocols.Codec, comp *protocols.Compressor, sc *entryScratch, now time.Time) (protocols.ProduceRequest, error) {
	return batchEntry(producer, []message{*m}, []int64{seq}, codec, comp, sc, now)
}

// batchEntry builds the entry of consecutive producer messages with
// sequence ids seqs, as the Pulsar binary protocol builds the entry of a
// batched SEND. Only a message alone may have a delivery time. The batch
// is built in sc's buffer: it is valid until the next call with sc.
func batchEntry(producer string, ms []message, seqs []int64, codec protocols.Codec, comp *protocols.Compressor, sc *entryScratch, now time.Time) (protocols.ProduceRequest, error) {
	env := protocols.Envelope{ProducerName: producer, SequenceFirst: seqs[0], SequenceLast: seqs[len(seqs)-1]}
	if len(ms) == 1 && ms[0].deliverAt > 0 {
		protocols.SetDeliverAt(&env, ms[0].deliverAt)
	}
	msgs := slices.Grow(sc.msgs[:0], len(ms))[:len(ms)]
	extras := slices.Grow(sc.extras[:0], len(ms))[:len(ms)]
	clear(extras)
	// The slices are kept for the next entry, not the payloads in them.
	defer func() {
		clear(msgs)
		sc.msgs, sc.extras = msgs[:0], extras[:0]
	}()
	for k := range ms {
		m := &ms[k]
		msgs[k] = protocols.Message{Key: m.key, Value: m.payload, Headers: m.headers, Timestamp: m.eventTime}
		if msgs[k].Value == nil {
			msgs[k].Value = []byte{}
		}
		if m.eventTime == 0 {
			msgs[k].Timestamp = now.UnixMilli()
			extras[k].NoEventTime = true
		}
	}
	protocols.SetMessageExtras(&env, extras)
	batch, err := protocols.AppendBatch(sc.batch[:0], protocols.BatchSpec{Codec: codec, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		msgs, comp)
	if err != nil {
		return protocols.ProduceRequest{}, err
	}
	if cap(batch) <= scratchRetain {
		sc.batch = batch[:0]
	}
	h, err := protocols.ParseBatchHeader(batch)
	if err != nil {
		return protocols.ProduceRequest{}, err
	}
	return protocols.ProduceRequest{Envelope: env, Batch: batch, Header: &h}, nil
}

// acquire reserves in-flight bytes, waiting while the session has too
// many in flight.
func (ps *producerSession) acquire(ss *session, n int64) bool {
	for {
		cur := ps.inflight.Load()
		if cur == 0 || cur+n <= int64(ps.s.cfg.MaxInflightBytes) {
			ps.inflight.Add(n)
			return true
		}
		select {
		case <-ps.drained:
		case <-ss.ctx.Done():
			return false
		}
	}
}

func (ps *producerSession) release(n int64) {
	ps.inflight.Add(-n)
	select {
	case ps.drained <- struct{}{}:
	default:
	}
}

// answer writes the answers in message order. It waits for every append
// it is handed, even after the connection is gone, so that each in-flight
// append is accounted for; once the server asks the session to go away it
// closes the session when nothing is left in flight.
func (ps *producerSession) answer(ss *session) {
	write := true
	// Answers ready one after another leave in one write: the connection
	// stays corked while the next receipt is at hand and its append is
	// durable, and is uncorked before the loop waits for either.
	corked := false
	uncork := func() {
		if corked {
			corked = false
			if ss.uncork() != nil {
				write = false
			}
		}
	}
	defer uncork()
	draining := ps.draining
	var frames [][]byte // the answers to write, reused
	for {
		var r receipt
		var ok bool
		if len(ps.receipts) == 0 {
			uncork()
		}
		select {
		case r, ok = <-ps.receipts:
		case <-draining:
			select {
			case r, ok = <-ps.receipts:
			default:
				ss.closeWith(websocket.StatusGoingAway, "the node is shutting down")
				draining = nil
				continue
			}
		}
		if !ok {
			return
		}
		if rp, ok := r.pending.(protocols.ReadyProduce); r.pending != nil && (!ok || !rp.Ready()) {
			uncork()
		}
		frames = append(frames[:0], r.frame)
		if r.pending != nil {
			frames = ps.receipt(r, frames[:0])
		}
		if write && !corked && ss.cork != nil {
			ss.cork.cork(ss.s.cfg.WriteTimeout)
			corked = true
		}
		for _, f := range frames {
			if !write {
				break
			}
			if corked {
				write = ss.writeCorked(f) == nil
			} else {
				write = ss.write(f) == nil
			}
		}
		if ps.held != nil {
			for range frames {
				select {
				case <-ps.held:
				default:
				}
			}
		}
	}
}

// receipt waits for an append and appends its answers to out, one per
// message.
func (ps *producerSession) receipt(r receipt, out [][]byte) [][]byte {
	res, err := r.pending.Wait()
	ps.release(r.size)
	n := max(len(r.contexts), 1)
	for k := range n {
		c := r.context
		if r.contexts != nil {
			c = r.contexts[k]
		}
		if err != nil {
			out = append(out, errorAck(CloseUnknownError, err.Error(), c))
			continue
		}
		id := receiptID(&ps.slots[r.slot], res.BaseOffset)
		if n > 1 && res.BaseOffset >= 0 {
			id = messageID(&ps.slots[r.slot], res.BaseOffset, k, n)
		}
		b, _ := json.Marshal(producerAck{Result: "ok", MessageID: id, Context: c})
		out = append(out, b)
	}
	if err == nil && !res.Duplicate {
		ps.s.m.produced.Add(int64(n))
	}
	return out
}

// errorAck is a failed message's answer.
func errorAck(code CloseCode, msg string, context *string) []byte {
	b, _ := json.Marshal(producerAck{Result: sendError(code), ErrorMsg: msg, Context: context})
	return b
}
