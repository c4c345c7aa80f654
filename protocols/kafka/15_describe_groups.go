package kafka

// DescribeGroups, versions 0-5. A group with committed offsets but no
// members is Empty; an unknown group is Dead, without error, as in Kafka.

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.DescribeGroups, 0, 5, handleDescribeGroups) }

func handleDescribeGroups(c *conn, kr kmsg.Request, r *reply) error {
	req := kr.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	var withOffsets []string
	for _, id := range req.Groups {
		d := kmsg.NewDescribeGroupsResponseGroup()
		d.Group = id
		d.AuthorizedOperations = -2147483648
		if id == "" {
			d.ErrorCode = kerr.InvalidGroupID.Code
			resp.Groups = append(resp.Groups, d)
			continue
		}
		if !c.s.groups.runExisting(id, func(g *group) { d = g.describe() }) {
			if withOffsets == nil {
				withOffsets, _ = c.s.b.ListGroupsWithOffsets(c.ctx)
				if withOffsets == nil {
					withOffsets = []string{}
				}
			}
			d.State = "Dead"
			if slices.Contains(withOffsets, id) {
				d.State = "Empty"
				d.ProtocolType = "consumer"
			}
		}
		resp.Groups = append(resp.Groups, d)
	}
	r.resp = resp
	return nil
}
