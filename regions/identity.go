package regions

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/hashicorp/serf/serf"
)

// loadIdentity returns the node's persistent identity, creating it on first
// start. Without a data directory the identity lives as long as the
// process.
func loadIdentity(dataDir string) (string, error) {
	if dataDir == "" {
		return newID(), nil
	}
	path := filepath.Join(dataDir, "node-id")
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		id := strings.TrimSpace(string(data))
		if !validID(id) {
			return "", fmt.Errorf("%w: DataDir: %s holds %q, not a node identity; delete it to get a new identity", ErrInvalidConfig, path, id)
		}
		return id, nil
	case errors.Is(err, fs.ErrNotExist):
		id := newID()
		if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
			return "", fmt.Errorf("regions: writing node identity: %w", err)
		}
		return id, nil
	default:
		return "", fmt.Errorf("regions: reading node identity: %w", err)
	}
}

// validID accepts what newID makes: idLen lowercase hex digits.
func validID(id string) bool {
	return len(id) == idLen && !strings.ContainsFunc(id, func(r rune) bool { return !strings.ContainsRune("0123456789abcdef", r) })
}

func newID() string {
	var b [idLen / 2]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// mergeGuard is serf's merge delegate. serf also installs it as
// memberlist's alive delegate, so it sees every peer of a join (a rejected
// join fails) and every alive message (a rejected one is ignored). It
// refuses peers without tern's region tag (a seed of another gossip pool)
// and another identity claiming this node's name.
//
// memberlist calls it with its node lock held: it must not call into serf
// or memberlist.
type mergeGuard struct {
	local string
	id    string
	log   func(msg string, args ...any)

	mu struct {
		sync.Mutex
		// last is the last rejection, reported by a failed join; logged
		// remembers what was already logged, since alive messages repeat.
		last   error
		logged map[string]bool
	}
}

func newMergeGuard(local, id string, log func(string, ...any)) *mergeGuard {
	g := &mergeGuard{local: local, id: id, log: log}
	g.mu.logged = make(map[string]bool)
	return g
}

// NotifyMerge implements serf.MergeDelegate.
func (g *mergeGuard) NotifyMerge(members []*serf.Member) error {
	for _, mem := range members {
		if err := g.check(mem); err != nil {
			g.mu.Lock()
			g.mu.last = err
			key := err.Error()
			first := !g.mu.logged[key]
			if len(g.mu.logged) >= 256 {
				// Bound the memory a flood of distinct peers could take.
				clear(g.mu.logged)
			}
			g.mu.logged[key] = true
			g.mu.Unlock()
			if first {
				g.log("refusing gossip peer", "err", err)
			}
			return err
		}
	}
	return nil
}

func (g *mergeGuard) check(mem *serf.Member) error {
	addr := joinHostPort(mem.Addr, mem.Port)
	if mem.Tags[TagRegion] == "" {
		return fmt.Errorf("%w: %s at %s has no %q tag; the seed belongs to another gossip pool", ErrForeignNode, mem.Name, addr, TagRegion)
	}
	if mem.Name == g.local && mem.Status != serf.StatusLeft && mem.Tags[TagID] != g.id {
		return fmt.Errorf("%w: %q is node %s at %s, this node is %s; pick another NodeName "+
			"(if this node lost its data directory, it can join once the mesh has declared the old identity failed and forgotten it)",
			ErrNameInUse, mem.Name, mem.Tags[TagID], addr, g.id)
	}
	return nil
}

// takeLast returns and clears the last rejection.
func (g *mergeGuard) takeLast() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	err := g.mu.last
	g.mu.last = nil
	return err
}
