package proxy

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ternmq/tern/dedup"
	"github.com/ternmq/tern/localstore"
	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/protocols/kafka"
)

// kafkaState is the node's Kafka state: the front end, per partition the
// idempotence table (loaded from localstore on first use), and the
// producer id allocator.
type kafkaState struct {
	// srv is the running Kafka front end, for metrics.
	srv atomic.Pointer[kafka.Server]
	// reqTimeVec and reqPhaseVec are the request time and phase
	// histograms; reqTime caches their observers per API key.
	reqTimeVec  *prometheus.HistogramVec
	reqPhaseVec *prometheus.HistogramVec
	reqTime     [96]atomic.Pointer[kafkaObservers]

	mu    sync.Mutex
	parts map[localstore.PartitionID]*idemPart

	idMu   sync.Mutex
	nextID int64
	idEnd  int64 // first id not yet reserved on disk
}

type idemPart struct {
	once sync.Once
	k    *dedup.Kafka
	err  error
}

// producerIDBlock is how many producer ids are reserved on disk at once:
// one durable write per block, and a restart skips the rest of a block.
const producerIDBlock = 1000

const metaProducerID = "kafka/producer-id-next"

// NewProducerID implements protocols.ProducerIDs. Ids are reserved in
// blocks persisted before any id of the block is handed out, so an id is
// never handed out twice, across restarts included.
func (n *Node) NewProducerID(ctx context.Context) (int64, error) {
	s := &n.kafka
	s.idMu.Lock()
	defer s.idMu.Unlock()
	if s.nextID == s.idEnd {
		start := int64(0)
		v, ok, err := n.store.GetMeta(metaProducerID)
		if err != nil {
			return 0, mapStoreErr(err)
		}
		if ok {
			if len(v) != 8 {
				return 0, fmt.Errorf("%w: producer id counter of %d bytes", localstore.ErrCorrupt, len(v))
			}
			start = int64(binary.BigEndian.Uint64(v))
		}
		end := start + producerIDBlock
		if err := n.store.PutMeta(metaProducerID, binary.BigEndian.AppendUint64(nil, uint64(end))); err != nil {
			return 0, mapStoreErr(err)
		}
		s.nextID, s.idEnd = start, end
	}
	id := s.nextID
	s.nextID++
	return id, nil
}

// idempotence returns a partition's Kafka dedup table, loading it from
// localstore the first time.
func (n *Node) idempotence(pid localstore.PartitionID) (*dedup.Kafka, error) {
	s := &n.kafka
	s.mu.Lock()
	if s.parts == nil {
		s.parts = map[localstore.PartitionID]*idemPart{}
	}
	ip := s.parts[pid]
	if ip == nil {
		ip = &idemPart{}
		s.parts[pid] = ip
	}
	s.mu.Unlock()
	ip.once.Do(func() {
		loaded := map[int64]dedup.State{}
		prefix := localstore.ProducerPrefix(pid, dedup.KindKafka)
		ip.err = n.store.Scan(context.Background(), prefix, func(k localstore.Key, v []byte) error {
			id, err := dedup.ParseProducerKey(k[len(prefix):])
			if err != nil {
				return err
			}
			st, err := dedup.DecodeState(v)
			if err != nil {
				return fmt.Errorf("producer %d: %w", id, err)
			}
			loaded[id] = st
			return nil
		})
		if ip.err != nil {
			ip.err = fmt.Errorf("%w: loading Kafka producer state: %v", protocols.ErrStorage, ip.err)
			return
		}
		ip.k = dedup.NewKafka(loaded, dedup.DefaultExpiry)
	})
	if ip.err != nil {
		s.mu.Lock()
		delete(s.parts, pid) // let the next produce try again
		s.mu.Unlock()
	}
	return ip.k, ip.err
}

// kafkaGuard is layer 2 of deduplication (DESIGN §5): Kafka idempotent
// producers. It returns nil for batches without a producer id. check runs
// under the partition's append lock; finish must be called with the
// append's outcome.
func (n *Node) kafkaGuard(pid localstore.PartitionID, h *protocols.BatchHeader) (check func(int64) ([]localstore.Op, *localstore.AppendResult, error), finish func(error), err error) {
	b, ok := dedup.BatchOf(h)
	if !ok {
		return nil, func(error) {}, nil
	}
	k, err := n.idempotence(pid)
	if err != nil {
		return nil, nil, err
	}
	var d dedup.Decision
	check = func(base int64) ([]localstore.Op, *localstore.AppendResult, error) {
		var err error
		d, err = k.Check(b, base, n.now().UnixMilli())
		if err != nil {
			return nil, nil, err
		}
		if d.Duplicate {
			return nil, &localstore.AppendResult{BaseOffset: d.BaseOffset, Count: d.Count, AppendTime: -1}, nil
		}
		ops := make([]localstore.Op, 0, 1+len(d.Expired))
		ops = append(ops, localstore.Op{
			Key:   localstore.ProducerKey(pid, dedup.KindKafka, dedup.ProducerKey(b.ProducerID)),
			Value: dedup.EncodeState(d.State),
		})
		for _, id := range d.Expired {
			ops = append(ops, localstore.Op{Key: localstore.ProducerKey(pid, dedup.KindKafka, dedup.ProducerKey(id)), Delete: true})
		}
		return ops, nil, nil
	}
	finish = func(err error) {
		if err != nil {
			k.Abort(d)
		} else {
			k.Commit(d)
		}
	}
	return check, finish, nil
}
