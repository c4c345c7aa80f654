package kafka

// Fetch sessions (KIP-227). A consumer of many partitions that names them
// all in every fetch, and is told about all of them in every answer, spends
// most of a fetch on partitions where nothing changed. With a session the
// node keeps the partitions and their fetch offsets: the consumer's next
// fetches name only the partitions whose offset moved (or that it adds or
// forgets), and an answer holds only the partitions with records, an error,
// or a changed high watermark, last stable offset or log start.
//
// A fetch's SessionID and SessionEpoch say which kind it is, as in Kafka:
//   - epoch -1: no session; one named by SessionID is closed;
//   - epoch 0: a full fetch that opens a session (closing one named by
//     SessionID); the answer's SessionID is the new session, or 0 when the
//     cache has no slot, and the client goes on without one;
//   - epoch > 0: an incremental fetch on session SessionID, whose epoch must
//     be the one after the last (FETCH_SESSION_ID_NOT_FOUND for a session the
//     node does not have, INVALID_FETCH_SESSION_EPOCH for a wrong epoch).
//
// Sessions are the node's, not a connection's: a client may go on with its
// session over a new connection. The cache holds at most Config.
// FetchSessionSlots sessions. When it is full a new session takes the slot
// of one unused for fetchSessionIdle, or of a smaller one opened at least
// that long ago (Kafka's rules, less the one for followers); otherwise the
// fetch is answered without a session.

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchSessionIdle is how long a session must go unused, or have existed,
// before a new one may take its slot (Kafka's
// min.incremental.fetch.session.eviction.ms).
const fetchSessionIdle = 2 * time.Minute

// fetchSessions is the node's cache of fetch sessions.
type fetchSessions struct {
	slots int
	now   func() time.Time

	mu   sync.Mutex
	byID map[int32]*fetchSession

	incremental, evictions atomic.Int64
}

func newFetchSessions(slots int, now func() time.Time) *fetchSessions {
	return &fetchSessions{slots: slots, now: now, byID: map[int32]*fetchSession{}}
}

// fetchSession is one session: the partitions a consumer fetches, in the
// order they are read.
type fetchSession struct {
	id int32
	// Guarded by fetchSessions.mu.
	created, used time.Time

	// size is len(parts), for the cache to read without mu.
	size atomic.Int64

	mu    sync.Mutex
	epoch int32 // the epoch the next incremental fetch must carry
	parts []*sessionPart
	index map[sessionKey]*sessionPart
	// gen counts answers; scratch is answer's, for reordering parts.
	gen     uint64
	scratch []*sessionPart
	// ahead: reads of the next fetch's first partitions were started when
	// the last answer went out (Server.prefetch), so the partitions a
	// fetch reads are not read on (Log.FetchHere): their next reads come
	// after the others'.
	ahead bool
}

type sessionKey struct {
	topic     string
	partition int32
}

// sessionPart is one partition of a session: what the consumer last asked
// for it, and what the node last told it.
type sessionPart struct {
	sessionKey
	fetchOffset, logStartOffset int64
	leaderEpoch, maxBytes       int32
	// told says hw, lso and start were sent in an answer; gen is the
	// session's answer that last told them.
	told           bool
	hw, lso, start int64
	gen            uint64
}

// fetchPlan is how one fetch is served: read is what fetchOnce reads (the
// request itself, or every partition of its session), and finish turns
// the answer read into the one sent.
type fetchPlan struct {
	c    *fetchSessions
	read *kmsg.FetchRequest
	// open: the answer opens a session with read's partitions.
	open bool
	// sess: an incremental fetch on it, reading parts (in read's order),
	// whose partitions are readBuf.
	sess    *fetchSession
	parts   []*sessionPart
	readBuf []kmsg.FetchRequestTopicPartition
	// here: read with Log.FetchHere (fetchSession.ahead).
	here bool
}

// size is the number of partitions the plan reads.
func (p fetchPlan) size() int {
	if p.sess != nil {
		return len(p.parts)
	}
	n := 0
	for _, t := range p.read.Topics {
		n += len(t.Partitions)
	}
	return n
}

// plan decides how req is served, or gives the error that answers it.
func (c *fetchSessions) plan(req *kmsg.FetchRequest) (fetchPlan, int16) {
	p := fetchPlan{c: c, read: req}
	if req.Version < 7 {
		return p, 0 // no sessions before v7
	}
	if req.SessionEpoch <= 0 {
		if req.SessionID != 0 {
			c.remove(req.SessionID)
		}
		p.open = req.SessionEpoch == 0 && c.slots > 0 && len(req.Topics) > 0
		return p, 0
	}
	c.mu.Lock()
	s := c.byID[req.SessionID]
	if s != nil {
		s.used = c.now()
	}
	c.mu.Unlock()
	if s == nil {
		return p, kerr.FetchSessionIDNotFound.Code
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.epoch != req.SessionEpoch {
		return p, kerr.InvalidFetchSessionEpoch.Code
	}
	s.update(req)
	if len(s.parts) == 0 {
		// Everything forgotten: the session ends, and the fetch is
		// answered without one.
		c.remove(s.id)
		return p, 0
	}
	s.epoch = nextEpoch(s.epoch)
	c.incremental.Add(1)
	p.sess, p.parts, p.here = s, slices.Clone(s.parts), s.ahead
	p.read, p.readBuf = sessionRequest(req, p.parts)
	return p, 0
}

// nextEpoch follows e, wrapping past the largest to 1 (0 opens a session).
func nextEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}

// update applies an incremental fetch's changes: partitions added or with
// a new offset, and partitions forgotten.
func (s *fetchSession) update(req *kmsg.FetchRequest) {
	for _, t := range req.Topics {
		for _, rp := range t.Partitions {
			k := sessionKey{t.Topic, rp.Partition}
			sp := s.index[k]
			if sp == nil {
				sp = &sessionPart{sessionKey: k}
				s.index[k] = sp
				s.parts = append(s.parts, sp)
			}
			sp.fetchOffset, sp.logStartOffset = rp.FetchOffset, rp.LogStartOffset
			sp.leaderEpoch, sp.maxBytes = rp.CurrentLeaderEpoch, rp.PartitionMaxBytes
		}
	}
	forgot := false
	for _, t := range req.ForgottenTopics {
		for _, p := range t.Partitions {
			k := sessionKey{t.Topic, p}
			if s.index[k] != nil {
				delete(s.index, k)
				forgot = true
			}
		}
	}
	if forgot {
		kept := s.parts[:0]
		for _, sp := range s.parts {
			if s.index[sp.sessionKey] == sp {
				kept = append(kept, sp)
			}
		}
		clear(s.parts[len(kept):])
		s.parts = kept
	}
	s.size.Store(int64(len(s.parts)))
}

// sessionRequest is req with parts, a session's partitions, in place of
// its own, and the slice they are in (for readParts).
func sessionRequest(req *kmsg.FetchRequest, parts []*sessionPart) (*kmsg.FetchRequest, []kmsg.FetchRequestTopicPartition) {
	r := *req
	r.Topics, r.ForgottenTopics = nil, nil
	ps := readParts.get(len(parts))
	start := 0
	for i, sp := range parts {
		ps[i] = kmsg.FetchRequestTopicPartition{
			Partition: sp.partition, FetchOffset: sp.fetchOffset, LogStartOffset: sp.logStartOffset,
			CurrentLeaderEpoch: sp.leaderEpoch, PartitionMaxBytes: sp.maxBytes,
			LastFetchedEpoch: -1, HighWatermark: math.MaxInt64,
		}
		if i+1 == len(parts) || parts[i+1].topic != sp.topic {
			r.Topics = append(r.Topics, kmsg.FetchRequestTopic{Topic: sp.topic, Partitions: ps[start : i+1 : i+1]})
			start = i + 1
		}
	}
	return &r, ps
}

// finish makes resp, read for p.read, the answer to send, and sets its
// session id. sent are resp's batches sent from their read buffers; their
// partitions are kept where finish moves them.
func (p fetchPlan) finish(resp *kmsg.FetchResponse, sent []sentBatch) {
	resp.SessionID = 0
	switch {
	case p.open:
		resp.SessionID = p.c.open(p.read, resp)
	case p.sess != nil:
		p.sess.mu.Lock()
		p.sess.answer(resp, sent, p.parts)
		p.sess.mu.Unlock()
		resp.SessionID = p.sess.id
		// The partitions read are the plan's, and read no more.
		p.read.Topics = nil
		readParts.put(p.readBuf)
	}
}

// open makes a session of a full fetch's partitions and what its answer
// told of them; its id, or 0 if the cache has no slot for it.
func (c *fetchSessions) open(req *kmsg.FetchRequest, resp *kmsg.FetchResponse) int32 {
	s := &fetchSession{epoch: 1, index: map[sessionKey]*sessionPart{}}
	s.update(req)
	for _, t := range resp.Topics {
		for i := range t.Partitions {
			rp := &t.Partitions[i]
			if sp := s.index[sessionKey{t.Topic, rp.Partition}]; sp != nil {
				sp.told, sp.hw, sp.lso, sp.start = true, rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset
			}
		}
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.byID) >= c.slots && !c.evictFor(len(s.parts), now) {
		return 0
	}
	for s.id == 0 || c.byID[s.id] != nil {
		s.id = rand.Int32N(math.MaxInt32) + 1
	}
	s.created, s.used = now, now
	c.byID[s.id] = s
	return s.id
}

// evictFor frees a slot for a session of size partitions: the least
// recently used session if it has been idle for fetchSessionIdle, else the
// smallest one smaller than size opened at least that long ago. c.mu is
// held.
func (c *fetchSessions) evictFor(size int, now time.Time) bool {
	var lru, small *fetchSession
	smallSize := size
	for _, s := range c.byID {
		if lru == nil || s.used.Before(lru.used) {
			lru = s
		}
		if n := int(s.size.Load()); n < smallSize && now.Sub(s.created) >= fetchSessionIdle {
			small, smallSize = s, n
		}
	}
	victim := small
	if lru != nil && now.Sub(lru.used) >= fetchSessionIdle {
		victim = lru
	}
	if victim == nil {
		return false
	}
	delete(c.byID, victim.id)
	c.evictions.Add(1)
	return true
}

func (c *fetchSessions) remove(id int32) {
	c.mu.Lock()
	delete(c.byID, id)
	c.mu.Unlock()
}

// stats gives the sessions open and the partitions they hold.
func (c *fetchSessions) stats() (sessions, partitions int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.byID {
		partitions += s.size.Load()
	}
	return int64(len(c.byID)), partitions
}

// answer drops from resp, read for parts, the partitions the consumer
// need not hear about (no records, no error, and offsets as last told),
// records what it is told of the rest, and moves those to the end of the
// session's order, so that partitions the response budget left out are
// read first next time. s.mu is held.
func (s *fetchSession) answer(resp *kmsg.FetchResponse, sent []sentBatch, parts []*sessionPart) {
	s.gen++
	told, i, si := 0, 0, 0
	topics := resp.Topics[:0]
	for ti := range resp.Topics {
		t := resp.Topics[ti]
		kept := t.Partitions[:0]
		for pi := range t.Partitions {
			rp := &t.Partitions[pi]
			// The answer holds parts in order (fetchOnce answers each
			// partition read, in order); a session changed since is
			// looked up.
			var sp *sessionPart
			if i < len(parts) && parts[i].partition == rp.Partition && parts[i].topic == t.Topic {
				sp = parts[i]
			} else {
				sp = s.index[sessionKey{t.Topic, rp.Partition}]
			}
			i++
			hasSent := si < len(sent) && sent[si].p == rp
			must := sp == nil || !sp.told || hasSent || len(rp.RecordBatches) > 0 || rp.ErrorCode != 0 ||
				rp.HighWatermark != sp.hw || rp.LastStableOffset != sp.lso || rp.LogStartOffset != sp.start
			if !must {
				continue
			}
			if sp != nil {
				sp.told, sp.hw, sp.lso, sp.start = true, rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset
				sp.gen = s.gen
				told++
			}
			kept = append(kept, *rp)
			if hasSent {
				sent[si].p = &kept[len(kept)-1]
				si++
			}
		}
		if len(kept) > 0 {
			t.Partitions = kept
			topics = append(topics, t)
		}
	}
	clear(resp.Topics[len(topics):])
	resp.Topics = topics
	if told == 0 || told >= len(s.parts) {
		return
	}
	// A stable partition of the order: the partitions not told, then
	// those told.
	s.scratch = s.scratch[:0]
	n := 0
	for _, sp := range s.parts {
		if sp.gen == s.gen {
			s.scratch = append(s.scratch, sp)
		} else {
			s.parts[n] = sp
			n++
		}
	}
	copy(s.parts[n:], s.scratch)
	clear(s.scratch)
}

// nextRead is a partition a session's next fetch reads, where it reads.
type nextRead struct {
	sessionKey
	offset   int64
	maxBytes int32
}

// nextReads appends to out the first n partitions the session's next fetch
// reads whose offset the node knows: those the last answer did not tell
// about (the consumer moves the offsets of those it told records of, and
// they are last in the order now). s.mu is held.
func (s *fetchSession) nextReads(out []nextRead, n int) []nextRead {
	for _, sp := range s.parts {
		if len(out) == n {
			break
		}
		if sp.gen == s.gen && sp.told {
			continue
		}
		out = append(out, nextRead{sp.sessionKey, sp.fetchOffset, sp.maxBytes})
	}
	return out
}
