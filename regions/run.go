package regions

// The run loop. serf hands events to a channel it must never block on; the
// pump drains it into the intake, and the run goroutine, the only writer
// of the directory, applies what the intake holds.

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/serf/serf"
)

// intake queues serf events and suspicion hints for the run goroutine
// without ever blocking the producer.
type intake struct {
	mu    sync.Mutex
	items []any
	wake  chan struct{}
}

func (q *intake) push(item any) {
	q.mu.Lock()
	q.items = append(q.items, item)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *intake) take() []any {
	q.mu.Lock()
	items := q.items
	q.items = nil
	q.mu.Unlock()
	return items
}

// suspectHint is memberlist saying it suspects a peer.
type suspectHint struct {
	name string
	at   time.Time
}

// pump moves serf's events into the intake as fast as they come, so serf
// never waits on us.
func (m *Mesh) pump() {
	defer m.coreWG.Done()
	for {
		select {
		case ev := <-m.events:
			m.intake.push(ev)
		case <-m.stopRun:
			for {
				select {
				case ev := <-m.events:
					m.intake.push(ev)
				default:
					return
				}
			}
		}
	}
}

// run owns the directory: it applies serf events and suspicion hints,
// clears suspicions that ended, and repairs lost events.
func (m *Mesh) run() {
	defer m.coreWG.Done()
	ticker := time.NewTicker(m.tick)
	defer ticker.Stop()
	for {
		select {
		case <-m.intake.wake:
			m.drain()
		case now := <-ticker.C:
			m.drain()
			m.housekeep(now)
		case <-m.stopRun:
			// The pump may still be moving its last events; apply
			// whatever reached the intake.
			m.drain()
			return
		}
	}
}

func (m *Mesh) drain() {
	items := m.intake.take()
	if len(items) == 0 {
		return
	}
	now := time.Now()
	var n int
	for _, it := range items {
		if _, ok := it.(suspectHint); ok {
			n = m.serf.NumNodes()
			break
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.mu.dir
	var out []Event
	for _, it := range items {
		switch it := it.(type) {
		case serf.MemberEvent:
			for _, mem := range it.Members {
				node := m.nodeOf(mem)
				switch it.Type {
				case serf.EventMemberJoin:
					out = append(out, d.join(node, now)...)
				case serf.EventMemberUpdate:
					out = append(out, d.update(node, now)...)
				case serf.EventMemberFailed:
					out = append(out, d.fail(node, now)...)
				case serf.EventMemberLeave:
					out = append(out, d.leave(node, now)...)
				case serf.EventMemberReap:
					out = append(out, d.reap(node.Name, now)...)
				}
			}
		case suspectHint:
			deadline := it.at.Add(m.cfg.Timings.SuspicionMaxTimeout(max(n, len(d.nodes))) + m.cfg.Timings.ProbeInterval)
			out = append(out, d.suspect(it.name, now, deadline, m.coordAny(it.name))...)
		}
		// User events and queries are not used by the mesh.
	}
	m.commitLocked(out)
}

// nodeOf converts a serf member, logging a tag problem once per change.
func (m *Mesh) nodeOf(mem serf.Member) Node {
	node, err := nodeFrom(memberInfo{Name: mem.Name, Addr: joinHostPort(mem.Addr, mem.Port), Tags: mem.Tags})
	d := m.mu.dir
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if d.tagErrs[mem.Name] != msg {
		d.tagErrs[mem.Name] = msg
		if err != nil {
			m.log.Warn("peer publishes malformed tags; the bad fields are ignored", "peer", mem.Name, "err", err)
		}
	}
	return node
}

func (m *Mesh) housekeep(now time.Time) {
	m.mu.Lock()
	out := m.mu.dir.checkSuspects(now, m.coordAny)
	m.commitLocked(out)
	m.mu.Unlock()

	if now.Sub(m.lastRecon) < m.grace/2 {
		return
	}
	m.lastRecon = now
	members := m.serf.Members()
	views := make([]serfView, 0, len(members))
	for _, mem := range members {
		var st State
		switch mem.Status {
		case serf.StatusAlive, serf.StatusLeaving:
			st = StateAlive
		case serf.StatusFailed:
			st = StateFailed
		case serf.StatusLeft:
			st = StateLeft
		default:
			continue
		}
		views = append(views, serfView{info: memberInfo{Name: mem.Name, Addr: joinHostPort(mem.Addr, mem.Port), Tags: mem.Tags}, state: st})
	}
	// Events serf emitted before Members() was read may still be in its
	// channels; reconcile only repairs differences older than grace.
	m.drain()
	m.mu.Lock()
	out, repaired := m.mu.dir.reconcile(views, time.Now(), m.grace)
	if len(repaired) > 0 {
		m.log.Warn("repaired the directory from serf's member list; serf dropped events", "peers", repaired)
	}
	m.commitLocked(out)
	m.mu.Unlock()
}

// commitLocked logs and publishes applied events.
func (m *Mesh) commitLocked(out []Event) {
	if len(out) == 0 {
		return
	}
	for _, ev := range out {
		lvl := slog.LevelInfo
		if ev.Kind == EventFailed || ev.Kind == EventSuspect {
			lvl = slog.LevelWarn
		}
		m.log.Log(context.Background(), lvl, "mesh member "+ev.Kind.String(), "peer", ev.Node.Name,
			"region", ev.Node.Region, "state", ev.Node.State, "prev", ev.Prev, "addr", ev.Node.Addr)
		if ev.Node.Name != m.cfg.NodeName && ev.Node.State.Up() {
			m.markJoined()
		}
	}
	m.publishLocked(out)
}

func (m *Mesh) markJoined() {
	m.joinedOnce.Do(func() {
		m.joinErr.Store(nil)
		close(m.joined)
	})
}
