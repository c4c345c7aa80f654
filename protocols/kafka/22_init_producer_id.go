package kafka

// InitProducerId, versions 0-4. Idempotent producers get a producer id
// that is never handed out again on this node (the broker persists the
// counter) and epoch 0. A producer asking to bump its epoch (KIP-360, v3+,
// with its current id and epoch) gets the next epoch, or a fresh id when
// the epoch is exhausted. Transactional ids are refused with
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED until transactions land.

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.InitProducerID, 0, 4, handleInitProducerID) }

func handleInitProducerID(c *conn, kr kmsg.Request, r *reply) error {
	req := kr.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	r.resp = resp
	if req.TransactionalID != nil {
		c.s.log.Warn("transactional producer refused", "remote", c.remote, "client", c.clientID, "transactional_id", *req.TransactionalID, "reason", errUnsupportedTxn)
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return nil
	}
	if req.ProducerID >= 0 && req.ProducerEpoch >= 0 && req.ProducerEpoch < math.MaxInt16-1 {
		resp.ProducerID, resp.ProducerEpoch = req.ProducerID, req.ProducerEpoch+1
		return nil
	}
	id, err := c.s.b.NewProducerID(c.ctx)
	if err != nil {
		resp.ErrorCode = errCode(err)
		return nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return nil
}
