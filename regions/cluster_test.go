package regions

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ternmq/tern/internal/logbuf"
)

// Test keys (base64 of 16 and 32 bytes).
const (
	key1 = "AAECAwQFBgcICQoLDA0ODw=="
	key2 = "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8="
	key3 = "QEFCQ0RFRkdISUpLTE1OTw=="
)

// fastTimings makes failure detection take a few seconds on loopback:
// fast enough for tests, slow enough that a machine loaded with other
// work (and -race) does not make healthy nodes look dead.
func fastTimings() Timings { return LoopbackTimings() }

// tnode is one mesh node under test.
type tnode struct {
	t    *testing.T
	cfg  Config
	m    *Mesh
	logs *logbuf.Buffer
}

func testConfig(t *testing.T, name, region string) Config {
	cfg := DefaultConfig()
	cfg.NodeName = name
	cfg.Region = region
	cfg.BindAddr = "127.0.0.1:0"
	cfg.Timings = fastTimings()
	cfg.JoinRetryMin = 50 * time.Millisecond
	cfg.JoinRetryMax = 500 * time.Millisecond
	cfg.LeaveTimeout = 2 * time.Second
	cfg.DataDir = filepath.Join(t.TempDir(), name)
	return cfg
}

func start(t *testing.T, cfg Config) *tnode {
	t.Helper()
	n := &tnode{t: t, cfg: cfg, logs: &logbuf.Buffer{}}
	n.boot()
	t.Cleanup(func() {
		n.m.Close()
		// serf's events arrive through the pump; the repair path is for
		// events serf dropped, which must not happen here.
		if strings.Contains(n.logs.String(), "repaired the directory") {
			t.Errorf("%s needed the repair path: serf events were lost", cfg.NodeName)
		}
		if t.Failed() {
			t.Logf("log of %s:\n%s", cfg.NodeName, n.logs)
		}
	})
	return n
}

func (n *tnode) boot() {
	n.t.Helper()
	cfg := n.cfg
	cfg.Logger = slog.New(slog.NewTextHandler(n.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	m, err := New(cfg)
	if err != nil {
		n.t.Fatalf("start %s: %v", cfg.NodeName, err)
	}
	n.m = m
}

// kill stops the node without leaving, as a crash would.
func (n *tnode) kill() {
	n.t.Helper()
	n.m.closeOnce.Do(func() { n.m.closeErr = n.m.shutdown(false) })
}

// restart starts the node again on the same gossip address and data dir.
func (n *tnode) restart() {
	n.t.Helper()
	n.m.Close()
	n.cfg.BindAddr = n.m.GossipAddr()
	n.boot()
}

func (n *tnode) addr() string { return n.m.GossipAddr() }

// waitFor polls cond until it returns nil or the deadline passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %v: %v", what, timeout, err)
		}
		<-tick.C
	}
}

// sees checks that n's directory has node name in the given state.
func (n *tnode) sees(name string, state State) error {
	node, ok := n.m.Directory().Node(name)
	if !ok {
		return fmt.Errorf("%s does not know %s", n.cfg.NodeName, name)
	}
	if node.State != state {
		return fmt.Errorf("%s sees %s %s, want %s", n.cfg.NodeName, name, node.State, state)
	}
	return nil
}

// allSee waits until every observer sees every name in state.
func allSee(t *testing.T, timeout time.Duration, observers []*tnode, names []string, state State) {
	t.Helper()
	waitFor(t, timeout, fmt.Sprintf("%v %s everywhere", names, state), func() error {
		for _, o := range observers {
			for _, name := range names {
				if err := o.sees(name, state); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
