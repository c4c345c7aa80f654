package kafka

// DeleteTopics, versions 0-4 (by name; v6 topic ids are not served). A
// deleted topic loses its logs, cursors and committed offsets at once.

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(kmsg.DeleteTopics, 0, 4, handleDeleteTopics) }

func handleDeleteTopics(c *conn, kr kmsg.Request, r *reply) error {
	req := kr.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	for _, name := range req.TopicNames {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic = kmsg.StringPtr(name)
		tn, err := c.s.topicName(name)
		if err == nil {
			err = c.s.b.DeleteTopic(c.ctx, tn)
		}
		st.ErrorCode = errCode(err)
		st.ErrorMessage = errMessage(err)
		resp.Topics = append(resp.Topics, st)
	}
	r.resp = resp
	return nil
}
