package regions

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-sockaddr"
	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/serf"
)

// Mesh is this node's membership in the mesh: a running serf instance, the
// region directory built from its events, and the join loop. Create it
// with New; Close leaves the mesh and stops everything.
type Mesh struct {
	cfg        Config
	log        *slog.Logger
	id         string
	gossipAddr string
	keyring    string
	serf       *serf.Serf
	trans      *transport
	guard      *mergeGuard

	events chan serf.Event
	intake intake

	mu struct {
		sync.RWMutex
		dir  *dirState
		subs map[*subscriber]struct{} // nil once closed
	}

	joined     chan struct{}
	joinedOnce sync.Once
	joinErr    atomic.Pointer[error]
	joinCtx    context.Context
	joinCancel context.CancelFunc

	tick      time.Duration
	grace     time.Duration
	lastRecon time.Time

	stopRun  chan struct{} // stops pump and run, after serf is down
	subsDone chan struct{} // stops subscriber goroutines, after run drained
	coreWG   sync.WaitGroup
	subWG    sync.WaitGroup

	track struct {
		sync.Mutex
		closed bool
		wg     sync.WaitGroup
	}
	closeOnce sync.Once
	closeErr  error
}

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

// New validates cfg, binds the gossip port, starts serf and, when Seeds are
// set, a background join loop. The mesh runs until Close.
func New(cfg Config) (*Mesh, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Seeds = append([]string(nil), cfg.Seeds...)
	base := cfg.Logger.With("node", cfg.NodeName)
	m := &Mesh{
		cfg:      cfg,
		log:      base.With("component", "regions"),
		events:   make(chan serf.Event, 4096),
		joined:   make(chan struct{}),
		stopRun:  make(chan struct{}),
		subsDone: make(chan struct{}),
	}
	m.intake.wake = make(chan struct{}, 1)
	m.tick = min(max(cfg.Timings.ProbeInterval/4, 10*time.Millisecond), time.Second)
	m.grace = max(4*m.tick, time.Second)
	m.joinCtx, m.joinCancel = context.WithCancel(context.Background())

	if cfg.DataDir != "" {
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("regions: DataDir: %w", err)
		}
	}
	id, err := loadIdentity(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	m.id = id
	m.mu.dir = newDirState(cfg.NodeName)
	m.mu.subs = make(map[*subscriber]struct{})

	keyring, err := loadKeyring(cfg, m.log.Warn)
	if err != nil {
		return nil, err
	}
	if keyring != nil {
		m.keyring = cfg.keyringPath()
	}

	bridge := &logBridge{log: base, onSuspect: func(name string) {
		m.intake.push(suspectHint{name: name, at: time.Now()})
	}}
	stdLog := newStdLogger(bridge)

	bindHost, bindPortStr, _ := net.SplitHostPort(cfg.BindAddr)
	bindPort, _ := strconv.Atoi(bindPortStr)
	if bindHost == "" {
		bindHost = "0.0.0.0"
	}
	trans, err := newTransport(bindHost, bindPort, stdLog)
	if err != nil {
		return nil, fmt.Errorf("regions: BindAddr %s: %w", cfg.BindAddr, err)
	}
	m.trans = trans
	if bindPort == 0 {
		bindPort = trans.GetAutoBindPort()
	}
	advIP, advPort, err := m.advertise(bindHost, bindPort)
	if err != nil {
		trans.Shutdown()
		return nil, err
	}
	m.gossipAddr = net.JoinHostPort(advIP, strconv.Itoa(advPort))

	m.guard = newMergeGuard(cfg.NodeName, id, m.log.Warn)
	sc := m.serfConfig(stdLog, keyring, bindHost, bindPort, advIP, advPort)
	s, err := serf.Create(sc)
	if err != nil {
		trans.Shutdown()
		return nil, fmt.Errorf("regions: starting serf: %w", err)
	}
	m.serf = s

	m.coreWG.Add(2)
	go m.pump()
	go m.run()
	if len(cfg.Seeds) == 0 {
		m.markJoined()
	} else {
		m.goTracked(m.joinLoop)
	}
	m.log.Info("mesh started", "region", cfg.Region, "gossip_addr", m.gossipAddr, "id", id,
		"encrypted", keyring != nil, "seeds", cfg.Seeds, "mesh", cfg.MeshName)
	return m, nil
}

// advertise decides the address peers reach this node at.
func (m *Mesh) advertise(bindHost string, bindPort int) (string, int, error) {
	if a := m.cfg.AdvertiseAddr; a != "" {
		host, port := a, bindPort
		if h, p, err := net.SplitHostPort(a); err == nil {
			host = h
			port, _ = strconv.Atoi(p)
		}
		return host, port, nil
	}
	if ip := net.ParseIP(bindHost); ip != nil && !ip.IsUnspecified() {
		return ip.String(), bindPort, nil
	}
	ip, err := sockaddr.GetPrivateIP()
	if err == nil && ip != "" {
		return ip, bindPort, nil
	}
	if len(m.cfg.Seeds) > 0 {
		return "", 0, fmt.Errorf("%w: AdvertiseAddr: the node has no private IP to advertise (%v); set AdvertiseAddr to an IP the seeds can reach", ErrInvalidConfig, err)
	}
	m.log.Warn("no private IP to advertise; advertising 127.0.0.1, so no other node can join this one until AdvertiseAddr is set")
	return "127.0.0.1", bindPort, nil
}

func (m *Mesh) serfConfig(stdLog *log.Logger, keyring *memberlist.Keyring, bindHost string, bindPort int, advIP string, advPort int) *serf.Config {
	t := m.cfg.Timings
	ml := memberlist.DefaultWANConfig()
	ml.Transport = m.trans
	ml.BindAddr, ml.BindPort = bindHost, bindPort
	ml.AdvertiseAddr, ml.AdvertisePort = advIP, advPort
	ml.Label = m.cfg.MeshName
	ml.Keyring = keyring
	ml.Logger = stdLog
	ml.ProbeInterval, ml.ProbeTimeout = t.ProbeInterval, t.ProbeTimeout
	ml.SuspicionMult, ml.SuspicionMaxTimeoutMult = t.SuspicionMult, t.SuspicionMaxTimeoutMult
	ml.GossipInterval, ml.GossipNodes, ml.GossipToTheDeadTime = t.GossipInterval, t.GossipNodes, t.GossipToTheDead
	ml.PushPullInterval, ml.TCPTimeout = t.PushPullInterval, t.TCPTimeout

	sc := serf.DefaultConfig()
	sc.NodeName = m.cfg.NodeName
	sc.Tags = m.cfg.tags(m.id)
	sc.EventCh = m.events
	sc.LogOutput, sc.Logger = nil, stdLog
	sc.MemberlistConfig = ml
	sc.ReapInterval, sc.ReconnectInterval = t.ReapInterval, t.ReconnectInterval
	sc.ReconnectTimeout, sc.TombstoneTimeout = t.ReconnectTimeout, t.TombstoneTimeout
	sc.LeavePropagateDelay = t.LeavePropagateDelay
	sc.BroadcastTimeout = m.cfg.LeaveTimeout
	sc.RejoinAfterLeave = m.cfg.RejoinAfterLeave
	sc.KeyringFile = m.keyring
	sc.ValidateNodeNames = true
	// serf's resolution shuts the losing node's serf down from under us;
	// the merge guard refuses a second identity for our name instead.
	sc.EnableNameConflictResolution = false
	sc.Merge = m.guard
	if m.cfg.DataDir != "" {
		sc.SnapshotPath = filepath.Join(m.cfg.DataDir, "serf.snapshot")
	}
	return sc
}

// goTracked runs f on a goroutine Close waits for; false after Close began.
func (m *Mesh) goTracked(f func()) bool {
	m.track.Lock()
	defer m.track.Unlock()
	if m.track.closed {
		return false
	}
	m.track.wg.Add(1)
	go func() {
		defer m.track.wg.Done()
		f()
	}()
	return true
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

// Close leaves the mesh gracefully (bounded by Config.LeaveTimeout), shuts
// serf down, ends every subscription and waits for every goroutine the
// mesh started. It is safe to call more than once.
func (m *Mesh) Close() error {
	m.closeOnce.Do(func() { m.closeErr = m.shutdown(true) })
	return m.closeErr
}

// shutdown stops the mesh; graceful=false skips the leave, which is what a
// crash looks like to the peers.
func (m *Mesh) shutdown(graceful bool) error {
	m.track.Lock()
	m.track.closed = true
	m.track.Unlock()
	m.joinCancel()

	var errs []error
	if graceful {
		done := make(chan error, 1)
		m.track.wg.Add(1)
		go func() {
			defer m.track.wg.Done()
			done <- m.serf.Leave()
		}()
		timer := time.NewTimer(m.cfg.LeaveTimeout)
		select {
		case err := <-done:
			if err != nil {
				errs = append(errs, fmt.Errorf("regions: leave: %w", err))
			}
		case <-timer.C:
			m.log.Warn("graceful leave timed out; shutting down, peers will see this node fail", "timeout", m.cfg.LeaveTimeout)
		}
		timer.Stop()
	}
	if err := m.serf.Shutdown(); err != nil {
		errs = append(errs, fmt.Errorf("regions: shutdown: %w", err))
	}
	close(m.stopRun)
	m.coreWG.Wait()

	m.mu.Lock()
	m.mu.subs = nil
	m.mu.Unlock()
	close(m.subsDone)
	m.subWG.Wait()
	m.track.wg.Wait()
	m.log.Info("mesh stopped", "graceful", graceful)
	return errors.Join(errs...)
}

// join runs one round of join attempts against seeds.
func (m *Mesh) join(seeds []string) (int, error) {
	var targets []string
	for _, s := range seeds {
		if s != m.gossipAddr {
			targets = append(targets, s)
		}
	}
	if len(targets) == 0 {
		return 0, nil
	}
	m.guard.takeLast()
	n, err := m.serf.Join(targets, true)
	if n > 0 && m.serf.Memberlist().NumMembers() < 2 {
		// Every seed that answered was this node itself (a seed list
		// shared by all nodes, under another name for this address).
		return 0, fmt.Errorf("%w: the seeds %v only led back to this node; list a seed that is another node", ErrJoin, targets)
	}
	if n > 0 {
		if err != nil {
			m.log.Warn("joined the mesh, but some seeds did not answer", "joined", n, "err", err)
		}
		return n, nil
	}
	if gerr := m.guard.takeLast(); gerr != nil {
		return 0, fmt.Errorf("%w: %w", ErrJoin, gerr)
	}
	hint := "check the seeds are running and reachable over TCP and UDP, and use the same MeshName"
	if m.serf.EncryptionEnabled() {
		hint += " and a gossip key in common (a seed drops the connection of a node whose gossip it cannot decrypt)"
	} else {
		hint += "; if the mesh encrypts gossip, set EncryptKey"
	}
	return 0, fmt.Errorf("%w: no seed of %v answered: %s; %s", ErrJoin, targets, flatten(err), hint)
}

// flatten turns memberlist's multi-line error lists into one line.
func flatten(err error) string {
	if err == nil {
		return "no answer"
	}
	var parts []string
	for _, line := range strings.Split(err.Error(), "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "* ")
		if line == "" || strings.HasSuffix(line, "occurred:") {
			continue
		}
		parts = append(parts, line)
	}
	return strings.Join(parts, "; ")
}

// Join joins the mesh through the given gossip addresses now, besides the
// background loop over Config.Seeds. It returns how many nodes answered.
func (m *Mesh) Join(ctx context.Context, seeds ...string) (int, error) {
	for i, s := range seeds {
		if err := checkHostPort(fmt.Sprintf("seeds[%d]", i), s, false, false); err != nil {
			return 0, err
		}
	}
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	if !m.goTracked(func() {
		n, err := m.join(seeds)
		done <- result{n, err}
	}) {
		return 0, ErrClosed
	}
	select {
	case <-ctx.Done():
		return 0, fmt.Errorf("%w: %w", ErrJoin, ctx.Err())
	case r := <-done:
		if r.err != nil {
			return 0, r.err
		}
		if r.n > 0 {
			m.markJoined()
		}
		return r.n, nil
	}
}

// joinLoop tries the seeds until one answers or the mesh closes, waiting
// between rounds with exponential backoff and full jitter in the upper
// half (so restarted fleets do not retry in lockstep).
func (m *Mesh) joinLoop() {
	delay := m.cfg.JoinRetryMin
	for attempt := 1; ; attempt++ {
		n, err := m.join(m.cfg.Seeds)
		if err == nil && n > 0 {
			m.log.Info("joined the mesh", "nodes_answered", n, "attempt", attempt)
			m.markJoined()
			return
		}
		if err != nil {
			m.joinErr.Store(&err)
		}
		wait := delay/2 + rand.N(delay/2+1)
		m.log.Warn("join failed; retrying", "attempt", attempt, "retry_in", wait, "err", err)
		delay = min(2*delay, m.cfg.JoinRetryMax)
		timer := time.NewTimer(wait)
		select {
		case <-m.joinCtx.Done():
			timer.Stop()
			return
		case <-m.joined:
			// A peer joined us, or the snapshot rejoin worked.
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}

// WaitJoined blocks until this node is in a mesh with at least one other
// live node (through Seeds, Join, its snapshot, or a peer joining it), and
// returns at once for a node configured without seeds. If ctx ends first,
// the error includes the last join failure, which says why.
func (m *Mesh) WaitJoined(ctx context.Context) error {
	select {
	case <-m.joined:
		return nil
	case <-ctx.Done():
		if p := m.joinErr.Load(); p != nil {
			return fmt.Errorf("%w (waited: %w)", *p, ctx.Err())
		}
		return fmt.Errorf("%w: %w", ErrJoin, ctx.Err())
	}
}

// LastJoinError is the last failure of the background join loop, or nil.
func (m *Mesh) LastJoinError() error {
	if p := m.joinErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Directory returns a consistent copy of the region directory.
func (m *Mesh) Directory() Directory {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.mu.dir.directory(m.cfg.Region)
}

// LocalNode is this node's name.
func (m *Mesh) LocalNode() string { return m.cfg.NodeName }

// LocalRegion is this node's region.
func (m *Mesh) LocalRegion() string { return m.cfg.Region }

// ID is this node's persistent identity (tag "id").
func (m *Mesh) ID() string { return m.id }

// GossipAddr is the address peers reach this node's gossip at, ip:port;
// with BindAddr port 0 it carries the port picked.
func (m *Mesh) GossipAddr() string { return m.gossipAddr }

// Encrypted reports whether gossip is encrypted.
func (m *Mesh) Encrypted() bool { return m.serf.EncryptionEnabled() }

// UpdateAdvertise republishes this node's service addresses and version,
// e.g. once listeners bound to port 0 know their port. Peers see an
// EventUpdate.
func (m *Mesh) UpdateAdvertise(ctx context.Context, a Advertise) error {
	if err := a.validate(); err != nil {
		return err
	}
	cfg := m.cfg
	cfg.Advertise = a
	tags := cfg.tags(m.id)
	if _, err := encodeTagsChecked(tags); err != nil {
		return err
	}
	done := make(chan error, 1)
	if !m.goTracked(func() { done <- m.serf.SetTags(tags) }) {
		return ErrClosed
	}
	select {
	case <-ctx.Done():
		return fmt.Errorf("regions: updating tags: %w", ctx.Err())
	case err := <-done:
		if err != nil && err.Error() == updateTimeoutMsg {
			// The tags are set; the broadcast is only slower than
			// LeaveTimeout, and push/pull will carry them anyway.
			m.log.Warn("new tags are spreading slowly", "timeout", m.cfg.LeaveTimeout)
			return nil
		}
		if err != nil {
			return fmt.Errorf("regions: updating tags: %w", err)
		}
		return nil
	}
}

// updateTimeoutMsg is memberlist's UpdateNode error when the broadcast of
// the new metadata is still queued at the timeout (memberlist.go; the
// error has no type to test for).
const updateTimeoutMsg = "timeout waiting for update broadcast"
