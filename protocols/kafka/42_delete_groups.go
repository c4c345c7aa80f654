package kafka

// DeleteGroups, versions 0-2. Only a group without members can be deleted
// (NON_EMPTY_GROUP otherwise); its committed offsets go with it.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.DeleteGroups, 0, 2, handleDeleteGroups) }

func handleDeleteGroups(c *conn, kr kmsg.Request, r *reply) error {
	req := kr.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, id := range req.Groups {
		d := kmsg.NewDeleteGroupsResponseGroup()
		d.Group = id
		if id == "" {
			d.ErrorCode = kerr.InvalidGroupID.Code
			resp.Groups = append(resp.Groups, d)
			continue
		}
		var stop *group
		c.s.groups.runExisting(id, func(g *group) {
			if len(g.members) > 0 {
				d.ErrorCode = kerr.NonEmptyGroup.Code
				return
			}
			g.state = groupDead
			stop = g
		})
		if d.ErrorCode == 0 {
			if stop != nil {
				c.s.groups.remove(stop)
			}
			if err := c.s.b.DeleteGroupOffsets(c.ctx, id); err != nil {
				d.ErrorCode = errCode(err)
			}
		}
		resp.Groups = append(resp.Groups, d)
	}
	r.resp = resp
	return nil
}
