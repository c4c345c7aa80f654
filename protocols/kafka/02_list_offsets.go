package kafka

// ListOffsets, versions 1-7: earliest (-2), latest (-1) and by timestamp.
//
// Differences from Apache Kafka: the max-timestamp query (-3, v7) and the
// tiered-storage queries (-4, -5) get INVALID_REQUEST; leader epochs are -1.
// By timestamp, the answer is the first record whose timestamp reaches the
// one asked for, with that record's timestamp; -1 when none does.

import (
	"github.com/ternmq/tern/protocols"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.ListOffsets, 1, 7, handleListOffsets) }

func handleListOffsets(c *conn, kr kmsg.Request, r *reply) error {
	req := kr.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	tc := c.s.newTopicCache(false)
	ctx := c.ctx
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, p := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = p.Partition
			sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
			part, err := tc.partition(ctx, rt.Topic, p.Partition)
			if err != nil {
				sp.ErrorCode = errCode(err)
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			off, err := c.s.b.Offsets(ctx, part)
			if err != nil {
				sp.ErrorCode = errCode(err)
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			switch ts := p.Timestamp; {
			case ts == -2:
				sp.Offset = off.Start
			case ts == -1:
				sp.Offset = off.HighWatermark
				if req.IsolationLevel == 1 {
					sp.Offset = off.LastStable
				}
			case ts < 0:
				sp.ErrorCode = kerr.InvalidRequest.Code
			default:
				o, err := c.s.b.OffsetForTime(ctx, part, ts, protocols.EventTime)
				if err != nil {
					sp.ErrorCode = errCode(err)
					break
				}
				if o < off.HighWatermark {
					sp.Offset = o
					sp.Timestamp = c.s.recordTimestamp(c, part, o, ts)
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	r.resp = resp
	return nil
}

// recordTimestamp is the timestamp of the record at offset, or fallback
// when it cannot be read.
func (s *Server) recordTimestamp(c *conn, p protocols.Partition, offset, fallback int64) int64 {
	res, err := s.b.Fetch(c.ctx, p, offset, 1)
	if err != nil || len(res.Entries) == 0 {
		return fallback
	}
	e, err := protocols.DecodeEntry(res.Entries[0].Value)
	if err != nil {
		return fallback
	}
	msgs, err := protocols.Records(e.Batch, e.Header, &c.dec)
	if err != nil {
		return fallback
	}
	for _, m := range msgs {
		if m.Offset == offset {
			return m.Timestamp
		}
	}
	return fallback
}
