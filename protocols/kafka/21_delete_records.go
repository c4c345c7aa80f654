package kafka

// DeleteRecords, versions 0-2. Moves the log start offset; whole entries
// below it are removed, so the low watermark answered may be below the
// offset asked for when it falls inside an entry (clients never see the
// records below it: fetches start at the log start offset). Offset -1
// means the high watermark.

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(kmsg.DeleteRecords, 0, 2, handleDeleteRecords) }

func handleDeleteRecords(c *conn, kr kmsg.Request, r *reply) error {
	req := kr.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	tc := c.s.newTopicCache(false)
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		for _, p := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = p.Partition
			sp.LowWatermark = -1
			part, err := tc.partition(c.ctx, rt.Topic, p.Partition)
			if err == nil {
				sp.LowWatermark, err = c.s.b.DeleteRecordsBefore(c.ctx, part, p.Offset)
			}
			sp.ErrorCode = errCode(err)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	r.resp = resp
	return nil
}
