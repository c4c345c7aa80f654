package kafka

// SyncGroup, versions 0-5. The leader's assignments are handed to every
// member as sent; the coordinator does not parse them.

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(kmsg.SyncGroup, 0, 5, handleSyncGroup) }

func handleSyncGroup(c *conn, kr kmsg.Request, r *reply) error {
	req := kr.(*kmsg.SyncGroupRequest)
	fail := func(code int16) kmsg.Response {
		resp := kmsg.NewPtrSyncGroupResponse()
		resp.ErrorCode = code
		return resp
	}
	c.parkInGroup(r, req.Group, func(g *group, answer func(kmsg.Response)) {
		g.sync(req, func(resp *kmsg.SyncGroupResponse) { answer(resp) })
	}, fail)
	return nil
}
