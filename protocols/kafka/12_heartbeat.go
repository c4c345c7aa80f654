package kafka

// Heartbeat, versions 0-4. REBALANCE_IN_PROGRESS tells a member to rejoin.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.Heartbeat, 0, 4, handleHeartbeat) }

func handleHeartbeat(c *conn, kr kmsg.Request, r *reply) error {
	req := kr.(*kmsg.HeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ErrorCode = kerr.UnknownMemberID.Code
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
	}
	c.s.groups.runExisting(req.Group, func(g *group) { resp.ErrorCode = g.heartbeat(req) })
	r.resp = resp
	return nil
}
