package pulsar

// SEEK -> SUCCESS | ERROR.
//
// By message id or by publish time (the first entry appended at or after
// it). A message id moves the subscription to the start of the delivery it
// names, as Pulsar moves it to the start of the entry: the client drops the
// messages of that delivery up to the id itself (the Go client compares
// exclusively, so the named message is not received again). The earliest
// and latest sentinels seek to the ends; an id of another incarnation of the
// topic counts as the earliest or the latest. As in Pulsar, every consumer of the
// subscription is then closed with CLOSE_CONSUMER, queued before this
// SUCCESS, and clients subscribe again at the new position.

import (
	"context"

	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/protocols/pulsar/pb"
)

func (c *conn) handleSeek(cmd *pb.CommandSeek) {
	rid := cmd.GetRequestId()
	cs := c.consumer(cmd.GetConsumerId())
	if cs == nil || cs.cons == nil {
		c.queue(errorCommand(rid, pb.ServerError_ConsumerNotFound, "no such consumer on this connection"))
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, requestTimeout)
	defer cancel()
	var t protocols.SeekTarget
	switch {
	case cmd.MessagePublishTime != nil:
		t = protocols.SeekTarget{ByTime: true, Time: int64(cmd.GetMessagePublishTime())}
	case cmd.GetMessageId() != nil:
		sp := startPosition(cmd.GetMessageId(), cs.ledger)
		switch sp.Kind {
		case protocols.StartEarliest:
			t.Offset = 0
		case protocols.StartLatest:
			o, err := c.s.b.Offsets(ctx, cs.part)
			if err != nil {
				c.replyError(rid, err)
				return
			}
			t.Offset = o.HighWatermark
		default:
			t.Offset = int64(cmd.GetMessageId().GetEntryId())
		}
	default:
		c.queue(errorCommand(rid, pb.ServerError_NotAllowedError, "SEEK needs a message_id or a message_publish_time"))
		return
	}
	if err := cs.cons.Seek(ctx, t); err != nil {
		c.replyError(rid, err)
		return
	}
	c.queue(successCommand(rid))
}
