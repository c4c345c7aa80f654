package kafka

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testCoordinator is a coordinator without a node: group operations need
// none.
func testCoordinator(t *testing.T) *coordinator {
	cfg := DefaultConfig()
	cfg.GroupMinSessionTimeout = 10 * time.Millisecond
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.groups.close)
	return s.groups
}

// joinAsync sends a JoinGroup and returns where its answer arrives.
func joinAsync(t *testing.T, co *coordinator, version int16, member string, instance *string, session time.Duration) chan *kmsg.JoinGroupResponse {
	t.Helper()
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = version
	req.Group, req.MemberID, req.InstanceID = "g", member, instance
	req.SessionTimeoutMillis = int32(session.Milliseconds())
	req.RebalanceTimeoutMillis = int32(session.Milliseconds())
	req.ProtocolType = "consumer"
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte(member)}}
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	co.run("g", func(g *group) {
		g.join(joinReq{req: req, clientID: "c", clientHost: "/127.0.0.1", reply: func(r *kmsg.JoinGroupResponse) { ch <- r }})
	})
	return ch
}

func await[T any](t *testing.T, ch chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatalf("no answer to %s", what)
	}
	panic("unreachable")
}

func syncAsync(co *coordinator, member string, gen int32, assign map[string]string) chan *kmsg.SyncGroupResponse {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.Generation = "g", member, gen
	for m, a := range assign {
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m, MemberAssignment: []byte(a)})
	}
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	co.run("g", func(g *group) { g.sync(req, func(r *kmsg.SyncGroupResponse) { ch <- r }) })
	return ch
}

func heartbeat(co *coordinator, member string, gen int32) int16 {
	var code int16
	co.run("g", func(g *group) {
		code = g.heartbeat(&kmsg.HeartbeatRequest{Group: "g", MemberID: member, Generation: gen})
	})
	return code
}

// TestGroupLifecycle walks a group through KIP-394 member ids, a first
// generation, a second member's rebalance, a leave and a session expiry.
func TestGroupLifecycle(t *testing.T) {
	co := testCoordinator(t)
	long := 5 * time.Second

	r := await(t, joinAsync(t, co, 7, "", nil, long), "first join")
	if r.ErrorCode != kerr.MemberIDRequired.Code || r.MemberID == "" {
		t.Fatalf("first join: %+v, want MEMBER_ID_REQUIRED with an id", r)
	}
	a := r.MemberID
	r = await(t, joinAsync(t, co, 7, a, nil, long), "join with id")
	if r.ErrorCode != 0 || r.Generation != 1 || r.LeaderID != a || len(r.Members) != 1 {
		t.Fatalf("join: %+v", r)
	}
	if s := await(t, syncAsync(co, a, 1, map[string]string{a: "all"}), "sync"); s.ErrorCode != 0 || string(s.MemberAssignment) != "all" {
		t.Fatalf("sync: %+v", s)
	}
	if c := heartbeat(co, a, 1); c != 0 {
		t.Fatalf("heartbeat: %d", c)
	}

	// A second member (v3: no MEMBER_ID_REQUIRED) starts a rebalance; the
	// first learns of it from its heartbeat and rejoins.
	bch := joinAsync(t, co, 3, "", nil, 100*time.Millisecond)
	if c := heartbeat(co, a, 1); c != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat during rebalance: %d", c)
	}
	ra := await(t, joinAsync(t, co, 7, a, nil, long), "leader rejoin")
	rb := await(t, bch, "second join")
	if ra.Generation != 2 || rb.Generation != 2 || ra.LeaderID != a || rb.LeaderID != a || len(ra.Members) != 2 || len(rb.Members) != 0 {
		t.Fatalf("generation 2: leader %+v follower %+v", ra, rb)
	}
	b := rb.MemberID
	fch := syncAsync(co, b, 2, nil) // the follower waits for the leader
	if s := await(t, syncAsync(co, a, 2, map[string]string{a: "p0", b: "p1"}), "leader sync"); string(s.MemberAssignment) != "p0" {
		t.Fatalf("leader sync: %+v", s)
	}
	if s := await(t, fch, "follower sync"); string(s.MemberAssignment) != "p1" {
		t.Fatalf("follower sync: %+v", s)
	}
	if c := heartbeat(co, b, 1); c != kerr.IllegalGeneration.Code {
		t.Fatalf("stale generation heartbeat: %d", c)
	}

	// b stops heartbeating: its 100ms session expires and a rebalances
	// alone into generation 3.
	deadline := time.Now().Add(5 * time.Second)
	for heartbeat(co, a, 2) != kerr.RebalanceInProgress.Code {
		if time.Now().After(deadline) {
			t.Fatal("b's session never expired")
		}
		time.Sleep(20 * time.Millisecond)
	}
	ra = await(t, joinAsync(t, co, 7, a, nil, long), "rejoin after expiry")
	if ra.Generation != 3 || len(ra.Members) != 1 {
		t.Fatalf("after expiry: %+v", ra)
	}
	if c := heartbeat(co, b, 3); c != kerr.UnknownMemberID.Code {
		t.Fatalf("expired member heartbeat: %d", c)
	}

	var codes []int16
	co.run("g", func(g *group) { codes = g.leave([]kmsg.LeaveGroupRequestMember{{MemberID: a}, {MemberID: "nobody"}}) })
	if codes[0] != 0 || codes[1] != kerr.UnknownMemberID.Code {
		t.Fatalf("leave: %v", codes)
	}
	co.run("g", func(g *group) {
		if g.state != groupEmpty {
			t.Errorf("state after the last member left: %v", g.state)
		}
	})
}

// TestGroupStaticMember: a static member that restarts (new member id,
// same instance id) takes its old place without a rebalance, and its old
// member id is fenced.
func TestGroupStaticMember(t *testing.T) {
	co := testCoordinator(t)
	long := 5 * time.Second
	ia, ib := "instance-a", "instance-b"
	cha := joinAsync(t, co, 5, "", &ia, long)
	ra := await(t, cha, "a joins")
	if ra.ErrorCode != 0 {
		t.Fatalf("a: %+v", ra)
	}
	await(t, syncAsync(co, ra.MemberID, ra.Generation, map[string]string{ra.MemberID: "x"}), "a sync")
	chb := joinAsync(t, co, 5, "", &ib, long)
	ra2 := await(t, joinAsync(t, co, 5, ra.MemberID, &ia, long), "a rejoins")
	rb := await(t, chb, "b joins")
	gen := ra2.Generation
	leaderSync := syncAsync(co, ra2.MemberID, gen, map[string]string{ra2.MemberID: "pa", rb.MemberID: "pb"})
	await(t, leaderSync, "leader sync")
	await(t, syncAsync(co, rb.MemberID, gen, nil), "b sync")

	// b restarts: a new member id for the same instance, same metadata.
	rb2 := await(t, joinAsync(t, co, 5, "", &ib, long), "b rejoins after restart")
	if rb2.ErrorCode != 0 || rb2.Generation != gen || rb2.MemberID == rb.MemberID {
		t.Fatalf("static rejoin: %+v, want generation %d and a new id", rb2, gen)
	}
	if s := await(t, syncAsync(co, rb2.MemberID, gen, nil), "b sync after restart"); string(s.MemberAssignment) != "pb" {
		t.Fatalf("static member lost its assignment: %+v", s)
	}
	var code int16
	co.run("g", func(g *group) {
		code = g.heartbeat(&kmsg.HeartbeatRequest{Group: "g", MemberID: rb.MemberID, InstanceID: &ib, Generation: gen})
	})
	if code != kerr.FencedInstanceID.Code {
		t.Fatalf("old member id of a static member: %d, want FENCED_INSTANCE_ID", code)
	}
}

// A Stable group's stored record brings back the same group; records that
// cannot describe a group are refused.
func TestGroupRecordRoundTrip(t *testing.T) {
	co := testCoordinator(t)
	a := await(t, joinAsync(t, co, 3, "", nil, time.Minute), "join a").MemberID
	await(t, syncAsync(co, a, 1, map[string]string{a: "all"}), "sync a")
	inst := "static-b"
	bch := joinAsync(t, co, 3, "", &inst, time.Minute)
	await(t, joinAsync(t, co, 3, a, nil, time.Minute), "rejoin a")
	b := await(t, bch, "join b").MemberID
	bsync := syncAsync(co, b, 2, nil)
	await(t, syncAsync(co, a, 2, map[string]string{a: "p0", b: "p1"}), "sync a")
	if r := await(t, bsync, "sync b"); string(r.MemberAssignment) != "p1" {
		t.Fatalf("b's assignment %q", r.MemberAssignment)
	}

	var rec []byte
	meta := map[string]string{}
	co.run("g", func(g *group) {
		rec = g.record()
		if rec == nil {
			t.Errorf("no record for a %v group", g.state)
		}
		for id, m := range g.members {
			meta[id] = string(m.metadata("range"))
		}
	})
	got := co.newGroup("g2")
	if err := got.restore(rec); err != nil {
		t.Fatal(err)
	}
	if got.state != groupStable || got.generation != 2 || got.leader != a || got.protocol != "range" || got.protocolType != "consumer" {
		t.Fatalf("restored %v generation %d leader %s protocol %s/%s", got.state, got.generation, got.leader, got.protocolType, got.protocol)
	}
	if !slices.Equal(got.order, []string{a, b}) || got.statics[inst] != b {
		t.Fatalf("restored order %v statics %v", got.order, got.statics)
	}
	for id, assign := range map[string]string{a: "p0", b: "p1"} {
		m := got.members[id]
		if m == nil || string(m.assignment) != assign || m.session != time.Minute || len(m.protocols) != 1 || string(m.protocols[0].Metadata) != meta[id] {
			t.Fatalf("restored member %s: %+v", id, m)
		}
		if left := time.Until(m.deadline); left < 50*time.Second {
			t.Fatalf("restored member %s: session ends in %v, want a fresh minute", id, left)
		}
	}
	if again := got.record(); !bytes.Equal(again, rec) {
		t.Fatalf("restored group records\n%s\nnot\n%s", again, rec)
	}

	bad := map[string]func(r *storedGroup){
		"version":         func(r *storedGroup) { r.Version = 2 },
		"no members":      func(r *storedGroup) { r.Members = nil },
		"leader gone":     func(r *storedGroup) { r.Leader = "nobody" },
		"repeated member": func(r *storedGroup) { r.Members[1].ID = r.Members[0].ID },
		"empty member id": func(r *storedGroup) { r.Members[1].ID = "" },
	}
	for name, spoil := range bad {
		var r storedGroup
		_ = json.Unmarshal(rec, &r)
		spoil(&r)
		data, _ := json.Marshal(r)
		if err := co.newGroup("g3").restore(data); err == nil {
			t.Errorf("%s: restored", name)
		}
	}
	if err := co.newGroup("g3").restore([]byte("{")); err == nil {
		t.Error("truncated record restored")
	}
}
