package kafka

// Fetch, versions 4-12. v13+ (topic ids) is not advertised.
//
// Fetch sessions (KIP-227) are kept from v7 on: see fetchsession.go.
//
// Differences from Apache Kafka:
//   - batches are returned as stored, starting with the entry holding the
//     fetch offset (clients skip records below it), with leader epoch -1;
//   - read_committed reads up to the last stable offset, which equals the
//     high watermark until transactions land; AbortedTransactions is empty;
//   - no PreferredReadReplica (-1): a region serves from one node.
//
// Long-poll: when fewer than MinBytes are available the reply waits (in
// the connection's writer, so the reader goes on) until data arrives on a
// fetched partition or MaxWaitMillis passes, then reads again.

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/ternmq/tern/protocols"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.Fetch, 4, 12, handleFetch) }

func handleFetch(c *conn, kr kmsg.Request, r *reply) error {
	req := kr.(*kmsg.FetchRequest)
	start := time.Now()
	plan, code := c.s.sessions.plan(req)
	if code != 0 {
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = code
		r.resp = resp
		return nil
	}
	req = plan.read
	watches := watchBufs.get(plan.size())[:0]
	resp, n, watches, done, sent := c.s.fetchOnce(c.ctx, req, plan.here, watches)
	if done || n >= int(req.MinBytes) || req.MaxWaitMillis <= 0 || len(watches) == 0 {
		c.s.stats.fetched.Add(int64(n))
		plan.finish(resp, sent)
		c.s.prefetch(plan, n)
		watchBufs.put(watches)
		r.resp, r.sent = resp, sent
		return nil
	}
	deadline := start.Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	r.poll = true
	r.wait = func(ctx context.Context) kmsg.Response {
		for {
			wctx, cancel := context.WithDeadline(ctx, deadline)
			stop := context.AfterFunc(c.s.drain, cancel)
			err := c.s.b.Wait(wctx, watches)
			stop()
			cancel()
			if ctx.Err() != nil || c.s.drain.Err() != nil {
				plan.finish(resp, sent)
				c.s.prefetch(plan, n)
				watchBufs.put(watches)
				r.sent = sent
				return resp
			}
			dropResp(resp)
			resp, n, watches, done, sent = c.s.fetchOnce(ctx, req, plan.here, watches[:0])
			// A watch error (a watched partition went away) is reported by
			// the read just done.
			if done || n >= int(req.MinBytes) || err != nil || !time.Now().Before(deadline) {
				c.s.stats.fetched.Add(int64(n))
				plan.finish(resp, sent)
				c.s.prefetch(plan, n)
				watchBufs.put(watches)
				r.sent = sent
				return resp
			}
		}
	}
	return nil
}

// fetchOnce reads every requested partition, with Log.FetchHere if here
// (fetchPlan.here) and Log.Fetch otherwise. It returns the response, the
// record bytes in it, the partitions to watch for a long-poll (appended to
// watches), and whether an error means the reply should go out at once.
func (s *Server) fetchOnce(ctx context.Context, req *kmsg.FetchRequest, here bool, watches []protocols.Watch) (_ *kmsg.FetchResponse, _ int, _ []protocols.Watch, _ bool, sent []sentBatch) {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.Topics = make([]kmsg.FetchResponseTopic, len(req.Topics))
	tc := s.newTopicCache(false)
	remaining := min(int(req.MaxBytes), s.cfg.FetchMaxBytes)
	if remaining <= 0 {
		remaining = 1
	}
	total := 0
	urgent := false
	pre := s.readAhead(ctx, req, tc, remaining, here)
	defer pre.drop()
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		st := &resp.Topics[ti]
		st.Topic = rt.Topic
		st.Partitions = getRespParts(len(rt.Partitions))
		for pi := range rt.Partitions {
			p := &rt.Partitions[pi]
			sp := &st.Partitions[pi]
			*sp = kmsg.NewFetchResponseTopicPartition()
			sp.Partition = p.Partition
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			// Empty, not null: librdkafka rejects a null record set.
			sp.RecordBatches = []byte{}
			part, err := tc.partition(ctx, rt.Topic, p.Partition)
			if err != nil {
				sp.ErrorCode = errCode(err)
				urgent = true
				continue
			}
			if remaining <= 0 && total > 0 {
				// Out of response budget: report offsets only.
				if off, err := s.b.Offsets(ctx, part); err == nil {
					sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = off.HighWatermark, off.LastStable, off.Start
				}
				continue
			}
			maxBytes := min(int(p.PartitionMaxBytes), remaining)
			if maxBytes <= 0 {
				maxBytes = 1
			}
			res, ok, err := pre.take(ti, pi, maxBytes)
			if !ok {
				res, err = s.fetch(ctx, here, part, p.FetchOffset, maxBytes)
			}
			if err != nil {
				sp.ErrorCode = errCode(err)
				var oor *protocols.OffsetOutOfRangeError
				if errors.As(err, &oor) {
					sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = oor.End, oor.End, oor.Start
				}
				urgent = true
				continue
			}
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = res.HighWatermark, res.LastStable, res.Start
			stable := res.HighWatermark
			if req.IsolationLevel == 1 {
				stable = res.LastStable
			}
			// The entries sent: those below stable, up to one that does
			// not split (reported as a storage error).
			size, n := 0, 0
			for _, e := range res.Entries {
				if e.BaseOffset >= stable {
					break
				}
				b, err := protocols.SplitEntry(e.Value)
				if err != nil {
					sp.ErrorCode = kerr.KafkaStorageError.Code
					urgent = true
					break
				}
				size += len(b)
				n++
			}
			switch {
			case size > 0 && res.Recycle != nil && n == 1:
				// One batch (a consumer behind reads one producer batch
				// of up to a megabyte a fetch): sent from where it was
				// read, which is recycled once the response is written.
				sp.RecordBatches, _ = protocols.SplitEntry(res.Entries[0].Value)
				sent = append(sent, sentBatch{p: sp, recycle: res.Recycle})
				res.Recycle = nil
			case size > 0 && res.Recycle != nil && size >= sentPartMin*n:
				// Batches of sentPartMin or more on average: sent from
				// where they were read, each from its own place.
				parts := make([][]byte, n)
				for i, e := range res.Entries[:n] {
					parts[i], _ = protocols.SplitEntry(e.Value)
				}
				sent = append(sent, sentBatch{p: sp, parts: parts, recycle: res.Recycle})
				res.Recycle = nil
			case size > 0:
				sp.RecordBatches = getBatchBuf(size)
				for _, e := range res.Entries[:n] {
					b, _ := protocols.SplitEntry(e.Value)
					sp.RecordBatches = append(sp.RecordBatches, b...)
				}
			}
			total += size
			remaining -= size
			if res.Recycle != nil {
				res.Recycle() // the batches were copied out
			}
			if size == 0 {
				watches = append(watches, protocols.Watch{Partition: part, Offset: p.FetchOffset})
			}
		}
	}
	return resp, total, watches, urgent, sent
}

// maxParallelReads bounds the partitions of one fetch read at once;
// readAhead looks among the first readAheadScan partitions of a fetch for
// them, and takes those at least readAheadBehind records behind: a
// consumer catching up, whose reads take long. A consumer that keeps up
// reads a few records from the page cache, which a goroutine would only
// make dearer, and a scan of all its partitions would double the work of
// a fetch of a thousand.
const (
	maxParallelReads = 4
	readAheadScan    = 16
	readAheadBehind  = 16
)

// partitionReads are the reads of a fetch's partitions started together,
// so that a consumer behind on many partitions waits for the slowest of a
// few reads (the disk and the page cache serve them side by side), not
// for their sum: a partition's records lie between other partitions' in
// the segments, and reading one takes a read per stored batch.
type partitionReads struct {
	at    map[[2]int]int // (topic, partition) index in the request -> reads
	reads []partitionRead
	taken []bool
}

type partitionRead struct {
	maxBytes int
	res      protocols.FetchResult
	err      error
	done     chan struct{}
}

// readAhead starts the reads of the first partitions of req that are
// behind (see maxParallelReads), as many as the response budget may take
// at each one's PartitionMaxBytes, when there are at least two: one read
// needs no company.
func (s *Server) readAhead(ctx context.Context, req *kmsg.FetchRequest, tc *topicCache, budget int, here bool) *partitionReads {
	type todo struct {
		ti, pi   int
		part     protocols.Partition
		offset   int64
		maxBytes int
	}
	var want []todo
	scanned := 0
find:
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		for pi := range rt.Partitions {
			if budget <= 0 || len(want) == maxParallelReads || scanned == readAheadScan {
				break find
			}
			scanned++
			p := &rt.Partitions[pi]
			part, err := tc.partition(ctx, rt.Topic, p.Partition)
			if err != nil {
				continue
			}
			off, err := s.b.Offsets(ctx, part)
			if err != nil || p.FetchOffset < off.Start || off.HighWatermark-p.FetchOffset < readAheadBehind {
				continue // little or nothing to read, or an error the fetch reports
			}
			// The budget the fetch would leave this partition if every
			// read before it filled its PartitionMaxBytes: no more than
			// the fetch gives it when it reaches it.
			want = append(want, todo{ti, pi, part, p.FetchOffset, max(min(int(p.PartitionMaxBytes), budget), 1)})
			budget -= max(int(p.PartitionMaxBytes), 1)
		}
	}
	if len(want) < 2 {
		return nil
	}
	pr := &partitionReads{at: make(map[[2]int]int, len(want)), reads: make([]partitionRead, len(want)), taken: make([]bool, len(want))}
	for i, w := range want {
		pr.at[[2]int{w.ti, w.pi}] = i
		r := &pr.reads[i]
		r.maxBytes, r.done = w.maxBytes, make(chan struct{})
		go func() {
			defer close(r.done)
			r.res, r.err = s.fetch(ctx, here, w.part, w.offset, w.maxBytes)
		}()
	}
	return pr
}

// fetch reads p with Log.FetchHere if here, else with Log.Fetch.
func (s *Server) fetch(ctx context.Context, here bool, p protocols.Partition, offset int64, maxBytes int) (protocols.FetchResult, error) {
	if here {
		return s.b.FetchHere(ctx, p, offset, maxBytes)
	}
	return s.b.Fetch(ctx, p, offset, maxBytes)
}

// prefetch starts the reads of the partitions the next fetch of plan's
// session reads first, once its answer is made: the node reads them while
// the answer goes out and the consumer takes it in, and the next fetch
// finds them read (Log.Prefetch). franz-go, like Kafka's own consumer,
// sends one fetch at a time to a broker: a consumer of 100 partitions
// behind, whose fetches each read four of them from the disk, left the
// node waiting for it and itself waiting for the node's reads. The
// partitions are those readAhead would read together in that fetch, with
// the room it would give them; a partition the consumer is told records
// of now moves to the end of the order, and has none started.
//
// It starts none unless the answer, of n record bytes, filled its budget:
// otherwise it read every partition that had records, and the consumer is
// told of them all. A consumer that keeps up is then spared the lookups.
func (s *Server) prefetch(plan fetchPlan, n int) {
	sess := plan.sess
	if sess == nil {
		return
	}
	budget := min(int(plan.read.MaxBytes), s.cfg.FetchMaxBytes)
	if n < budget {
		if plan.here {
			sess.mu.Lock()
			sess.ahead = false
			sess.mu.Unlock()
		}
		return
	}
	var buf [readAheadScan]nextRead
	sess.mu.Lock()
	next := sess.nextReads(buf[:0], readAheadScan)
	sess.mu.Unlock()
	tc := s.newTopicCache(false)
	started := 0
	ctx := context.Background() // the session outlives the connection
	for _, r := range next {
		if budget <= 0 || started == maxParallelReads {
			break
		}
		part, err := tc.partition(ctx, r.topic, r.partition)
		if err != nil {
			continue
		}
		off, err := s.b.Offsets(ctx, part)
		if err != nil || r.offset < off.Start || off.HighWatermark-r.offset < readAheadBehind {
			continue
		}
		s.b.Prefetch(ctx, part, r.offset, max(min(int(r.maxBytes), budget), 1))
		budget -= max(int(r.maxBytes), 1)
		started++
	}
	sess.mu.Lock()
	sess.ahead = started > 0
	sess.mu.Unlock()
}

// take waits for the read of partition (ti, pi) and gives it, if it was
// read ahead with no more than maxBytes (what the fetch gives it now); ok
// is false otherwise, and a read that took more is dropped.
func (pr *partitionReads) take(ti, pi, maxBytes int) (res protocols.FetchResult, ok bool, err error) {
	if pr == nil {
		return res, false, nil
	}
	i, ok := pr.at[[2]int{ti, pi}]
	if !ok {
		return res, false, nil
	}
	r := &pr.reads[i]
	<-r.done
	pr.taken[i] = true
	if r.maxBytes > maxBytes {
		if r.err == nil && r.res.Recycle != nil {
			r.res.Recycle()
		}
		return res, false, nil
	}
	return r.res, true, r.err
}

// drop waits for the reads not taken (the fetch stopped before their
// partitions) and hands their buffers back.
func (pr *partitionReads) drop() {
	if pr == nil {
		return
	}
	for i := range pr.reads {
		if pr.taken[i] {
			continue
		}
		r := &pr.reads[i]
		<-r.done
		if r.err == nil && r.res.Recycle != nil {
			r.res.Recycle()
		}
	}
}

// sentPartMin is the smallest mean batch size at which a partition's
// several batches are sent from where they were read. Smaller ones are
// copied into one buffer: each sent batch is one more piece of the write
// (writev takes up to 1024 a call).
const sentPartMin = 16 << 10

// sentBatch is a fetch response's record batches sent from the buffer
// they were read into, and the recycling of that buffer. A single batch is
// p's RecordBatches; several are parts, in order, and p's RecordBatches is
// nil until the response is encoded (encodeSpliced).
type sentBatch struct {
	p       *kmsg.FetchResponseTopicPartition
	parts   [][]byte
	recycle func()
}

// recycleSent hands back the read buffers of a response's batches once it
// is written; they are not batchBufs' (putFetchBufs).
func recycleSent(sent []sentBatch) {
	for _, b := range sent {
		b.p.RecordBatches = nil
		b.recycle()
	}
}

// batchBufs recycles the buffers a fetch response's record batches are
// copied into; the write loop hands them back once the response is encoded
// (putFetchBufs). Without it a consumer reading at full speed allocates a
// fresh buffer of up to a megabyte or more per partition per fetch.
var batchBufs sync.Pool

// maxPooledBatches bounds the buffers batchBufs keeps: above the 10 MiB
// partition fetches (max.partition.fetch.bytes) of throughput-tuned
// consumers, whose buffers were never kept at 8 MiB.
const maxPooledBatches = 32 << 20

func getBatchBuf(size int) []byte {
	if bp, ok := batchBufs.Get().(*[]byte); ok && cap(*bp) >= size {
		return (*bp)[:0]
	}
	return make([]byte, 0, size)
}

// putFetchBufs hands a fetch response's record batch buffers, and its
// partitions, back once the response is encoded; the response must not be
// used after.
func putFetchBufs(resp *kmsg.FetchResponse) {
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			b := resp.Topics[i].Partitions[j].RecordBatches
			resp.Topics[i].Partitions[j].RecordBatches = nil
			if cap(b) > 0 && cap(b) <= maxPooledBatches {
				batchBufs.Put(&b)
			}
		}
		putRespParts(resp.Topics[i].Partitions)
		resp.Topics[i].Partitions = nil
	}
}

// The partitions of fetch answers of many partitions, the watches of their
// long polls, and the partitions a fetch session reads are recycled: a
// consumer of a thousand partitions that keeps up fetches hundreds of
// times a second, and these (some 270 KiB a fetch) were most of what the
// node allocated.
var (
	respParts = slicePool[kmsg.FetchResponseTopicPartition]{}
	watchBufs = slicePool[protocols.Watch]{}
	readParts = slicePool[kmsg.FetchRequestTopicPartition]{}
)

func getRespParts(n int) []kmsg.FetchResponseTopicPartition { return respParts.get(n) }

// putRespParts keeps ps (its whole capacity: an answer on a fetch session
// keeps a prefix) for a later response.
func putRespParts(ps []kmsg.FetchResponseTopicPartition) { respParts.put(ps) }

// dropResp recycles the partitions of a response that is not sent (a long
// poll read again); its read buffers are left to the collector, never
// recycled while a sent batch may be in them.
func dropResp(resp *kmsg.FetchResponse) {
	for i := range resp.Topics {
		putRespParts(resp.Topics[i].Partitions)
		resp.Topics[i].Partitions = nil
	}
}

// slicePool recycles slices of minPooled to maxPooled elements; shorter
// ones are allocated each time, longer ones are not kept.
type slicePool[T any] struct{ p sync.Pool }

const minPooled, maxPooled = 16, 1 << 16

// get is a slice of n elements, not necessarily zero.
func (sp *slicePool[T]) get(n int) []T {
	if n >= minPooled {
		if p, ok := sp.p.Get().(*[]T); ok && cap(*p) >= n {
			return (*p)[:n]
		}
	}
	return make([]T, n)
}

// put keeps s's whole capacity, cleared, for a later get.
func (sp *slicePool[T]) put(s []T) {
	s = s[:cap(s)]
	if len(s) < minPooled || len(s) > maxPooled {
		return
	}
	clear(s)
	sp.p.Put(&s)
}
