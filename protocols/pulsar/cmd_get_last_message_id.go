package pulsar

// GET_LAST_MESSAGE_ID -> GET_LAST_MESSAGE_ID_RESPONSE.
//
// The last message is (incarnation, first offset of the last entry, index
// of its last message); an empty log answers entry id -1, which the Go
// client reads as "no message". consumer_mark_delete_position is the last
// acknowledged offset below the subscription's mark-delete point.

import (
	"context"
	"math"

	"google.golang.org/protobuf/proto"

	"github.com/ternmq/tern/protocols/pulsar/pb"
)

func (c *conn) handleGetLastMessageID(cmd *pb.CommandGetLastMessageId) {
	rid := cmd.GetRequestId()
	cs := c.consumer(cmd.GetConsumerId())
	if cs == nil || cs.cons == nil {
		c.queue(errorCommand(rid, pb.ServerError_ConsumerNotFound, "no such consumer on this connection"))
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, requestTimeout)
	defer cancel()
	o, err := c.s.b.Offsets(ctx, cs.part)
	if err != nil {
		c.replyError(rid, err)
		return
	}
	last := &pb.MessageIdData{LedgerId: proto.Uint64(uint64(cs.ledger)), EntryId: proto.Uint64(math.MaxUint64), BatchIndex: proto.Int32(-1)}
	if o.HighWatermark > o.Start {
		fr, err := c.s.b.Fetch(ctx, cs.part, o.HighWatermark-1, 1)
		if err != nil {
			c.replyError(rid, err)
			return
		}
		if len(fr.Entries) > 0 {
			e := fr.Entries[len(fr.Entries)-1]
			last.EntryId = proto.Uint64(uint64(e.BaseOffset))
			last.BatchIndex = proto.Int32(int32(e.Count - 1))
			last.BatchSize = proto.Int32(int32(e.Count))
		}
	}
	if cs.part.Index >= 0 {
		last.Partition = proto.Int32(int32(cs.part.Index))
	}
	reply := &pb.CommandGetLastMessageIdResponse{RequestId: proto.Uint64(rid), LastMessageId: last}
	if md, err := cs.cons.MarkDelete(ctx); err == nil {
		reply.ConsumerMarkDeletePosition = &pb.MessageIdData{LedgerId: proto.Uint64(uint64(cs.ledger)), EntryId: proto.Uint64(uint64(md - 1))}
	}
	c.queue(NewCommand(reply))
}
