package proxy

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ternmq/tern/localstore"
	"github.com/ternmq/tern/protocols"
)

// pid resolves a partition to its log id.
func (n *Node) pid(p protocols.Partition) (localstore.PartitionID, error) {
	// The name is built on the stack: fetches of many partitions look up
	// each one, and p.Topic.String() allocated for every lookup.
	var buf [128]byte
	pid, err := n.store.LookupPartitionNamed(p.Topic.Append(buf[:0]), p.Index)
	return pid, mapStoreErr(err)
}

// Produce implements protocols.Log.
func (n *Node) Produce(ctx context.Context, p protocols.Partition, req protocols.ProduceRequest) (protocols.ProduceResult, error) {
	pp, err := n.StartProduce(ctx, p, req)
	if err != nil {
		return protocols.ProduceResult{}, err
	}
	return pp.Wait()
}

// pendingProduce adapts a localstore pending append.
type pendingProduce struct{ pa *localstore.PendingAppend }

// Ready reports whether Wait would return at once (protocols.ReadyProduce).
func (pp pendingProduce) Ready() bool { return pp.pa.Ready() }

func (pp pendingProduce) Wait() (protocols.ProduceResult, error) {
	r, err := pp.pa.Wait()
	if err != nil {
		return protocols.ProduceResult{}, mapStoreErr(err)
	}
	return protocols.ProduceResult{
		BaseOffset:     r.BaseOffset,
		LastOffset:     r.BaseOffset + r.Count - 1,
		AppendTime:     r.AppendTime,
		LogStartOffset: r.LogStart,
		Duplicate:      r.Skipped,
	}, nil
}

// StartProduce implements protocols.Log.
func (n *Node) StartProduce(ctx context.Context, p protocols.Partition, req protocols.ProduceRequest) (protocols.PendingProduce, error) {
	pid, err := n.pid(p)
	if err != nil {
		return nil, err
	}
	lim, err := n.limits(ctx, p.Topic)
	if err != nil {
		return nil, err
	}
	if len(req.Batch) > lim.maxMessageBytes {
		return nil, fmt.Errorf("%w: the batch is %d bytes; %s allows %d (max.message.bytes)",
			protocols.ErrMessageTooLarge, len(req.Batch), p.Name(), lim.maxMessageBytes)
	}
	if err := n.checkDiskQuota(p.Topic); err != nil {
		return nil, err
	}
	if err := n.checkBacklogQuota(pid); err != nil && req.Envelope.OriginRegion == "" {
		return nil, err
	}
	var h protocols.BatchHeader
	if req.Header != nil {
		h = *req.Header
	} else if h, err = protocols.ValidateBatch(req.Batch); err != nil {
		return nil, err
	}
	if _, err := protocols.EntrySize(&req.Envelope, len(req.Batch)); err != nil {
		return nil, err
	}
	check, finish, err := n.guard(pid, p, &h, &req.Envelope, lim)
	if err != nil {
		return nil, err
	}
	// The store encodes the envelope and the batch straight into its write
	// batch: the batch is copied once, from the request into the write.
	pa, err := n.store.StartAppend(ctx, pid, localstore.AppendRequest{
		Envelope:   &req.Envelope,
		Batch:      req.Batch,
		Durability: lim.durability,
		Guard:      check,
	})
	finish(err)
	if err != nil {
		return nil, mapStoreErr(err)
	}
	return pendingProduce{pa}, nil
}

// guard returns the deduplication check for an append, or nil. The three
// layers of DESIGN §5 plug in here: Kafka idempotence when the batch
// carries a producer id, Pulsar producer dedup when the envelope names a
// producer and the namespace enables it, replication dedup when the
// envelope has an origin region. check runs under the partition's append
// lock; finish is called with the append's outcome, so layers keeping
// memory state commit it only once the write is applied.
func (n *Node) guard(pid localstore.PartitionID, p protocols.Partition, h *protocols.BatchHeader, env *protocols.Envelope, lim *topicLimits) (check func(int64) ([]localstore.Op, *localstore.AppendResult, error), finish func(error), err error) {
	if env.OriginRegion != "" {
		// A replicated entry: layer 3 only. Its producer's sequence state
		// (layers 1 and 2) belongs to the origin region.
		check, finish := n.replicationGuard(pid, h, env)
		return check, finish, nil
	}
	if check, finish := n.pulsarGuard(pid, h, env, lim); check != nil {
		return check, finish, nil
	}
	return n.kafkaGuard(pid, h)
}

// Fetch implements protocols.Log.
func (n *Node) Fetch(ctx context.Context, p protocols.Partition, offset int64, maxBytes int) (protocols.FetchResult, error) {
	return n.fetch(p, offset, maxBytes, true)
}

// FetchHere implements protocols.Log.
func (n *Node) FetchHere(ctx context.Context, p protocols.Partition, offset int64, maxBytes int) (protocols.FetchResult, error) {
	return n.fetch(p, offset, maxBytes, false)
}

// Prefetch implements protocols.Log.
func (n *Node) Prefetch(ctx context.Context, p protocols.Partition, offset int64, maxBytes int) {
	pid, err := n.pid(p)
	if err != nil {
		return
	}
	if start, hw, err := n.store.Offsets(pid); err == nil && offset >= start && offset < hw {
		n.store.ReadAheadAt(pid, offset, maxBytes)
	}
}

// fetch reads with the store's ReadOn if on, else with its ReadHere.
func (n *Node) fetch(p protocols.Partition, offset int64, maxBytes int, on bool) (protocols.FetchResult, error) {
	pid, err := n.pid(p)
	if err != nil {
		return protocols.FetchResult{}, err
	}
	if start, hw, err := n.store.Offsets(pid); err == nil && offset == hw {
		// At the end of the log there is nothing to read: most
		// partitions of a fetch of many that a consumer keeps up with.
		return protocols.FetchResult{PartitionOffsets: protocols.PartitionOffsets{Start: start, HighWatermark: hw, LastStable: hw}}, nil
	}
	bp := readBufs.Get().(*[]byte)
	// The pooled buffer is the store's from here (ReadOn); the one the
	// entries are in goes back to the pool once they are sent.
	var (
		es  []localstore.Entry
		buf []byte
	)
	if on {
		es, buf, err = n.store.ReadOn(pid, offset, maxBytes, *bp)
	} else {
		es, buf, err = n.store.ReadHere(pid, offset, maxBytes, *bp)
	}
	*bp = buf
	if err != nil {
		readBufs.Put(bp)
		return protocols.FetchResult{}, mapStoreErr(err)
	}
	start, hw, err := n.store.Offsets(pid)
	if err != nil {
		readBufs.Put(bp)
		return protocols.FetchResult{}, mapStoreErr(err)
	}
	return protocols.FetchResult{
		Entries:          es,
		PartitionOffsets: protocols.PartitionOffsets{Start: start, HighWatermark: hw, LastStable: hw},
		Recycle: func() {
			if cap(*bp) <= maxPooledRead {
				readBufs.Put(bp)
			}
		},
	}, nil
}

// readBufs recycles the buffers fetches read entries into, for callers that
// hand them back (FetchResult.Recycle): a consumer reading a backlog at full
// speed would otherwise allocate a fresh multi-megabyte buffer per fetch,
// which the runtime clears, collects and returns to the OS over and over.
var readBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledRead bounds the buffers readBufs keeps. It is above the 10 MiB
// partition fetches of throughput-tuned Kafka consumers: at 8 MiB their
// buffers were never kept, and every fetch allocated and cleared one.
const maxPooledRead = 32 << 20

// Offsets implements protocols.Log.
func (n *Node) Offsets(ctx context.Context, p protocols.Partition) (protocols.PartitionOffsets, error) {
	pid, err := n.pid(p)
	if err != nil {
		return protocols.PartitionOffsets{}, err
	}
	start, hw, err := n.store.Offsets(pid)
	if err != nil {
		return protocols.PartitionOffsets{}, mapStoreErr(err)
	}
	return protocols.PartitionOffsets{Start: start, HighWatermark: hw, LastStable: hw}, nil
}

// Wait implements protocols.Log.
func (n *Node) Wait(ctx context.Context, watches []protocols.Watch) error {
	ws := make([]localstore.Watch, 0, len(watches))
	for _, w := range watches {
		pid, err := n.pid(w.Partition)
		if err != nil {
			return err
		}
		ws = append(ws, localstore.Watch{PID: pid, Offset: w.Offset})
	}
	return mapStoreErr(n.store.Wait(ctx, ws))
}

// OffsetForTime implements protocols.Log. The store finds the first entry
// whose time reaches ts; for event time the answer is refined to the first
// record inside that entry whose timestamp reaches ts.
func (n *Node) OffsetForTime(ctx context.Context, p protocols.Partition, ts int64, kind protocols.TimeKind) (int64, error) {
	pid, err := n.pid(p)
	if err != nil {
		return 0, err
	}
	k := localstore.EventTime
	if kind == protocols.PublishTime {
		k = localstore.AppendTime
	}
	off, found, err := n.store.LookupTime(pid, ts, k)
	if err != nil || !found || kind == protocols.PublishTime {
		return off, mapStoreErr(err)
	}
	es, err := n.store.Read(pid, off, 1)
	if err != nil || len(es) == 0 {
		return off, mapStoreErr(err)
	}
	e, err := protocols.DecodeEntry(es[0].Value)
	if err != nil {
		return off, err
	}
	msgs, err := protocols.Records(e.Batch, e.Header, &protocols.Decompressor{})
	if err != nil {
		return off, err
	}
	for _, m := range msgs {
		if m.Timestamp >= ts && m.Offset >= off {
			return m.Offset, nil
		}
	}
	return off, nil
}

// DeleteRecordsBefore implements protocols.Log.
func (n *Node) DeleteRecordsBefore(ctx context.Context, p protocols.Partition, offset int64) (int64, error) {
	pid, err := n.pid(p)
	if err != nil {
		return 0, err
	}
	start, hw, err := n.store.Offsets(pid)
	if err != nil {
		return 0, mapStoreErr(err)
	}
	if offset < 0 { // Kafka: -1 means the high watermark
		offset = hw
	}
	if offset > hw {
		return 0, &protocols.OffsetOutOfRangeError{Requested: offset, Start: start, End: hw}
	}
	got, err := n.store.TruncateBefore(pid, offset)
	return got, mapStoreErr(err)
}

var errNoGroup = errors.New("proxy: empty group id")
