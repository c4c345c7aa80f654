package kafka

// The group operations, each run on the group's goroutine.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// joinReq is a JoinGroup with what the connection knows of the client.
type joinReq struct {
	req        *kmsg.JoinGroupRequest
	clientID   string
	clientHost string
	reply      func(*kmsg.JoinGroupResponse)
}

func (g *group) join(j joinReq) {
	g.joins++ // a Stable group's stored record may change (group_persist.go)
	req := j.req
	co := g.co.s.cfg
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	rebalance := time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	if req.Version == 0 {
		rebalance = session
	}
	switch {
	case g.state == groupDead:
		j.reply(g.joinError(req.MemberID, kerr.CoordinatorNotAvailable.Code))
		return
	case session < co.GroupMinSessionTimeout || session > co.GroupMaxSessionTimeout:
		j.reply(g.joinError(req.MemberID, kerr.InvalidSessionTimeout.Code))
		return
	case req.ProtocolType == "" || len(req.Protocols) == 0 || !g.compatible(req.ProtocolType, req.Protocols, req.MemberID):
		j.reply(g.joinError(req.MemberID, kerr.InconsistentGroupProtocol.Code))
		return
	}
	now := g.now()
	var m *member
	isNew := false
	switch {
	case req.MemberID == "" && req.InstanceID != nil:
		id := newMemberID(j.clientID)
		if oldID, ok := g.statics[*req.InstanceID]; ok {
			// A static member back with a new member id replaces its old
			// self and keeps its assignment.
			m = g.members[oldID]
			if m.joinReply != nil {
				m.joinReply(g.joinError(oldID, kerr.FencedInstanceID.Code))
				m.joinReply = nil
			}
			if m.syncReply != nil {
				m.syncReply(&kmsg.SyncGroupResponse{ErrorCode: kerr.FencedInstanceID.Code})
				m.syncReply = nil
			}
			delete(g.members, oldID)
			for i, o := range g.order {
				if o == oldID {
					g.order[i] = id
				}
			}
			if g.leader == oldID {
				g.leader = id
			}
			m.id = id
			g.members[id] = m
			g.statics[*req.InstanceID] = id
			if g.state == groupStable && sameProtocols(m.protocols, req.Protocols) && g.leader != id {
				m.clientID, m.clientHost = j.clientID, j.clientHost
				m.session, m.rebalance, m.deadline = session, rebalance, now.Add(session)
				j.reply(g.joinResponse(m))
				return
			}
		} else {
			m = &member{id: id, instanceID: req.InstanceID}
			isNew = true
		}
	case req.MemberID == "":
		id := newMemberID(j.clientID)
		if req.Version >= 4 {
			// KIP-394: hand out the id and let the client rejoin with it,
			// so a client that never comes back leaves no member behind.
			g.pending[id] = now.Add(session)
			j.reply(g.joinError(id, kerr.MemberIDRequired.Code))
			return
		}
		m = &member{id: id}
		isNew = true
	default:
		m = g.members[req.MemberID]
		if m == nil {
			if _, ok := g.pending[req.MemberID]; !ok {
				j.reply(g.joinError(req.MemberID, kerr.UnknownMemberID.Code))
				return
			}
			delete(g.pending, req.MemberID)
			m = &member{id: req.MemberID, instanceID: req.InstanceID}
			isNew = true
		} else if req.InstanceID != nil && g.statics[*req.InstanceID] != req.MemberID {
			j.reply(g.joinError(req.MemberID, kerr.FencedInstanceID.Code))
			return
		}
	}
	if isNew {
		if m.instanceID != nil {
			if oldID, ok := g.statics[*m.instanceID]; ok && oldID != m.id {
				g.removeMember(oldID)
			}
			g.statics[*m.instanceID] = m.id
		}
		g.members[m.id] = m
		g.order = append(g.order, m.id)
		if len(g.members) == 1 {
			g.protocolType = req.ProtocolType
		}
	} else if m.joinReply != nil {
		// A retried join replaces the parked one.
		m.joinReply(g.joinError(m.id, kerr.RebalanceInProgress.Code))
	}
	changed := !sameProtocols(m.protocols, req.Protocols)
	m.clientID, m.clientHost = j.clientID, j.clientHost
	m.session, m.rebalance, m.deadline = session, rebalance, now.Add(session)
	m.protocols = req.Protocols
	m.joinVer = req.Version
	if !isNew && !changed && g.state == groupStable && m.id != g.leader {
		// A follower rejoining a stable group with the same metadata gets
		// the current generation; it fetches its assignment with SyncGroup.
		j.reply(g.joinResponse(m))
		return
	}
	m.joinReply = j.reply
	if g.state == groupPreparingRebalance {
		g.rebalanceBy = maxTime(g.rebalanceBy, now.Add(rebalance))
		g.maybeCompleteJoin()
		return
	}
	g.prepareRebalance()
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// check validates a member's identity and generation for SyncGroup,
// Heartbeat and OffsetCommit.
func (g *group) check(memberID string, instanceID *string, generation int32) (*member, int16) {
	m := g.members[memberID]
	if instanceID != nil {
		if id, ok := g.statics[*instanceID]; ok && id != memberID {
			return nil, kerr.FencedInstanceID.Code
		}
	}
	if m == nil {
		return nil, kerr.UnknownMemberID.Code
	}
	if generation != g.generation {
		return m, kerr.IllegalGeneration.Code
	}
	return m, 0
}

func (g *group) sync(req *kmsg.SyncGroupRequest, reply func(*kmsg.SyncGroupResponse)) {
	m, code := g.check(req.MemberID, req.InstanceID, req.Generation)
	if code == 0 && ((req.ProtocolType != nil && *req.ProtocolType != g.protocolType) || (req.Protocol != nil && *req.Protocol != g.protocol)) {
		code = kerr.InconsistentGroupProtocol.Code
	}
	if code == 0 && g.state == groupPreparingRebalance {
		code = kerr.RebalanceInProgress.Code
	}
	if code != 0 {
		reply(&kmsg.SyncGroupResponse{ErrorCode: code})
		return
	}
	m.deadline = g.now().Add(m.session)
	switch g.state {
	case groupStable:
		reply(g.syncResponse(m))
	case groupCompletingRebalance:
		if m.syncReply != nil {
			m.syncReply(&kmsg.SyncGroupResponse{ErrorCode: kerr.RebalanceInProgress.Code})
		}
		m.syncReply = reply
		if m.id != g.leader {
			return
		}
		for _, a := range req.GroupAssignment {
			if am := g.members[a.MemberID]; am != nil {
				am.assignment = a.MemberAssignment
			}
		}
		g.state = groupStable
		now := g.now()
		for _, om := range g.members {
			if om.syncReply != nil {
				om.syncReply(g.syncResponse(om))
				om.syncReply = nil
				om.deadline = now.Add(om.session)
			}
		}
	default:
		reply(&kmsg.SyncGroupResponse{ErrorCode: kerr.UnknownMemberID.Code})
	}
}

func (g *group) syncResponse(m *member) *kmsg.SyncGroupResponse {
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.ProtocolType = kmsg.StringPtr(g.protocolType)
	resp.Protocol = kmsg.StringPtr(g.protocol)
	resp.MemberAssignment = m.assignment
	if resp.MemberAssignment == nil {
		resp.MemberAssignment = []byte{}
	}
	return resp
}

func (g *group) heartbeat(req *kmsg.HeartbeatRequest) int16 {
	m, code := g.check(req.MemberID, req.InstanceID, req.Generation)
	if m != nil && (code == 0 || code == kerr.IllegalGeneration.Code) {
		m.deadline = g.now().Add(m.session)
	}
	if m != nil && g.state == groupPreparingRebalance {
		return kerr.RebalanceInProgress.Code
	}
	return code
}

// leave removes members; it returns an error code per member.
func (g *group) leave(members []kmsg.LeaveGroupRequestMember) []int16 {
	codes := make([]int16, len(members))
	removed := false
	for i, lm := range members {
		id := lm.MemberID
		if lm.InstanceID != nil {
			sid, ok := g.statics[*lm.InstanceID]
			switch {
			case !ok:
				codes[i] = kerr.UnknownMemberID.Code
				continue
			case id != "" && id != sid:
				codes[i] = kerr.FencedInstanceID.Code
				continue
			}
			id = sid
		}
		if _, ok := g.members[id]; !ok {
			codes[i] = kerr.UnknownMemberID.Code
			continue
		}
		g.removeMember(id)
		removed = true
	}
	if removed {
		g.membersChanged()
	}
	return codes
}

// commitCheck validates an OffsetCommit: a commit outside the group
// protocol (generation -1, no member) is allowed only while the group has
// no members, as in Kafka.
func (g *group) commitCheck(memberID string, instanceID *string, generation int32) int16 {
	if generation < 0 && memberID == "" {
		if len(g.members) == 0 {
			return 0
		}
		return kerr.UnknownMemberID.Code
	}
	m, code := g.check(memberID, instanceID, generation)
	if code != 0 {
		return code
	}
	if g.state == groupCompletingRebalance {
		return kerr.RebalanceInProgress.Code
	}
	m.deadline = g.now().Add(m.session)
	return 0
}

func (g *group) describe() kmsg.DescribeGroupsResponseGroup {
	d := kmsg.NewDescribeGroupsResponseGroup()
	d.Group = g.id
	d.State = g.state.String()
	d.ProtocolType = g.protocolType
	d.AuthorizedOperations = -2147483648
	if g.state == groupStable || g.state == groupCompletingRebalance {
		d.Protocol = g.protocol
	}
	for _, id := range g.order {
		m := g.members[id]
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID = id
		dm.InstanceID = m.instanceID
		dm.ClientID = m.clientID
		dm.ClientHost = m.clientHost
		dm.ProtocolMetadata = m.metadata(g.protocol)
		dm.MemberAssignment = m.assignment
		d.Members = append(d.Members, dm)
	}
	return d
}
