package kafka

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A group's membership is stored whenever the group is Stable and it
// differs from what was stored last: after every completed rebalance, and
// when a static member comes back under a new member id. It is deleted when
// the group has no members left. At startup every stored group comes back
// Stable, with its generation, leader, members and assignments, and each
// member's session starting afresh: a consumer that kept running while the
// node restarted goes on heartbeating and committing under its generation,
// as with Apache Kafka, instead of being told UNKNOWN_MEMBER_ID and
// re-reading everything since its last commit. A member that does not come
// back expires after its session timeout, which rebalances the rest.
//
// A group in the middle of a rebalance keeps the record of its last Stable
// generation; after a restart its members find that generation and rejoin
// as they would after any rebalance.

// groupRecordVersion is the version of storedGroup's encoding.
const groupRecordVersion = 1

// storedGroup is the stored form of a Stable group.
type storedGroup struct {
	Version      int            `json:"v"`
	Generation   int32          `json:"generation"`
	ProtocolType string         `json:"protocol_type"`
	Protocol     string         `json:"protocol"`
	Leader       string         `json:"leader"`
	Members      []storedMember `json:"members"`
}

// storedMember is one member, in join order.
type storedMember struct {
	ID          string           `json:"id"`
	InstanceID  *string          `json:"instance_id,omitempty"`
	ClientID    string           `json:"client_id"`
	ClientHost  string           `json:"client_host"`
	SessionMs   int64            `json:"session_ms"`
	RebalanceMs int64            `json:"rebalance_ms"`
	JoinVersion int16            `json:"join_version"`
	Protocols   []storedProtocol `json:"protocols"`
	Assignment  []byte           `json:"assignment"`
}

type storedProtocol struct {
	Name     string `json:"name"`
	Metadata []byte `json:"metadata"`
}

// record encodes g's membership, or returns nil when g is not Stable.
func (g *group) record() []byte {
	if g.state != groupStable || len(g.members) == 0 {
		return nil
	}
	r := storedGroup{
		Version: groupRecordVersion, Generation: g.generation,
		ProtocolType: g.protocolType, Protocol: g.protocol, Leader: g.leader,
	}
	for _, id := range g.order {
		m := g.members[id]
		sm := storedMember{
			ID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost,
			SessionMs: m.session.Milliseconds(), RebalanceMs: m.rebalance.Milliseconds(),
			JoinVersion: m.joinVer, Assignment: m.assignment,
		}
		for _, p := range m.protocols {
			sm.Protocols = append(sm.Protocols, storedProtocol{Name: p.Name, Metadata: p.Metadata})
		}
		r.Members = append(r.Members, sm)
	}
	b, err := json.Marshal(r)
	if err != nil { // only plain fields: cannot happen
		panic(err)
	}
	return b
}

// recordSource is what a stored record depends on besides heartbeats,
// which change none of it: persist encodes the group again only when one
// of these moved, not after every heartbeat.
type recordSource struct {
	state      groupState
	generation int32
	leader     string
	members    int
	joins      uint64
}

func (g *group) recordSource() recordSource {
	return recordSource{g.state, g.generation, g.leader, len(g.members), g.joins}
}

// persist brings the stored membership up to date after a step of the
// group's goroutine. A failed write is logged and retried after the next
// step that changes the group: the group itself goes on.
func (g *group) persist() {
	if g.co.s.b == nil { // a coordinator without a node, in tests
		return
	}
	src := g.recordSource()
	if src == g.storedAt {
		return
	}
	g.storedAt = src
	rec := g.record()
	switch {
	case rec != nil && !bytes.Equal(rec, g.stored):
		if err := g.co.s.b.PutGroupMembership(g.co.s.ctx, g.id, rec); err != nil {
			g.co.s.log.Warn("storing group membership failed; members may have to rejoin after a restart", "group", g.id, "err", err)
			return
		}
		g.stored = rec
	case rec == nil && len(g.members) == 0 && g.stored != nil:
		if err := g.co.s.b.DeleteGroupMembership(g.co.s.ctx, g.id); err != nil {
			g.co.s.log.Warn("deleting group membership failed", "group", g.id, "err", err)
			return
		}
		g.stored = nil
	}
}

// restore loads a stored membership into a new group (not yet running).
func (g *group) restore(data []byte) error {
	var r storedGroup
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	if r.Version != groupRecordVersion {
		return fmt.Errorf("record version %d, want %d", r.Version, groupRecordVersion)
	}
	if len(r.Members) == 0 {
		return fmt.Errorf("no members")
	}
	now := g.now()
	g.state = groupStable
	g.generation = r.Generation
	g.protocolType, g.protocol, g.leader = r.ProtocolType, r.Protocol, r.Leader
	for _, sm := range r.Members {
		if sm.ID == "" || g.members[sm.ID] != nil {
			return fmt.Errorf("member id %q missing or repeated", sm.ID)
		}
		m := &member{
			id: sm.ID, instanceID: sm.InstanceID, clientID: sm.ClientID, clientHost: sm.ClientHost,
			session: time.Duration(sm.SessionMs) * time.Millisecond, rebalance: time.Duration(sm.RebalanceMs) * time.Millisecond,
			joinVer: sm.JoinVersion, assignment: sm.Assignment,
		}
		m.deadline = now.Add(m.session)
		for _, p := range sm.Protocols {
			m.protocols = append(m.protocols, kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: p.Metadata})
		}
		g.members[m.id] = m
		g.order = append(g.order, m.id)
		if m.instanceID != nil {
			g.statics[*m.instanceID] = m.id
		}
	}
	if g.members[g.leader] == nil {
		return fmt.Errorf("leader %q is not a member", g.leader)
	}
	g.stored = data
	g.storedAt = g.recordSource()
	return nil
}

// load starts every group whose membership was stored. A record that
// cannot be read is logged and deleted: its members rejoin, which is what
// they would have done without it.
func (co *coordinator) load(ctx context.Context) error {
	if co.s.b == nil {
		return nil
	}
	var bad []string
	err := co.s.b.ScanGroupMemberships(ctx, func(id string, data []byte) error {
		g := co.newGroup(id)
		if err := g.restore(bytes.Clone(data)); err != nil {
			co.s.log.Warn("stored group membership unreadable; its members will rejoin", "group", id, "err", err)
			bad = append(bad, id)
			return nil
		}
		co.mu.Lock()
		co.start(g)
		co.mu.Unlock()
		co.s.log.Info("group membership restored", "group", id, "generation", g.generation, "members", len(g.members))
		return nil
	})
	for _, id := range bad {
		if derr := co.s.b.DeleteGroupMembership(ctx, id); derr != nil && err == nil {
			err = derr
		}
	}
	return err
}
