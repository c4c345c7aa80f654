package regions

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// otherSeeds drops this node's own address from a seed list (nodes often
// share one list that names them all).
func (m *Mesh) otherSeeds(seeds []string) []string {
	var targets []string
	for _, s := range seeds {
		if s != m.gossipAddr {
			targets = append(targets, s)
		}
	}
	return targets
}

// join runs one round of join attempts against seeds.
func (m *Mesh) join(seeds []string) (int, error) {
	targets := m.otherSeeds(seeds)
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
	if len(m.otherSeeds(m.cfg.Seeds)) == 0 {
		m.log.Info("this node is the only seed; waiting for others to join it")
		m.markJoined()
		return
	}
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
