package regions

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"
)

// State is a node's membership state as this node sees it.
type State uint8

// States. Suspect is this node's own failure detector doubting a peer (see
// the package doc for when it is and is not visible); failed means the mesh
// declared the node dead without a leave; left means it left gracefully.
const (
	StateAlive State = iota + 1
	StateSuspect
	StateFailed
	StateLeft
)

var stateNames = [...]string{0: "none", StateAlive: "alive", StateSuspect: "suspect", StateFailed: "failed", StateLeft: "left"}

func (s State) String() string {
	if int(s) < len(stateNames) && stateNames[s] != "" {
		return stateNames[s]
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// MarshalText makes states readable in JSON.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a state back from JSON (clients of the admin API).
func (s *State) UnmarshalText(b []byte) error {
	for i, n := range stateNames {
		if n != "" && n == string(b) {
			*s = State(i)
			return nil
		}
	}
	return fmt.Errorf("regions: unknown node state %q", b)
}

// Up reports whether the node is reachable as far as membership knows
// (alive, or suspect but not yet declared failed).
func (s State) Up() bool { return s == StateAlive || s == StateSuspect }

// Node is one member of the mesh with its decoded tags.
type Node struct {
	// Name is the node's unique name.
	Name string
	// Addr is the node's gossip address, ip:port.
	Addr string
	// Tags are the node's region, rack, identity and service addresses.
	Tags
	// State is the membership state.
	State State
	// StateSince is when this node observed the last state change (remote
	// clocks are not trusted).
	StateSince time.Time
}

// EventKind says what changed.
type EventKind uint8

// Event kinds. Every change of the directory is exactly one event.
const (
	// EventJoin: a node appeared, or came back after failing or leaving.
	EventJoin EventKind = iota + 1
	// EventSuspect: this node's failure detector started doubting a node.
	EventSuspect
	// EventAlive: a suspect node proved alive.
	EventAlive
	// EventFailed: the node was declared dead without leaving.
	EventFailed
	// EventLeave: the node left gracefully.
	EventLeave
	// EventUpdate: the node's tags or address changed; its state did not.
	EventUpdate
	// EventReap: a failed or left node was forgotten after
	// Timings.ReconnectTimeout or Timings.TombstoneTimeout.
	EventReap
	// EventOverflow: the subscriber fell more than Config.SubscriberBuffer
	// events behind; this is its last event and its channel closes next.
	// Take a fresh Directory and subscribe again.
	EventOverflow
)

var kindNames = [...]string{
	EventJoin: "join", EventSuspect: "suspect", EventAlive: "alive", EventFailed: "failed",
	EventLeave: "leave", EventUpdate: "update", EventReap: "reap", EventOverflow: "overflow",
}

func (k EventKind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "event(" + strconv.Itoa(int(k)) + ")"
}

// MarshalText makes kinds readable in JSON.
func (k EventKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Event is one change of the region directory.
type Event struct {
	// Seq numbers the directory's changes from 1 without gaps, so a
	// subscriber can check it missed nothing.
	Seq uint64
	// Kind says what changed.
	Kind EventKind
	// Node is the node after the change (for EventReap: as last known).
	Node Node
	// Prev is the node's state before the change, 0 if it was not in the
	// directory.
	Prev State
	// Time is when this node applied the change.
	Time time.Time
}

// Directory is a consistent copy of the mesh membership: every node this
// node knows, grouped by region.
type Directory struct {
	// Seq is the Seq of the last event applied; events after it are newer.
	Seq uint64
	// LocalNode is this node's name.
	LocalNode string
	// LocalRegion is this node's region.
	LocalRegion string
	// Nodes is sorted by region, then name.
	Nodes []Node
}

// Regions lists the regions with at least one known node, sorted.
func (d Directory) Regions() []string {
	var out []string
	for _, n := range d.Nodes {
		if len(out) == 0 || out[len(out)-1] != n.Region {
			out = append(out, n.Region)
		}
	}
	return out
}

// Region lists the nodes of one region (any state), sorted by name. The
// result shares d.Nodes' backing array.
func (d Directory) Region(region string) []Node {
	lo, _ := slices.BinarySearchFunc(d.Nodes, region, func(n Node, r string) int { return cmp.Compare(n.Region, r) })
	hi := lo
	for hi < len(d.Nodes) && d.Nodes[hi].Region == region {
		hi++
	}
	return d.Nodes[lo:hi:hi]
}

// Node finds a node by name.
func (d Directory) Node(name string) (Node, bool) {
	for _, n := range d.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return Node{}, false
}

// memberInfo is what the directory needs from a serf member; it keeps the
// state machine free of serf types so it can be tested alone.
type memberInfo struct {
	Name string
	Addr string
	Tags map[string]string
}

// entry is the directory's record of one node.
type entry struct {
	node Node
	// While suspect: when the suspicion must have ended (memberlist's
	// longest suspicion plus slack) and the peer's coordinate when it
	// began; a new coordinate object means a direct probe of the peer
	// succeeded since.
	suspectDeadline time.Time
	suspectCoord    any
}

// dirState is the region directory's state machine. Only the mesh's run
// goroutine mutates it, under Mesh.mu. Every method returns the events its
// change produced; an input that changes nothing produces none, which is
// what makes delivery exactly-once even when serf repeats itself.
type dirState struct {
	local string
	seq   uint64
	nodes map[string]*entry
	// tagErrs remembers the last tag problem logged per node, to log
	// each problem once.
	tagErrs map[string]string
	// mismatch records since when reconcile has seen a node differ from
	// serf's member list.
	mismatch map[string]time.Time
}

func newDirState(local string) *dirState {
	return &dirState{
		local:    local,
		nodes:    make(map[string]*entry),
		tagErrs:  make(map[string]string),
		mismatch: make(map[string]time.Time),
	}
}

// nodeFrom builds the node record from member info; a tag problem is
// returned for logging but does not drop the node.
func nodeFrom(m memberInfo) (Node, error) {
	tags, err := ParseTags(m.Tags)
	n := Node{Name: m.Name, Addr: m.Addr, Tags: tags}
	if err != nil {
		err = fmt.Errorf("node %s: %w", m.Name, err)
	}
	return n, err
}

func joinHostPort(ip net.IP, port uint16) string {
	return net.JoinHostPort(ip.String(), strconv.Itoa(int(port)))
}

func (d *dirState) emit(out []Event, kind EventKind, n Node, prev State, now time.Time) []Event {
	d.seq++
	return append(out, Event{Seq: d.seq, Kind: kind, Node: n, Prev: prev, Time: now})
}

// transition moves a node to state target, taking its new tags and
// address. A change of state emits stateKind (EventJoin when the node was
// unknown, failed or left and becomes alive); a change of tags or address
// alone emits EventUpdate; no change emits nothing.
func (d *dirState) transition(n Node, target State, stateKind EventKind, now time.Time) []Event {
	var out []Event
	e, ok := d.nodes[n.Name]
	if !ok {
		n.State, n.StateSince = target, now
		d.nodes[n.Name] = &entry{node: n}
		kind := stateKind
		if target == StateAlive {
			kind = EventJoin
		}
		return d.emit(out, kind, n, 0, now)
	}
	prev := e.node.State
	if prev == target {
		if e.node.Addr == n.Addr && e.node.Tags == n.Tags {
			return nil
		}
		e.node.Addr, e.node.Tags = n.Addr, n.Tags
		return d.emit(out, EventUpdate, e.node, prev, now)
	}
	e.node.Addr, e.node.Tags = n.Addr, n.Tags
	e.node.State, e.node.StateSince = target, now
	e.suspectDeadline, e.suspectCoord = time.Time{}, nil
	kind := stateKind
	if target == StateAlive {
		kind = EventJoin
		if prev == StateSuspect {
			kind = EventAlive
		}
	}
	return d.emit(out, kind, e.node, prev, now)
}

// join applies serf's member-join: the node is alive.
func (d *dirState) join(n Node, now time.Time) []Event {
	return d.transition(n, StateAlive, EventJoin, now)
}

// update applies serf's member-update: new tags, same state. An update for
// an unknown node means the join was missed; it joins now.
func (d *dirState) update(n Node, now time.Time) []Event {
	e, ok := d.nodes[n.Name]
	if !ok {
		return d.join(n, now)
	}
	return d.transition(n, e.node.State, EventUpdate, now)
}

// fail applies serf's member-failed.
func (d *dirState) fail(n Node, now time.Time) []Event {
	return d.transition(n, StateFailed, EventFailed, now)
}

// leave applies serf's member-leave.
func (d *dirState) leave(n Node, now time.Time) []Event {
	return d.transition(n, StateLeft, EventLeave, now)
}

// reap applies serf's member-reap. A reap for a node that is up again
// (it rejoined after serf decided to reap) is stale and ignored.
func (d *dirState) reap(name string, now time.Time) []Event {
	e, ok := d.nodes[name]
	if !ok || e.node.State.Up() {
		return nil
	}
	delete(d.nodes, name)
	delete(d.tagErrs, name)
	return d.emit(nil, EventReap, e.node, e.node.State, now)
}

// suspect records that this node's failure detector suspects a peer. Only
// alive peers become suspect; the local node never does.
func (d *dirState) suspect(name string, now, deadline time.Time, coord any) []Event {
	e, ok := d.nodes[name]
	if !ok || name == d.local || e.node.State != StateAlive {
		return nil
	}
	e.node.State, e.node.StateSince = StateSuspect, now
	e.suspectDeadline, e.suspectCoord = deadline, coord
	return d.emit(nil, EventSuspect, e.node, StateAlive, now)
}

// checkSuspects clears suspicions that ended without a failure: the peer
// answered a direct probe (its coordinate was replaced), or the longest
// possible suspicion is over, which memberlist only survives by the peer
// refuting it. coordOf returns the peer's current coordinate object.
func (d *dirState) checkSuspects(now time.Time, coordOf func(string) any) []Event {
	var names []string
	for name, e := range d.nodes {
		if e.node.State == StateSuspect {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var out []Event
	for _, name := range names {
		e := d.nodes[name]
		c := coordOf(name)
		if (c != nil && c != e.suspectCoord) || !now.Before(e.suspectDeadline) {
			e.node.State, e.node.StateSince = StateAlive, now
			e.suspectDeadline, e.suspectCoord = time.Time{}, nil
			out = d.emit(out, EventAlive, e.node, StateSuspect, now)
		}
	}
	return out
}

// serfView is a member as serf's member list reports it, for reconcile.
type serfView struct {
	info memberInfo
	// state is StateAlive, StateFailed or StateLeft: serf has no suspect.
	state State
}

// reconcile compares the directory with serf's member list and repairs
// differences that persisted for at least grace. serf's snapshotter drops
// an event rather than block when our channel is full, so events can be
// lost; a difference that outlives grace cannot be an event still in
// flight. It returns the repair events and the names repaired.
func (d *dirState) reconcile(members []serfView, now time.Time, grace time.Duration) ([]Event, []string) {
	seen := make(map[string]bool, len(members))
	var out []Event
	var repaired []string
	settle := func(name string, differs bool, repair func() []Event) {
		if !differs {
			delete(d.mismatch, name)
			return
		}
		since, ok := d.mismatch[name]
		if !ok {
			d.mismatch[name] = now
			return
		}
		if now.Sub(since) >= grace {
			delete(d.mismatch, name)
			out = append(out, repair()...)
			repaired = append(repaired, name)
		}
	}
	slices.SortFunc(members, func(a, b serfView) int { return cmp.Compare(a.info.Name, b.info.Name) })
	for _, m := range members {
		seen[m.info.Name] = true
		n, _ := nodeFrom(m.info)
		e, ok := d.nodes[m.info.Name]
		differs := !ok || e.node.Addr != n.Addr || e.node.Tags != n.Tags
		if ok {
			switch m.state {
			case StateAlive:
				differs = differs || !e.node.State.Up()
			default:
				differs = differs || e.node.State != m.state
			}
		}
		settle(m.info.Name, differs, func() []Event {
			switch m.state {
			case StateFailed:
				return d.fail(n, now)
			case StateLeft:
				return d.leave(n, now)
			}
			if e, ok := d.nodes[n.Name]; ok && e.node.State == StateSuspect {
				return d.update(n, now)
			}
			return d.join(n, now)
		})
	}
	var gone []string
	for name := range d.nodes {
		if !seen[name] {
			gone = append(gone, name)
		}
	}
	slices.Sort(gone)
	for _, name := range gone {
		settle(name, true, func() []Event {
			e := d.nodes[name]
			if e.node.State.Up() {
				// serf forgot a node we think is up: it must have failed
				// and been reaped while both events were lost.
				out := d.fail(e.node, now)
				return append(out, d.reap(name, now)...)
			}
			return d.reap(name, now)
		})
	}
	for name := range d.mismatch {
		if _, ok := d.nodes[name]; !ok && !seen[name] {
			delete(d.mismatch, name)
		}
	}
	return out, repaired
}

// directory copies the state out for readers.
func (d *dirState) directory(localRegion string) Directory {
	// Sort pointers, then copy: Node is a few hundred bytes.
	es := make([]*entry, 0, len(d.nodes))
	for _, e := range d.nodes {
		es = append(es, e)
	}
	slices.SortFunc(es, func(a, b *entry) int {
		return cmp.Or(cmp.Compare(a.node.Region, b.node.Region), cmp.Compare(a.node.Name, b.node.Name))
	})
	out := Directory{Seq: d.seq, LocalNode: d.local, LocalRegion: localRegion, Nodes: make([]Node, len(es))}
	for i, e := range es {
		out.Nodes[i] = e.node
	}
	return out
}
