package kafka

// CreatePartitions, versions 0-3. Grows a partitioned topic; a Pulsar
// non-partitioned topic cannot grow (INVALID_PARTITIONS), and manual
// assignments are refused.

import (
	"fmt"

	"github.com/ternmq/tern/protocols"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.CreatePartitions, 0, 3, handleCreatePartitions) }

func handleCreatePartitions(c *conn, kr kmsg.Request, r *reply) error {
	req := kr.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		err := func() error {
			if len(rt.Assignment) > 0 {
				return errReplicaAssignment
			}
			t, err := c.s.lookupTopic(c.ctx, rt.Topic, false)
			if err != nil {
				return err
			}
			switch {
			case t.Partitions == 0:
				return fmt.Errorf("%w: %s is a non-partitioned topic and cannot grow", protocols.ErrInvalidPartitions, rt.Topic)
			case int(rt.Count) <= t.Partitions:
				return fmt.Errorf("%w: %s has %d partitions; ask for more than that", protocols.ErrInvalidPartitions, rt.Topic, t.Partitions)
			case req.ValidateOnly:
				return nil
			}
			return c.s.b.SetPartitions(c.ctx, t.Name, int(rt.Count))
		}()
		st.ErrorCode = createErrCode(err)
		st.ErrorMessage = errMessage(err)
		resp.Topics = append(resp.Topics, st)
	}
	r.resp = resp
	return nil
}
