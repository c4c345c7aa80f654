package pulsar

// REDELIVER_UNACKNOWLEDGED_MESSAGES (no answer).
//
// With message ids (a negative ack) the unacknowledged messages of those
// deliveries go back for redelivery; with none, everything the consumer
// holds does. Each such message counts one redelivery, which the next
// MESSAGE carries as redelivery_count (dead-letter policies act on it).

import (
	"context"

	"github.com/ternmq/tern/protocols/pulsar/pb"
)

func (c *conn) handleRedeliver(cmd *pb.CommandRedeliverUnacknowledgedMessages) {
	cs := c.consumer(cmd.GetConsumerId())
	if cs == nil || cs.cons == nil {
		return
	}
	var offsets []int64
	if ids := cmd.GetMessageIds(); len(ids) > 0 {
		offsets = make([]int64, 0, len(ids))
		for _, id := range ids {
			if off, ok := cs.position(id); ok {
				offsets = append(offsets, off)
			}
		}
		if len(offsets) == 0 {
			return
		}
	}
	ctx, cancel := context.WithTimeout(c.ctx, requestTimeout)
	defer cancel()
	if err := cs.cons.Redeliver(ctx, offsets); err != nil {
		c.log.Debug("redelivery refused", "consumer_id", cs.id, "err", err)
	}
}
