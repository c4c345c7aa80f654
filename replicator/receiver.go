package replicator

// The receiving side of a partition stream. The engine is the transport's Handler: for each
// stream a peer opens it finds (or creates) the topic with the sender's partition count, tells
// the sender where to start, and appends what arrives through the node's produce path, where
// layer-3 dedup drops copies it already holds. It acknowledges a batch only once every entry of
// it is durable here: appended and fsynced, or recognised as a copy of something durable.
//
// Two goroutines per stream: the handler's reads, checks and starts appends in arrival order
// (so the local log keeps the origin order); a second one waits for each batch's appends to be
// durable and acknowledges it, handing the batch's credit back. The pipeline lets the next batch
// be written while the previous one's fsync runs. A batch whose entries do not decode is refused
// whole, before anything of it is written, and ends the stream.

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ternmq/tern/dedup"
	"github.com/ternmq/tern/localstore"
	"github.com/ternmq/tern/protocols"
)

// Host is the node the engine runs in. Package proxy implements it.
type Host interface {
	// Store is the node's storage: the engine reads partition logs and keeps its cursors there.
	Store() *localstore.Store
	// StartProduce appends through the node's produce path (limits, then deduplication; an
	// entry with an origin region gets layer-3 replication dedup and no other layer).
	StartProduce(ctx context.Context, p protocols.Partition, req protocols.ProduceRequest) (protocols.PendingProduce, error)
	// EnsureTopic returns a topic's description, creating the topic (and its tenant and
	// namespace) with this partition count and config when it does not exist.
	EnsureTopic(ctx context.Context, name protocols.TopicName, partitions int, config map[string]string) (protocols.TopicInfo, error)
}

// inboundKey names one inbound stream's statistics: a partition and the sending node.
type inboundKey struct {
	topic     string
	partition int
	from      string
}

type inbound struct {
	fromRegion string
	open       atomic.Int32
	ctr        struct {
		entries, messages, bytes, duplicates, stale, looped atomic.Uint64
	}
	mu struct {
		sync.Mutex
		lastApplied time.Time
		lastErr     error
		lastErrAt   time.Time
		opens       uint64
	}
}

func (in *inbound) fail(err error, now time.Time) {
	in.mu.Lock()
	in.mu.lastErr, in.mu.lastErrAt = err, now
	in.mu.Unlock()
}

func (e *Engine) inboundFor(k inboundKey, region string) *inbound {
	e.mu.Lock()
	defer e.mu.Unlock()
	in, ok := e.mu.inbound[k]
	if !ok {
		in = &inbound{fromRegion: region}
		e.mu.inbound[k] = in
	}
	return in
}

// Accept implements Handler.
func (e *Engine) Accept(ctx context.Context, rs *RecvStream) error {
	if !e.started.Load() {
		return &LinkError{Code: CodeRejected, Message: "replication is not running on this node yet; retry"}
	}
	req, peer := rs.Request(), rs.Peer()
	x, err := decodeStreamExtra(req.Extra)
	if err != nil {
		return &LinkError{Code: CodeProtocolViolation, Message: err.Error()}
	}
	name, err := protocols.ParseTopicName(req.Topic, "")
	if err == nil && name.String() != req.Topic {
		err = fmt.Errorf("%w: %q is not a full topic name", protocols.ErrInvalidTopicName, req.Topic)
	}
	if err == nil {
		if base, i := name.PartitionIndex(); i >= 0 {
			err = fmt.Errorf("%w: %s is partition %d of %s; streams name the topic and a partition number", protocols.ErrInvalidTopicName, name, i, base)
		}
	}
	if err != nil {
		return &LinkError{Code: CodeRejected, Message: err.Error()}
	}
	index := int(req.Partition)
	if req.PartitionCount == 0 {
		index = -1
	}
	in := e.inboundFor(inboundKey{topic: req.Topic, partition: index, from: peer.Name}, peer.Region)
	in.open.Add(1)
	defer in.open.Add(-1)
	in.mu.Lock()
	in.mu.opens++
	in.mu.Unlock()
	err = e.receive(ctx, rs, name, index, x, in)
	if err != nil && ctx.Err() == nil {
		in.fail(err, e.now())
	}
	return err
}

func (e *Engine) receive(ctx context.Context, rs *RecvStream, name protocols.TopicName, index int, x streamExtra, in *inbound) error {
	req, peer := rs.Request(), rs.Peer()
	info, err := e.host.EnsureTopic(ctx, name, int(req.PartitionCount), nil)
	if err != nil {
		return &LinkError{Code: CodeInternal, Message: fmt.Sprintf("topic %s cannot be created in region %s: %v", name, e.cfg.Region, err)}
	}
	if info.Partitions != int(req.PartitionCount) {
		e.log.Error("replicator: partition count mismatch; replication of the topic stops until the counts are equal",
			"topic", name.String(), "from", peer.Region, "theirs", req.PartitionCount, "ours", info.Partitions)
		return &LinkError{Code: CodePartitionCountMismatch, Message: mismatchAdvice(name, e.cfg.Region, info.Partitions, peer.Region, int(req.PartitionCount))}
	}
	st := e.host.Store()
	pid, err := st.LookupPartition(name.String(), index)
	if err != nil {
		return &LinkError{Code: CodeInternal, Message: err.Error()}
	}
	first := req.StartOffset
	if x.originOnly {
		// The stream carries only entries produced in the sender's region, whose offsets are
		// origin offsets: skip what this node's dedup state already holds (delivered by another
		// path, or before the sender's cursor was lost).
		hwm, ok, err := loadReplState(st, pid, peer.Region)
		if err != nil {
			return &LinkError{Code: CodeInternal, Message: err.Error()}
		}
		if ok && hwm.Epoch == x.epoch && hwm.Next > first {
			if err := st.Sync(); err != nil { // what the state covers must be durable before we say so
				return &LinkError{Code: CodeInternal, Message: err.Error()}
			}
			first = hwm.Next
		}
	}
	if err := rs.Ack(first); err != nil {
		return err
	}
	p := protocols.Partition{Topic: name, Index: index}
	log := e.log.With("topic", name.String(), "partition", index, "from", peer.Name)
	log.Debug("replicator: receiving", "from_offset", first)

	type started struct {
		pending []protocols.PendingProduce
		end     int64
		credit  Credit
		failed  bool
	}
	// The queue is deep: what bounds the work in flight is the credit the sender holds, and
	// the more batches wait for durability together, the more of them one fsync covers.
	queue := make(chan started, 256)
	// The acknowledging goroutine ends rctx when it fails, so a read waiting for entries the
	// sender will not send (its credit is spent on batches we will never acknowledge) ends too.
	rctx, rcancel := context.WithCancelCause(ctx)
	defer rcancel(nil)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		failed := false
		// settle waits for one batch. A duplicate's Wait returns once the original it copies is
		// durable (the store waits for that), so what is acknowledged is always durable here.
		settle := func(b started) {
			for _, pp := range b.pending {
				r, err := pp.Wait()
				switch {
				case err != nil && !failed:
					failed = true
					rcancel(err)
				case err == nil && r.Duplicate:
					in.ctr.duplicates.Add(1)
				case err == nil:
					e.foreign.add(pid, r.BaseOffset, r.LastOffset+1)
				}
			}
			failed = failed || b.failed
		}
		for b := range queue {
			// Take every batch already queued as well: their appends are submitted, so waiting
			// for them together costs one fsync, and one ACK answers them all.
			settle(b)
			end, credit := b.end, b.credit
		more:
			for {
				select {
				case nb, ok := <-queue:
					if !ok {
						break more
					}
					settle(nb)
					end, credit = nb.end, credit.add(nb.credit)
				default:
					break more
				}
			}
			if failed {
				continue // keep waiting for what was started; acknowledge nothing more
			}
			if err := rs.AckAndGrant(end, credit); err != nil {
				failed = true
				rcancel(err)
				continue
			}
			in.mu.Lock()
			in.mu.lastApplied = e.now()
			in.mu.Unlock()
		}
	}()
	defer wg.Wait()
	defer close(queue)

	reqs := make([]protocols.ProduceRequest, 0, 64)
	for {
		b, err := rs.Recv(rctx)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			if c := context.Cause(rctx); c != nil && ctx.Err() == nil {
				return fmt.Errorf("replicator: appending replicated entries to %s: %w", p.Name(), c)
			}
			return err
		}
		reqs, err = e.checkBatch(reqs[:0], b, in)
		if err != nil {
			log.Warn("replicator: refusing a batch that does not decode; closing the stream", "err", err)
			return &LinkError{Code: CodeProtocolViolation, Message: err.Error()}
		}
		sb := started{end: b.End(), credit: b.Credit()}
		for i := range reqs {
			if reqs[i].Batch == nil {
				continue // an entry that already visited this region: nothing to write
			}
			pp, err := e.host.StartProduce(ctx, p, reqs[i])
			if err != nil {
				sb.failed = true
				queue <- sb
				return fmt.Errorf("replicator: appending a replicated entry to %s: %w", p.Name(), err)
			}
			sb.pending = append(sb.pending, pp)
			in.ctr.entries.Add(1)
			in.ctr.messages.Add(uint64(reqs[i].Header.OffsetCount()))
			in.ctr.bytes.Add(uint64(len(reqs[i].Batch)))
		}
		queue <- sb
	}
}

// checkBatch decodes and checks every entry of a batch before any is appended, so a bad batch
// writes nothing. Entries that already visited this region (or started here) come back with a
// nil Batch: they are acknowledged without a write.
func (e *Engine) checkBatch(reqs []protocols.ProduceRequest, b Batch, in *inbound) ([]protocols.ProduceRequest, error) {
	for _, ent := range b.Entries {
		de, err := protocols.DecodeEntry(ent.Value)
		if err != nil {
			return nil, fmt.Errorf("entry at sender offset %d: %w", ent.Offset, err)
		}
		if de.Header.OffsetCount() != int64(ent.Count) {
			return nil, fmt.Errorf("entry at sender offset %d is framed as %d offsets but its batch covers %d", ent.Offset, ent.Count, de.Header.OffsetCount())
		}
		env := de.Envelope
		if env.OriginRegion == "" {
			return nil, fmt.Errorf("entry at sender offset %d has no origin region: senders stamp one", ent.Offset)
		}
		if env.OriginOffset < 0 {
			return nil, fmt.Errorf("entry at sender offset %d has a negative origin offset %d", ent.Offset, env.OriginOffset)
		}
		if _, err := protocols.OriginEpoch(&env); err != nil {
			return nil, fmt.Errorf("entry at sender offset %d: %w", ent.Offset, err)
		}
		if _, _, err := protocols.ReplicateTo(&env); err != nil {
			return nil, fmt.Errorf("entry at sender offset %d: %w", ent.Offset, err)
		}
		if env.OriginRegion == e.cfg.Region || slices.Contains(env.Visited, e.cfg.Region) {
			in.ctr.looped.Add(1)
			reqs = append(reqs, protocols.ProduceRequest{})
			continue
		}
		h := de.Header
		reqs = append(reqs, protocols.ProduceRequest{Envelope: env, Batch: de.Batch, Header: &h})
	}
	return reqs, nil
}

// loadReplState reads the persisted layer-3 state of (partition, origin region).
func loadReplState(st *localstore.Store, pid localstore.PartitionID, origin string) (dedup.ReplState, bool, error) {
	v, ok, err := st.Get(localstore.ReplHWMKey(pid, origin))
	if err != nil || !ok {
		return dedup.ReplState{}, false, err
	}
	s, err := dedup.DecodeReplState(v)
	return s, err == nil, err
}

// mismatchAdvice says how to fix a partition-count mismatch.
func mismatchAdvice(t protocols.TopicName, here string, ours int, there string, theirs int) string {
	show := func(n int) string {
		if n == 0 {
			return "no partitions (a non-partitioned topic)"
		}
		return fmt.Sprintf("%d partitions", n)
	}
	msg := fmt.Sprintf("topic %s has %s in region %s and %s in region %s; a replicated topic needs the same count everywhere: ",
		t, show(ours), here, show(theirs), there)
	switch {
	case ours > 0 && theirs > 0 && ours < theirs:
		msg += fmt.Sprintf("grow it to %d partitions in region %s", theirs, here)
	case ours > 0 && theirs > 0:
		msg += fmt.Sprintf("grow it to %d partitions in region %s", ours, there)
	default:
		msg += "delete the topic in one region and let replication create it, or recreate both with one kind"
	}
	return msg
}

var _ Handler = (*Engine)(nil)
