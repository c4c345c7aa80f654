package websocket

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/protocols/pulsar"
	"github.com/ternmq/tern/protocols/pulsar/pb"
)

// resolve finds the logs a session serves, as a Pulsar client given the
// topic would: the one log of a non-partitioned topic, every partition of a
// partitioned topic, or the single partition a name ending in -partition-N
// designates. A missing topic is created non-partitioned when
// AutoCreateTopics is on.
func (s *Server) resolve(ctx context.Context, name protocols.TopicName) ([]protocols.Partition, error) {
	if base, i := name.PartitionIndex(); i >= 0 {
		if t, err := s.b.Topic(ctx, base); err == nil && t.Partitions > 0 {
			if i >= t.Partitions {
				return nil, fmt.Errorf("%w: %s has %d partitions, so %s does not exist", protocols.ErrTopicNotFound, base, t.Partitions, name)
			}
			return []protocols.Partition{{Topic: base, Index: i}}, nil
		}
	}
	t, err := s.b.Topic(ctx, name)
	if errors.Is(err, protocols.ErrTopicNotFound) && s.cfg.AutoCreateTopics {
		t, err = s.b.CreateTopic(ctx, name, 0, nil)
		if errors.Is(err, protocols.ErrTopicExists) {
			t, err = s.b.Topic(ctx, name)
		}
	}
	if err != nil {
		return nil, err
	}
	return t.Logs(), nil
}

// slot is one log a session serves and the incarnation its message ids
// carry as ledger id.
type slot struct {
	part   protocols.Partition
	ledger int64
}

// incarnations looks up every log's incarnation.
func (s *Server) incarnations(ctx context.Context, parts []protocols.Partition) ([]slot, error) {
	out := make([]slot, len(parts))
	for i, p := range parts {
		l, err := s.b.Incarnation(ctx, p)
		if err != nil {
			return nil, err
		}
		out[i] = slot{part: p, ledger: l}
	}
	return out, nil
}

// messageID is a message's id in the WebSocket API: base64 of the
// MessageIdData (ledger = the log's incarnation, entry = the first offset
// of the delivery, batch index = the message's place in it, so offset =
// entry + batch index), with the partition index for a partition of a
// partitioned topic. A delivery of one message carries no batch fields, as
// a Pulsar message outside a batch.
func messageID(sl *slot, entry int64, batchIndex, batchSize int) string {
	id := &pb.MessageIdData{LedgerId: proto.Uint64(uint64(sl.ledger)), EntryId: proto.Uint64(uint64(entry))}
	if sl.part.Index >= 0 {
		id.Partition = proto.Int32(int32(sl.part.Index))
	}
	if batchSize > 1 {
		id.BatchIndex = proto.Int32(int32(batchIndex))
		id.BatchSize = proto.Int32(int32(batchSize))
	}
	s, err := pulsar.FormatMessageID(id)
	if err != nil {
		// MessageIdData has only scalar fields set here; encoding cannot
		// fail.
		panic(err)
	}
	return s
}

// receiptID is the id a producer ack carries: the entry's base offset, or
// the (-1, -1) position Pulsar answers a deduplicated resend with when the
// original's place is not known.
func receiptID(sl *slot, base int64) string {
	if base < 0 {
		id := &pb.MessageIdData{LedgerId: proto.Uint64(math.MaxUint64), EntryId: proto.Uint64(math.MaxUint64)}
		if sl.part.Index >= 0 {
			id.Partition = proto.Int32(int32(sl.part.Index))
		}
		s, _ := pulsar.FormatMessageID(id)
		return s
	}
	return messageID(sl, base, 0, 1)
}

// originID is a message id in the text form Pulsar's clients print
// (ledger:entry:partition[:batchIndex]); dead-lettered messages carry it.
func originID(sl *slot, entry int64, batchIndex, batchSize int) string {
	s := strconv.FormatInt(sl.ledger, 10) + ":" + strconv.FormatInt(entry, 10) + ":" + strconv.Itoa(sl.part.Index)
	if batchSize > 1 {
		s += ":" + strconv.Itoa(batchIndex)
	}
	return s
}

// position is where a client's message id points in a session's logs.
type position struct {
	slot int
	// entry is the delivery's first offset (the id's entry id); batch
	// the index in it, or -1 for a message outside a batch.
	entry int64
	batch int32
}

// offset is the message's offset.
func (p position) offset() int64 { return p.entry + int64(max(p.batch, 0)) }

// locate maps a message id from a client to a log of the session. ok is
// false for an id of another incarnation of the topic (nothing to do, as
// for the binary protocol), a partition the session does not serve, or a
// negative entry.
func locate(slots []slot, id *pb.MessageIdData) (position, bool) {
	i := 0
	if len(slots) > 1 {
		i = int(id.GetPartition())
		if id.Partition == nil || i < 0 || i >= len(slots) || slots[i].part.Index != i {
			return position{}, false
		}
	}
	if int64(id.GetLedgerId()) != slots[i].ledger || int64(id.GetEntryId()) < 0 {
		return position{}, false
	}
	b := int32(-1)
	if id.BatchIndex != nil && id.GetBatchIndex() >= 0 {
		b = id.GetBatchIndex()
	}
	return position{slot: i, entry: int64(id.GetEntryId()), batch: b}, true
}
