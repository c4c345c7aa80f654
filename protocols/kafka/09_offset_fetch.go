package kafka

// OffsetFetch, versions 1-8 (v8 asks for several groups). A partition with
// no committed offset answers offset -1 without error; no topics (v2+)
// means every partition the group has committed in the Kafka namespace.
// RequireStable needs no waiting: there are no pending transactional
// offsets.

import (
	"context"

	"github.com/ternmq/tern/protocols"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.OffsetFetch, 1, 8, handleOffsetFetch) }

// fetchedOffset is one answer of offsetsFor.
type fetchedOffset struct {
	topic     string
	partition int32
	offset    int64
	epoch     int32
	metadata  string
	code      int16
}

func handleOffsetFetch(c *conn, kr kmsg.Request, r *reply) error {
	req := kr.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version < 8 {
		var topics []kmsg.OffsetFetchRequestGroupTopic
		if req.Topics != nil {
			topics = make([]kmsg.OffsetFetchRequestGroupTopic, 0, len(req.Topics))
			for _, t := range req.Topics {
				topics = append(topics, kmsg.OffsetFetchRequestGroupTopic{Topic: t.Topic, Partitions: t.Partitions})
			}
		}
		got, code := c.s.offsetsFor(c.ctx, req.Group, topics)
		resp.ErrorCode = code
		for _, f := range got {
			if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != f.topic {
				resp.Topics = append(resp.Topics, kmsg.OffsetFetchResponseTopic{Topic: f.topic})
			}
			t := &resp.Topics[len(resp.Topics)-1]
			p := kmsg.NewOffsetFetchResponseTopicPartition()
			p.Partition, p.Offset, p.LeaderEpoch, p.ErrorCode = f.partition, f.offset, f.epoch, f.code
			p.Metadata = kmsg.StringPtr(f.metadata)
			t.Partitions = append(t.Partitions, p)
		}
		r.resp = resp
		return nil
	}
	for _, rg := range req.Groups {
		got, code := c.s.offsetsFor(c.ctx, rg.Group, rg.Topics)
		g := kmsg.NewOffsetFetchResponseGroup()
		g.Group = rg.Group
		g.ErrorCode = code
		for _, f := range got {
			if n := len(g.Topics); n == 0 || g.Topics[n-1].Topic != f.topic {
				g.Topics = append(g.Topics, kmsg.OffsetFetchResponseGroupTopic{Topic: f.topic})
			}
			t := &g.Topics[len(g.Topics)-1]
			p := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			p.Partition, p.Offset, p.LeaderEpoch, p.ErrorCode = f.partition, f.offset, f.epoch, f.code
			p.Metadata = kmsg.StringPtr(f.metadata)
			t.Partitions = append(t.Partitions, p)
		}
		resp.Groups = append(resp.Groups, g)
	}
	r.resp = resp
	return nil
}

// offsetsFor reads a group's committed offsets for the given topics, or
// for everything it committed when topics is nil.
func (s *Server) offsetsFor(ctx context.Context, group string, topics []kmsg.OffsetFetchRequestGroupTopic) ([]fetchedOffset, int16) {
	if group == "" {
		return nil, kerr.InvalidGroupID.Code
	}
	var out []fetchedOffset
	if topics == nil {
		got, err := s.b.FetchOffsets(ctx, group, nil)
		if err != nil {
			return nil, errCode(err)
		}
		for _, co := range got {
			if co.Partition.Topic.NamespaceName() != s.ns || validKafkaName(co.Partition.Topic.Local) != nil {
				continue
			}
			out = append(out, fetchedOffset{
				topic: co.Partition.Topic.Local, partition: int32(max(co.Partition.Index, 0)),
				offset: co.Offset, epoch: co.LeaderEpoch, metadata: co.Metadata,
			})
		}
		return out, 0
	}
	tc := s.newTopicCache(false)
	for _, t := range topics {
		var parts []protocols.Partition
		var idx []int32
		for _, p := range t.Partitions {
			part, err := tc.partition(ctx, t.Topic, p)
			if err != nil {
				out = append(out, fetchedOffset{topic: t.Topic, partition: p, offset: -1, epoch: -1})
				continue
			}
			parts = append(parts, part)
			idx = append(idx, p)
		}
		if len(parts) == 0 {
			continue
		}
		got, err := s.b.FetchOffsets(ctx, group, parts)
		if err != nil {
			return nil, errCode(err)
		}
		for i, co := range got {
			f := fetchedOffset{topic: t.Topic, partition: idx[i], offset: -1, epoch: -1}
			if co.Found {
				f.offset, f.epoch, f.metadata = co.Offset, co.LeaderEpoch, co.Metadata
			}
			out = append(out, f)
		}
	}
	return out, 0
}
