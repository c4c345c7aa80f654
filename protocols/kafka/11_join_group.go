package kafka

// JoinGroup, versions 0-7 (v8+ adds a reason string and v9 SkipAssignment;
// not advertised). See group.go for the coordinator and its differences
// from Apache Kafka. From v4 a new member without a member id gets
// MEMBER_ID_REQUIRED with its id (KIP-394).

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(kmsg.JoinGroup, 0, 7, handleJoinGroup) }

func handleJoinGroup(c *conn, kr kmsg.Request, r *reply) error {
	req := kr.(*kmsg.JoinGroupRequest)
	fail := func(code int16) kmsg.Response {
		resp := kmsg.NewPtrJoinGroupResponse()
		resp.ErrorCode = code
		resp.Generation = -1
		resp.MemberID = req.MemberID
		return resp
	}
	j := joinReq{req: req, clientID: c.clientID, clientHost: c.clientHost()}
	c.parkInGroup(r, req.Group, func(g *group, answer func(kmsg.Response)) {
		j.reply = func(resp *kmsg.JoinGroupResponse) { answer(resp) }
		g.join(j)
	}, fail)
	return nil
}
