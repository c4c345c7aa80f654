package kafka

// ListGroups, versions 0-4 (v4 filters by state). Groups that only have
// committed offsets are listed as Empty consumer groups.

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.ListGroups, 0, 4, handleListGroups) }

func handleListGroups(c *conn, kr kmsg.Request, r *reply) error {
	req := kr.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	seen := map[string]bool{}
	add := func(id, protocolType, state string) {
		if seen[id] {
			return
		}
		seen[id] = true
		if len(req.StatesFilter) > 0 && !slices.ContainsFunc(req.StatesFilter, func(s string) bool { return equalFold(s, state) }) {
			return
		}
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.ProtocolType, g.GroupState, g.GroupType = id, protocolType, state, "classic"
		resp.Groups = append(resp.Groups, g)
	}
	for _, g := range c.s.groups.all() {
		var pt, st string
		if c.s.groups.runExisting(g.id, func(g *group) { pt, st = g.protocolType, g.state.String() }) && st != "Dead" {
			if pt == "" {
				pt = "consumer"
			}
			add(g.id, pt, st)
		}
	}
	if ids, err := c.s.b.ListGroupsWithOffsets(c.ctx); err == nil {
		for _, id := range ids {
			add(id, "consumer", "Empty")
		}
	} else {
		resp.ErrorCode = errCode(err)
	}
	r.resp = resp
	return nil
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i]|0x20, b[i]|0x20
		if x != y {
			return false
		}
	}
	return true
}
