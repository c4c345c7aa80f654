package kafka

// LeaveGroup, versions 0-4 (v3+ leaves several members, static ones by
// instance id).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.LeaveGroup, 0, 4, handleLeaveGroup) }

func handleLeaveGroup(c *conn, kr kmsg.Request, r *reply) error {
	req := kr.(*kmsg.LeaveGroupRequest)
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	members := req.Members
	if req.Version < 3 {
		members = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	codes := make([]int16, len(members))
	for i := range codes {
		codes[i] = kerr.UnknownMemberID.Code
	}
	c.s.groups.runExisting(req.Group, func(g *group) { codes = g.leave(members) })
	if req.Version < 3 {
		resp.ErrorCode = codes[0]
	} else {
		for i, m := range members {
			resp.Members = append(resp.Members, kmsg.LeaveGroupResponseMember{MemberID: m.MemberID, InstanceID: m.InstanceID, ErrorCode: codes[i]})
		}
	}
	r.resp = resp
	return nil
}
