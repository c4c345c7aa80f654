package pulsar

// ACK [-> ACK_RESPONSE when the client sent a request_id].
//
// Individual and cumulative acks name messages by (ledger, entry id) as
// delivered; without an ack_set the whole delivery is acknowledged (for a
// cumulative ack, everything up to its end), with one only the messages
// whose bit is clear (batch-index acknowledgement). Ids of another
// incarnation of the topic are ignored. Acks that carry a validation_error
// (the client could not decode the message) acknowledge it all the same:
// the client has dropped it. Cumulative acks on Shared and Key_Shared
// subscriptions are refused.

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/protocols/pulsar/pb"
)

func (c *conn) handleAck(cmd *pb.CommandAck) {
	cs := c.consumer(cmd.GetConsumerId())
	var err error
	if cs == nil || cs.cons == nil {
		err = protocols.ErrConsumerClosed
	} else {
		acks := make([]protocols.AckPosition, 0, len(cmd.GetMessageId()))
		for _, id := range cmd.GetMessageId() {
			off, ok := cs.position(id)
			if !ok {
				continue
			}
			a := protocols.AckPosition{Offset: off, BatchIndex: -1}
			if set := id.GetAckSet(); len(set) > 0 {
				a.Unacked = make([]uint64, len(set))
				for i, w := range set {
					a.Unacked[i] = uint64(w)
				}
			}
			acks = append(acks, a)
		}
		if len(acks) > 0 {
			ctx, cancel := context.WithTimeout(c.ctx, requestTimeout)
			err = cs.cons.Ack(ctx, acks, cmd.GetAckType() == pb.CommandAck_Cumulative)
			cancel()
		}
	}
	if cmd.RequestId == nil {
		if err != nil && cs != nil {
			c.log.Debug("ack refused", "consumer_id", cmd.GetConsumerId(), "err", err)
		}
		return
	}
	reply := &pb.CommandAckResponse{ConsumerId: proto.Uint64(cmd.GetConsumerId()), RequestId: proto.Uint64(cmd.GetRequestId())}
	if err != nil {
		code, msg := serverError(err)
		reply.Error = code.Enum()
		reply.Message = proto.String(msg)
	}
	c.queue(NewCommand(reply))
}
