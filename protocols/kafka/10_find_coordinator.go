package kafka

// FindCoordinator, versions 0-4. Every group is coordinated by the local
// node. Transaction coordinators (key type 1) are refused with
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED and a message until transactions
// land, so a transactional producer fails at once with a clear error
// instead of retrying; idempotent producers do not ask for one.

import (
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.FindCoordinator, 0, 4, handleFindCoordinator) }

func handleFindCoordinator(c *conn, kr kmsg.Request, r *reply) error {
	req := kr.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	local := c.s.b.LocalNode()
	host, portS, _ := net.SplitHostPort(local.KafkaAddr)
	port, _ := strconv.Atoi(portS)
	answer := func(key string) (int32, string, int32, int16, *string) {
		switch {
		case req.CoordinatorType == 1:
			return -1, "", -1, kerr.TransactionalIDAuthorizationFailed.Code, errMessage(errUnsupportedTxn)
		case req.CoordinatorType != 0:
			return -1, "", -1, kerr.InvalidRequest.Code, kmsg.StringPtr("coordinator type must be 0 (group) or 1 (transaction)")
		case key == "":
			return -1, "", -1, kerr.InvalidGroupID.Code, kmsg.StringPtr("empty group id")
		}
		return local.ID, host, int32(port), 0, nil
	}
	if req.Version >= 4 {
		for _, k := range req.CoordinatorKeys {
			co := kmsg.NewFindCoordinatorResponseCoordinator()
			co.Key = k
			co.NodeID, co.Host, co.Port, co.ErrorCode, co.ErrorMessage = answer(k)
			resp.Coordinators = append(resp.Coordinators, co)
		}
	} else {
		resp.NodeID, resp.Host, resp.Port, resp.ErrorCode, resp.ErrorMessage = answer(req.CoordinatorKey)
	}
	r.resp = resp
	return nil
}
