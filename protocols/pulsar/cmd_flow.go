package pulsar

// FLOW (no answer): the consumer grants more permits, counted in messages.
// The first FLOW also lets held-back ACTIVE_CONSUMER_CHANGE notices through
// (see cmd_subscribe.go).

import (
	"math"

	"github.com/ternmq/tern/protocols/pulsar/pb"
)

func (c *conn) handleFlow(cmd *pb.CommandFlow) {
	if cs := c.consumer(cmd.GetConsumerId()); cs != nil && cs.cons != nil {
		cs.markReady()
		cs.cons.Flow(int(min(cmd.GetMessagePermits(), math.MaxInt32)))
	}
}
