package pulsar

// CLOSE_CONSUMER -> SUCCESS. The consumer detaches; what it held
// unacknowledged goes to the subscription's other consumers. Closing an
// unknown consumer succeeds, as in Pulsar.

import "github.com/ternmq/tern/protocols/pulsar/pb"

func (c *conn) handleCloseConsumer(cmd *pb.CommandCloseConsumer) {
	if cs := c.consumer(cmd.GetConsumerId()); cs != nil {
		c.removeConsumer(cs)
		cs.close()
	}
	c.queue(successCommand(cmd.GetRequestId()))
}
