package kafka

// The classic group coordinator (JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup). One goroutine per group owns its state; handlers send it
// closures and the goroutine answers through reply callbacks, which hand
// the response to the connection's writer. A JoinGroup or SyncGroup that
// must wait for other members simply keeps its callback in the member until
// the rebalance step that answers it.
//
// States follow Kafka: Empty -> PreparingRebalance (members rejoin, until
// all known members have or the rebalance timeout passes) ->
// CompletingRebalance (the leader computes assignments and sends them in
// its SyncGroup) -> Stable. Members are removed when their session times
// out without a heartbeat (a member parked in JoinGroup or SyncGroup counts
// as alive), when they leave, or when they do not rejoin in time.
//
// Static members (group.instance.id) keep their identity across restarts:
// a rejoin with a new member id replaces the old one and, in a Stable
// group with unchanged metadata, gets the current generation without a
// rebalance. Eager and cooperative rebalancing need nothing special here:
// cooperative-sticky clients run two ordinary rebalances.
//
// Membership is stored at each Stable generation and restored at startup
// (group_persist.go), so members that outlive a restart carry on.
//
// Differences from Apache Kafka: there is no initial rebalance delay; the
// chosen protocol is the first of the leader's protocols that every member
// supports, rather than a vote.

import (
	"crypto/rand"
	"encoding/hex"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type groupState int

const (
	groupEmpty groupState = iota
	groupPreparingRebalance
	groupCompletingRebalance
	groupStable
	groupDead
)

func (s groupState) String() string {
	return [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}[s]
}

// coordinator owns every group of this node.
type coordinator struct {
	s  *Server
	mu struct {
		sync.Mutex
		groups map[string]*group
		closed bool
	}
	wg sync.WaitGroup
}

func newCoordinator(s *Server) *coordinator {
	co := &coordinator{s: s}
	co.mu.groups = map[string]*group{}
	return co
}

// group returns the group named id, starting it if needed; nil after close.
func (co *coordinator) group(id string) *group {
	co.mu.Lock()
	defer co.mu.Unlock()
	if co.mu.closed {
		return nil
	}
	g, ok := co.mu.groups[id]
	if !ok {
		g = co.newGroup(id)
		co.start(g)
	}
	return g
}

// newGroup returns an Empty group, not yet running.
func (co *coordinator) newGroup(id string) *group {
	return &group{
		co:      co,
		id:      id,
		reqs:    make(chan func()),
		stop:    make(chan struct{}),
		members: map[string]*member{},
		pending: map[string]time.Time{},
		statics: map[string]string{},
		timer:   time.NewTimer(time.Hour),
	}
}

// start registers g and runs it; co.mu is held.
func (co *coordinator) start(g *group) {
	co.mu.groups[g.id] = g
	co.wg.Add(1)
	go g.run()
}

// existing returns a running group without starting one.
func (co *coordinator) existing(id string) *group {
	co.mu.Lock()
	defer co.mu.Unlock()
	return co.mu.groups[id]
}

// all lists the running groups.
func (co *coordinator) all() []*group {
	co.mu.Lock()
	defer co.mu.Unlock()
	out := make([]*group, 0, len(co.mu.groups))
	for _, g := range co.mu.groups {
		out = append(out, g)
	}
	return out
}

// remove stops g. Whoever takes a group out of the map closes its stop
// channel, so it is closed once.
func (co *coordinator) remove(g *group) {
	co.mu.Lock()
	mine := co.mu.groups[g.id] == g
	if mine {
		delete(co.mu.groups, g.id)
	}
	co.mu.Unlock()
	if mine {
		close(g.stop)
	}
}

func (co *coordinator) close() {
	co.mu.Lock()
	co.mu.closed = true
	gs := co.mu.groups
	co.mu.groups = map[string]*group{}
	co.mu.Unlock()
	for _, g := range gs {
		close(g.stop)
	}
	co.wg.Wait()
}

// do runs f on g's goroutine; false if the group stopped (deleted or the
// server closed) before f ran.
func (g *group) do(f func()) bool {
	select {
	case g.reqs <- f:
		return true
	case <-g.stop:
		return false
	}
}

// member is one group member.
type member struct {
	id         string
	instanceID *string
	clientID   string
	clientHost string

	session   time.Duration
	rebalance time.Duration
	protocols []kmsg.JoinGroupRequestProtocol
	joinVer   int16

	assignment []byte
	deadline   time.Time

	// joinReply and syncReply hold a parked JoinGroup or SyncGroup.
	joinReply func(*kmsg.JoinGroupResponse)
	syncReply func(*kmsg.SyncGroupResponse)
}

// group is one consumer group's state machine, owned by run.
type group struct {
	co   *coordinator
	id   string
	reqs chan func()
	stop chan struct{}

	state        groupState
	generation   int32
	protocolType string
	protocol     string
	leader       string
	members      map[string]*member
	order        []string             // member ids in join order
	pending      map[string]time.Time // ids handed out with MEMBER_ID_REQUIRED
	statics      map[string]string    // instance id -> member id
	rebalanceBy  time.Time
	timer        *time.Timer
	// joins counts JoinGroup requests; stored is the membership record
	// last stored and storedAt what it was taken from (group_persist.go).
	joins    uint64
	stored   []byte
	storedAt recordSource
}

func (g *group) now() time.Time { return g.co.s.cfg.Now() }

func (g *group) run() {
	defer g.co.wg.Done()
	defer g.timer.Stop()
	for {
		select {
		case f := <-g.reqs:
			f()
		case <-g.timer.C:
			g.tick()
		case <-g.stop:
			g.failParked()
			return
		}
		g.persist()
		if g.state == groupEmpty && len(g.members) == 0 && len(g.pending) == 0 {
			// Nothing to keep: committed offsets live in the log's store.
			// A request that raced with this finds the group stopped and
			// starts a new one.
			g.co.remove(g)
			return
		}
		g.rearm()
	}
}

// failParked answers parked requests when the group stops.
func (g *group) failParked() {
	for _, m := range g.members {
		if m.joinReply != nil {
			m.joinReply(g.joinError(m.id, kerr.CoordinatorNotAvailable.Code))
			m.joinReply = nil
		}
		if m.syncReply != nil {
			m.syncReply(&kmsg.SyncGroupResponse{ErrorCode: kerr.CoordinatorNotAvailable.Code})
			m.syncReply = nil
		}
	}
}

// rearm sets the timer to the next deadline: a session expiry, a pending
// member id expiry or the end of the rebalance window.
func (g *group) rearm() {
	var next time.Time
	consider := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, m := range g.members {
		if m.joinReply == nil && m.syncReply == nil {
			consider(m.deadline)
		}
	}
	for _, t := range g.pending {
		consider(t)
	}
	if g.state == groupPreparingRebalance {
		consider(g.rebalanceBy)
	}
	if !g.timer.Stop() {
		select {
		case <-g.timer.C:
		default:
		}
	}
	if next.IsZero() {
		return
	}
	g.timer.Reset(max(next.Sub(g.now()), time.Millisecond))
}

func (g *group) tick() {
	now := g.now()
	for id, t := range g.pending {
		if !now.Before(t) {
			delete(g.pending, id)
		}
	}
	var expired []string
	for _, id := range g.order {
		m := g.members[id]
		if m.joinReply == nil && m.syncReply == nil && !now.Before(m.deadline) {
			expired = append(expired, id)
		}
	}
	for _, id := range expired {
		g.co.s.log.Info("group member session expired", "group", g.id, "member", id)
		g.removeMember(id)
	}
	if len(expired) > 0 {
		g.membersChanged()
	}
	if g.state == groupPreparingRebalance && !now.Before(g.rebalanceBy) {
		g.completeJoin()
	}
}

func newMemberID(clientID string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	if clientID == "" {
		clientID = "member"
	}
	return clientID + "-" + hex.EncodeToString(b[:])
}

func (g *group) removeMember(id string) {
	m, ok := g.members[id]
	if !ok {
		return
	}
	if m.joinReply != nil {
		m.joinReply(g.joinError(id, kerr.UnknownMemberID.Code))
	}
	if m.syncReply != nil {
		m.syncReply(&kmsg.SyncGroupResponse{ErrorCode: kerr.UnknownMemberID.Code})
	}
	delete(g.members, id)
	g.order = slices.DeleteFunc(g.order, func(s string) bool { return s == id })
	if m.instanceID != nil && g.statics[*m.instanceID] == id {
		delete(g.statics, *m.instanceID)
	}
	if g.leader == id {
		g.leader = ""
	}
}

// membersChanged moves the group on after members left or expired.
func (g *group) membersChanged() {
	switch {
	case len(g.members) == 0 && g.state != groupPreparingRebalance:
		g.toEmpty()
	case g.state == groupStable || g.state == groupCompletingRebalance:
		g.prepareRebalance()
	case g.state == groupPreparingRebalance:
		g.maybeCompleteJoin()
	}
}

func (g *group) toEmpty() {
	g.state = groupEmpty
	g.leader = ""
	g.protocol = ""
	if len(g.members) == 0 {
		g.protocolType = ""
	}
}

func (g *group) prepareRebalance() {
	if g.state == groupCompletingRebalance {
		for _, m := range g.members {
			if m.syncReply != nil {
				m.syncReply(&kmsg.SyncGroupResponse{ErrorCode: kerr.RebalanceInProgress.Code})
				m.syncReply = nil
			}
		}
	}
	for _, m := range g.members {
		m.assignment = nil
	}
	var longest time.Duration
	for _, m := range g.members {
		longest = max(longest, m.rebalance)
	}
	g.state = groupPreparingRebalance
	g.rebalanceBy = g.now().Add(longest)
	g.maybeCompleteJoin()
}

func (g *group) maybeCompleteJoin() {
	if g.state != groupPreparingRebalance {
		return
	}
	for _, m := range g.members {
		if m.joinReply == nil {
			return
		}
	}
	g.completeJoin()
}

// completeJoin ends the join phase: members that did not rejoin are
// dropped, the generation moves on and every parked JoinGroup is answered,
// the leader's with every member's metadata.
func (g *group) completeJoin() {
	for _, id := range slices.Clone(g.order) {
		if g.members[id].joinReply == nil {
			g.co.s.log.Info("group member did not rejoin in time", "group", g.id, "member", id)
			g.removeMember(id)
		}
	}
	g.generation++
	if len(g.members) == 0 {
		g.toEmpty()
		return
	}
	if _, ok := g.members[g.leader]; !ok {
		g.leader = g.order[0]
	}
	g.protocol = g.chooseProtocol()
	g.state = groupCompletingRebalance
	now := g.now()
	for _, id := range g.order {
		m := g.members[id]
		resp := g.joinResponse(m)
		if id == g.leader {
			for _, oid := range g.order {
				om := g.members[oid]
				resp.Members = append(resp.Members, kmsg.JoinGroupResponseMember{
					MemberID: oid, InstanceID: om.instanceID, ProtocolMetadata: om.metadata(g.protocol),
				})
			}
		}
		m.joinReply(resp)
		m.joinReply = nil
		m.deadline = now.Add(m.session)
	}
}

func (g *group) joinResponse(m *member) *kmsg.JoinGroupResponse {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Generation = g.generation
	resp.ProtocolType = kmsg.StringPtr(g.protocolType)
	resp.Protocol = kmsg.StringPtr(g.protocol)
	resp.LeaderID = g.leader
	resp.MemberID = m.id
	return resp
}

func (g *group) joinError(memberID string, code int16) *kmsg.JoinGroupResponse {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.ErrorCode = code
	resp.Generation = -1
	resp.MemberID = memberID
	return resp
}

// chooseProtocol picks the first of the leader's protocols every member
// supports; join checked that one exists.
func (g *group) chooseProtocol() string {
	for _, p := range g.members[g.leader].protocols {
		all := true
		for _, m := range g.members {
			if !m.supports(p.Name) {
				all = false
				break
			}
		}
		if all {
			return p.Name
		}
	}
	return g.members[g.leader].protocols[0].Name
}

func (m *member) supports(name string) bool {
	for _, p := range m.protocols {
		if p.Name == name {
			return true
		}
	}
	return false
}

func (m *member) metadata(name string) []byte {
	for _, p := range m.protocols {
		if p.Name == name {
			return p.Metadata
		}
	}
	return nil
}

// compatible reports whether protocols share a protocol with every member
// other than except.
func (g *group) compatible(protocolType string, protocols []kmsg.JoinGroupRequestProtocol, except string) bool {
	if len(g.members) == 0 || (len(g.members) == 1 && g.members[except] != nil) {
		return true
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range protocols {
		all := true
		for id, m := range g.members {
			if id != except && !m.supports(p.Name) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

func sameProtocols(a, b []kmsg.JoinGroupRequestProtocol) bool {
	return slices.EqualFunc(a, b, func(x, y kmsg.JoinGroupRequestProtocol) bool {
		return x.Name == y.Name && string(x.Metadata) == string(y.Metadata)
	})
}
