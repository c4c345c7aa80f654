package kafka

// OffsetCommit, versions 2-8. Offsets are stored durably (fsynced) through
// the broker before the reply, all partitions of a request in one atomic
// write. A commit from a group member is checked against the member id and
// generation; a commit with generation -1 and no member id (a consumer
// assigning partitions itself) is accepted while the group has no members.
// RetentionTimeMillis (v2-4) is ignored: offsets live until the group or
// the topic is deleted.

import (
	"github.com/ternmq/tern/protocols"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.OffsetCommit, 2, 8, handleOffsetCommit) }

func handleOffsetCommit(c *conn, kr kmsg.Request, r *reply) error {
	req := kr.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	code := int16(0)
	switch {
	case req.Group == "":
		code = kerr.InvalidGroupID.Code
	case req.Generation < 0 && req.MemberID == "":
		c.s.groups.runExisting(req.Group, func(g *group) { code = g.commitCheck(req.MemberID, req.InstanceID, req.Generation) })
	default:
		code = kerr.UnknownMemberID.Code
		c.s.groups.runExisting(req.Group, func(g *group) { code = g.commitCheck(req.MemberID, req.InstanceID, req.Generation) })
	}
	tc := c.s.newTopicCache(false)
	var offsets []protocols.CommittedOffset
	var slots []*kmsg.OffsetCommitResponseTopicPartition
	resp.Topics = make([]kmsg.OffsetCommitResponseTopic, len(req.Topics))
	for ti, rt := range req.Topics {
		st := &resp.Topics[ti]
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(rt.Partitions))
		for pi, p := range rt.Partitions {
			sp := &st.Partitions[pi]
			sp.Partition = p.Partition
			if code != 0 {
				sp.ErrorCode = code
				continue
			}
			part, err := tc.partition(c.ctx, rt.Topic, p.Partition)
			if err != nil {
				sp.ErrorCode = errCode(err)
				continue
			}
			co := protocols.CommittedOffset{Partition: part, Offset: p.Offset, LeaderEpoch: p.LeaderEpoch}
			if req.Version < 6 {
				co.LeaderEpoch = -1
			}
			if p.Metadata != nil {
				co.Metadata = *p.Metadata
			}
			offsets = append(offsets, co)
			slots = append(slots, sp)
		}
	}
	if len(offsets) > 0 {
		if err := c.s.b.CommitOffsets(c.ctx, req.Group, offsets); err != nil {
			for _, sp := range slots {
				sp.ErrorCode = errCode(err)
			}
		}
	}
	r.resp = resp
	return nil
}
