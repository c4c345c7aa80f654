package regions

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
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
	// serf's Leave waits up to BroadcastTimeout twice (its own leave
	// message, then memberlist's); halving keeps the leave within
	// LeaveTimeout plus LeavePropagateDelay. It also bounds the wait for
	// a tag update's broadcast.
	sc.BroadcastTimeout = m.cfg.LeaveTimeout / 2
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

// Close leaves the mesh gracefully, shuts serf down, ends every
// subscription and waits for every goroutine the mesh started; it takes at
// most about Config.LeaveTimeout plus Timings.LeavePropagateDelay. It is
// safe to call more than once.
func (m *Mesh) Close() error {
	m.closeOnce.Do(func() { m.closeErr = m.shutdown(true) })
	return m.closeErr
}

// Abort stops the mesh without leaving: to the peers it looks like a
// crash, and they detect the failure. Tests use it to kill a node; it is
// safe to call more than once, and after Close.
func (m *Mesh) Abort() error {
	m.closeOnce.Do(func() { m.closeErr = m.shutdown(false) })
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
			// LeaveTimeout/2, and push/pull will carry them anyway.
			m.log.Warn("new tags are spreading slowly", "timeout", m.cfg.LeaveTimeout/2)
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
