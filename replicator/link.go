package replicator

// A link is everything this node knows about one remote node: its address, its current
// connection, its state and traffic counters. One goroutine (run) owns the link's decisions;
// other goroutines post events to it and read its state under mu.
//
// At most one connection per remote node. Both nodes may dial each other at the same moment,
// so a link can be offered a second connection while one is up. The rule, applied identically on
// both sides, is static so both sides reach the same answer whatever order events arrive in:
// keep the connection dialed by the node with the lower name (byte order); between two
// connections dialed by the same node keep the newer (that node only dials when it considers the
// older one gone). The losing connection is closed with CodeDuplicateConnection.
//
// To keep either side from opening streams on a connection that is about to lose, the node with
// the lower name holds an inbound connection (does not answer its HELLO) while its own dial, which
// would win, is in flight: if the dial succeeds the inbound one is refused, if it fails the inbound
// one is adopted. The higher-named node adopts the lower one's connection at once (it wins), and
// its own dial is refused or loses. The dialing side only exposes a connection after the HELLO
// answer, so in the usual race no stream ever lands on the losing connection. A switch can still
// happen (a node redials while its peer has not noticed the old connection die); streams on the
// replaced connection then fail and the replication logic reopens them, as after any loss.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
)

// LinkState is the state of the link to one remote node.
type LinkState int

// Link states.
const (
	// LinkConnecting: a dial is in progress, or the link waits for a connection that the peer is
	// expected to make.
	LinkConnecting LinkState = iota
	// LinkUp: a connection passed the HELLO exchange and streams can be opened.
	LinkUp
	// LinkDown: the last attempt failed or the connection was lost; LastError says why. A link
	// with an address redials after a backoff delay.
	LinkDown
)

// String names the state for logs and the admin API.
func (s LinkState) String() string {
	switch s {
	case LinkConnecting:
		return "connecting"
	case LinkUp:
		return "up"
	case LinkDown:
		return "down"
	}
	return fmt.Sprintf("state(%d)", int(s))
}

type (
	peerEv  struct{ p Peer }
	offerEv struct {
		mc    *meshConn
		reply chan bool
	}
	lostEv struct {
		mc  *meshConn
		err error
	}
	dialEv struct {
		mc  *meshConn
		err error
	}
)

type link struct {
	t      *Transport
	name   string
	ctr    linkCounters
	events chan any
	stop   chan struct{} // closed to stop run
	done   chan struct{} // closed when run returned

	mu struct {
		sync.Mutex
		peer      Peer
		state     LinkState
		since     time.Time
		lastErr   error
		lastErrAt time.Time
		cur       *meshConn
		connects  uint64
		streams   int64
		changed   chan struct{} // closed and replaced on every change
	}
}

func newLink(t *Transport, p Peer) *link {
	l := &link{t: t, name: p.Name, events: make(chan any, 16), stop: make(chan struct{}), done: make(chan struct{})}
	l.mu.peer = p
	l.mu.state = LinkConnecting
	l.mu.since = time.Now()
	l.mu.changed = make(chan struct{})
	return l
}

// post delivers an event to run, or drops it when the link has stopped (a connection posting
// after its link stopped was already closed by run).
func (l *link) post(ev any) {
	select {
	case l.events <- ev:
	case <-l.done:
		if d, ok := ev.(dialEv); ok && d.mc != nil {
			d.mc.close(CodeShuttingDown, "link removed", ErrClosed)
		}
	}
}

// offer asks run to adopt an inbound connection; false means keep the current one (or ctx
// ended first: the caller then closes the connection, and run drops it on the loss event).
func (l *link) offer(ctx context.Context, mc *meshConn) bool {
	reply := make(chan bool, 1)
	select {
	case l.events <- offerEv{mc: mc, reply: reply}:
	case <-l.done:
		return false
	case <-ctx.Done():
		return false
	}
	select {
	case ok := <-reply:
		return ok
	case <-l.done:
		return false
	case <-ctx.Done():
		return false
	}
}

func (l *link) currentDialer() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.cur == nil {
		return "nobody"
	}
	return l.mu.cur.dialerName()
}

// setLocked records a state change and wakes waiters. Caller holds mu.
func (l *link) setLocked(s LinkState, err error) {
	now := time.Now()
	if s != l.mu.state {
		l.mu.state = s
		l.mu.since = now
	}
	if err != nil {
		l.mu.lastErr = err
		l.mu.lastErrAt = now
	}
	close(l.mu.changed)
	l.mu.changed = make(chan struct{})
}

func (l *link) set(s LinkState, err error) {
	l.mu.Lock()
	l.setLocked(s, err)
	l.mu.Unlock()
}

func (l *link) run() {
	defer close(l.done)
	cfg := &l.t.cfg
	log := l.t.log.With("peer", l.name)
	bo := newBackoff(cfg.ReconnectInitial, cfg.ReconnectMax, cfg.ReconnectJitter)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var cur *meshConn
	var pending *offerEv // inbound connection held while our winning dial is in flight
	dialing := false
	redial := false // the address changed during a dial: dial the new one as soon as it ends
	cancelDial := context.CancelFunc(func() {})
	defer func() { cancelDial() }()

	peer := func() Peer {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.mu.peer
	}
	startDial := func() {
		p := peer()
		if dialing || cur != nil || p.Addr == "" {
			return
		}
		dialing = true
		l.set(LinkConnecting, nil)
		var dialCtx context.Context
		dialCtx, cancelDial = context.WithCancel(l.t.ctx)
		if !l.t.goFn(func() {
			mc, err := l.t.dialPeer(dialCtx, l, p)
			l.post(dialEv{mc: mc, err: err})
		}) {
			dialing = false
		}
	}
	retry := func(d time.Duration) {
		timer.Reset(d)
	}
	adopt := func(mc *meshConn) bool {
		if cur != nil && !preferConn(mc, cur) {
			return false
		}
		old := cur
		cur = mc
		bo.Reset()
		timer.Stop()
		l.mu.Lock()
		l.mu.cur = mc
		l.mu.connects++
		l.setLocked(LinkUp, nil)
		l.mu.Unlock()
		if old != nil {
			log.Info("replicator: replacing duplicate connection", "kept_dialer", mc.dialerName(), "closed_dialer", old.dialerName())
			old.close(CodeDuplicateConnection, "replaced by the connection dialed by "+mc.dialerName(), errDuplicate)
		} else {
			log.Info("replicator: link up", "region", mc.peer.Region, "dialer", mc.dialerName(), "version", mc.peer.Version)
		}
		return true
	}

	startDial()
	for {
		select {
		case <-l.stop:
			if pending != nil {
				pending.reply <- false
			}
			if cur != nil {
				cur.close(CodeShuttingDown, "node shutting down or peer removed", ErrClosed)
			}
			l.mu.Lock()
			l.mu.cur = nil
			l.setLocked(LinkDown, ErrClosed)
			l.mu.Unlock()
			return
		case <-timer.C:
			startDial()
		case ev := <-l.events:
			switch ev := ev.(type) {
			case peerEv:
				l.mu.Lock()
				changed := l.mu.peer.Addr != ev.p.Addr
				l.mu.peer = ev.p
				l.mu.Unlock()
				switch {
				case !changed || cur != nil:
				case dialing:
					redial = true
					cancelDial()
				default:
					bo.Reset()
					timer.Stop()
					startDial()
				}
			case offerEv:
				if dialing && cur == nil && l.t.cfg.NodeName < ev.mc.peer.Name {
					if pending != nil {
						pending.reply <- false // the peer redialed; its older attempt is stale
					}
					pending = &ev
					continue
				}
				ev.reply <- adopt(ev.mc)
			case dialEv:
				dialing = false
				cancelDial()
				held := pending
				pending = nil
				if ev.err != nil {
					if held != nil {
						held.reply <- adopt(held.mc)
						continue
					}
					if cur != nil {
						continue
					}
					if redial {
						redial = false
						bo.Reset()
						startDial()
						continue
					}
					var le *LinkError
					if errors.As(ev.err, &le) && le.Remote && le.Code == CodeDuplicateConnection {
						// The peer kept its own connection to us, which is on its way.
						l.set(LinkConnecting, nil)
						retry(cfg.HandshakeTimeout)
						continue
					}
					log.Warn("replicator: dial failed", "addr", peer().Addr, "err", ev.err)
					l.set(LinkDown, ev.err)
					retry(bo.Next())
					continue
				}
				redial = false // the old address still led to the right node
				if adopt(ev.mc) {
					ev.mc.start()
				} else {
					ev.mc.close(CodeDuplicateConnection, "already connected over the connection dialed by "+cur.dialerName(), errDuplicate)
				}
				if held != nil {
					held.reply <- false
				}
			case lostEv:
				if ev.mc != cur {
					continue // a replaced or refused connection ending
				}
				cur = nil
				var appErr *quic.ApplicationError
				if errors.As(ev.err, &appErr) && appErr.Remote && appErr.ErrorCode == quic.ApplicationErrorCode(CodeDuplicateConnection) {
					// The peer kept another connection we have not seen yet; wait for it, and
					// redial only if it does not arrive.
					l.mu.Lock()
					l.mu.cur = nil
					l.setLocked(LinkConnecting, nil)
					l.mu.Unlock()
					retry(cfg.HandshakeTimeout)
					continue
				}
				log.Warn("replicator: link lost", "err", ev.err)
				l.mu.Lock()
				l.mu.cur = nil
				l.setLocked(LinkDown, ev.err)
				l.mu.Unlock()
				retry(bo.Next())
			}
		}
	}
}

var errDuplicate = errors.New("replicator: duplicate connection closed")

// preferConn reports whether a should replace b (see the rule at the top of this file).
func preferConn(a, b *meshConn) bool {
	da, db := a.dialerName(), b.dialerName()
	if da == db {
		return true
	}
	return da < db
}

// waitConn returns the link's connection, waiting until the link is up.
func (l *link) waitConn(ctx context.Context) (*meshConn, error) {
	for {
		l.mu.Lock()
		mc, ch, lastErr := l.mu.cur, l.mu.changed, l.mu.lastErr
		l.mu.Unlock()
		if mc != nil && mc.ctx.Err() == nil {
			return mc, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			if lastErr != nil {
				return nil, fmt.Errorf("replicator: link to %s not up (last error: %v): %w", l.name, lastErr, ctx.Err())
			}
			return nil, fmt.Errorf("replicator: link to %s not up: %w", l.name, ctx.Err())
		case <-l.done:
			return nil, fmt.Errorf("replicator: link to %s: %w", l.name, ErrClosed)
		}
	}
}
