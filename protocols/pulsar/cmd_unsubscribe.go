package pulsar

// UNSUBSCRIBE -> SUCCESS | ERROR. Deletes the subscription; while other
// consumers are attached it fails with ConsumerBusy unless force is set,
// which closes them (CLOSE_CONSUMER).

import (
	"context"

	"github.com/ternmq/tern/protocols/pulsar/pb"
)

func (c *conn) handleUnsubscribe(cmd *pb.CommandUnsubscribe) {
	cs := c.consumer(cmd.GetConsumerId())
	if cs == nil || cs.cons == nil {
		c.queue(errorCommand(cmd.GetRequestId(), pb.ServerError_ConsumerNotFound, "no such consumer on this connection"))
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, requestTimeout)
	defer cancel()
	if err := cs.cons.Unsubscribe(ctx, cmd.GetForce()); err != nil {
		c.replyError(cmd.GetRequestId(), err)
		return
	}
	c.removeConsumer(cs)
	cs.closed.Store(true)
	c.queue(successCommand(cmd.GetRequestId()))
}
