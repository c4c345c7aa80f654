package regions

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// threeRegions starts eu (seed), us and ap, each advertising addresses.
func threeRegions(t *testing.T, tweak func(*Config)) (eu, us, ap *tnode) {
	t.Helper()
	mk := func(name, region, rack string, port int, seeds ...string) *tnode {
		cfg := testConfig(t, name, region)
		cfg.Rack = rack
		cfg.Seeds = seeds
		cfg.Advertise = Advertise{
			QUIC:    fmt.Sprintf("127.0.0.1:%d", port+1),
			Kafka:   fmt.Sprintf("127.0.0.1:%d", port+2),
			Pulsar:  fmt.Sprintf("127.0.0.1:%d", port+3),
			HTTP:    fmt.Sprintf("127.0.0.1:%d", port+4),
			Version: "test-" + name,
		}
		if tweak != nil {
			tweak(&cfg)
		}
		return start(t, cfg)
	}
	eu = mk("n-eu", "eu", "eu-a", 10000)
	us = mk("n-us", "us", "us-b", 20000, eu.addr())
	ap = mk("n-ap", "ap", "", 30000, eu.addr())
	for _, n := range []*tnode{eu, us, ap} {
		if err := n.m.WaitJoined(ctxTimeout(t, 10*time.Second)); err != nil {
			t.Fatalf("%s: %v", n.cfg.NodeName, err)
		}
	}
	return eu, us, ap
}

func TestThreeRegionsSeeEachOther(t *testing.T) {
	eu, us, ap := threeRegions(t, nil)
	nodes := []*tnode{eu, us, ap}
	waitFor(t, 10*time.Second, "every node sees the other two with their tags", func() error {
		for _, o := range nodes {
			dir := o.m.Directory()
			if got := strings.Join(dir.Regions(), ","); got != "ap,eu,us" {
				return fmt.Errorf("%s sees regions %s", o.cfg.NodeName, got)
			}
			for _, want := range nodes {
				got, ok := dir.Node(want.cfg.NodeName)
				if !ok {
					return fmt.Errorf("%s does not see %s", o.cfg.NodeName, want.cfg.NodeName)
				}
				wantTags := Tags{Region: want.cfg.Region, Rack: want.cfg.Rack, ID: want.m.ID(), Advertise: want.cfg.Advertise}
				if got.Tags != wantTags || !got.State.Up() || got.Addr != want.addr() {
					return fmt.Errorf("%s sees %+v, want %+v alive at %s", o.cfg.NodeName, got, wantTags, want.addr())
				}
				if rn := dir.Region(want.cfg.Region); len(rn) != 1 || rn[0].Name != want.cfg.NodeName {
					return fmt.Errorf("%s: region %s holds %v", o.cfg.NodeName, want.cfg.Region, rn)
				}
			}
			if dir.LocalNode != o.cfg.NodeName || dir.LocalRegion != o.cfg.Region {
				return fmt.Errorf("local %s/%s", dir.LocalNode, dir.LocalRegion)
			}
		}
		return nil
	})

	// RTT estimates appear once probes have carried coordinates around.
	waitFor(t, 10*time.Second, "RTT estimates between all regions on all nodes", func() error {
		for _, o := range nodes {
			for _, a := range []string{"eu", "us", "ap"} {
				for _, b := range []string{"eu", "us", "ap"} {
					if a == b {
						continue
					}
					d, ok := o.m.RegionRTT(a, b)
					if !ok || d < 0 {
						return fmt.Errorf("%s: RTT %s->%s = %v, %v", o.cfg.NodeName, a, b, d, ok)
					}
				}
			}
			for _, r := range o.m.Snapshot().Regions {
				if r.Local {
					if r.RTTMs != nil {
						return fmt.Errorf("%s: local region alone has rtt %v", o.cfg.NodeName, *r.RTTMs)
					}
					continue
				}
				if r.RTTMs == nil || *r.RTTMs < 0 || len(r.Nodes) != 1 || r.Nodes[0].RTTMs == nil || *r.Nodes[0].RTTMs < 0 {
					return fmt.Errorf("%s: region %s has no usable rtt_ms", o.cfg.NodeName, r.Name)
				}
			}
		}
		return nil
	})
	if _, ok := eu.m.RegionRTT("eu", "eu"); ok {
		t.Errorf("RTT within a one-node region should not exist")
	}

	// The JSON view carries stable snake_case names.
	raw, err := json.Marshal(us.m.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	var view struct {
		LocalNode   string `json:"local_node"`
		LocalRegion string `json:"local_region"`
		Encrypted   *bool  `json:"encrypted"`
		Regions     []struct {
			Name    string   `json:"name"`
			Local   bool     `json:"local"`
			NodesUp int      `json:"nodes_up"`
			RTTMs   *float64 `json:"rtt_ms"`
			Nodes   []struct {
				Name       string    `json:"name"`
				ID         string    `json:"id"`
				State      string    `json:"state"`
				StateSince time.Time `json:"state_since"`
				Rack       string    `json:"rack"`
				GossipAddr string    `json:"gossip_addr"`
				QUICAddr   string    `json:"quic_addr"`
				KafkaAddr  string    `json:"kafka_addr"`
				PulsarAddr string    `json:"pulsar_addr"`
				HTTPAddr   string    `json:"http_addr"`
				Version    string    `json:"version"`
				Local      bool      `json:"local"`
			} `json:"nodes"`
		} `json:"regions"`
	}
	if err := json.Unmarshal(raw, &view); err != nil {
		t.Fatal(err)
	}
	if view.LocalNode != "n-us" || view.LocalRegion != "us" || view.Encrypted == nil || len(view.Regions) != 3 {
		t.Fatalf("snapshot JSON: %s", raw)
	}
	for _, r := range view.Regions {
		n := r.Nodes[0]
		if r.NodesUp != 1 || (n.State != "alive" && n.State != "suspect") || n.GossipAddr == "" || n.QUICAddr == "" || n.KafkaAddr == "" ||
			n.PulsarAddr == "" || n.HTTPAddr == "" || !strings.HasPrefix(n.Version, "test-") || len(n.ID) != idLen ||
			n.StateSince.IsZero() || r.Local != (r.Name == "us") || n.Local != r.Local {
			t.Errorf("snapshot region %s: %+v in %s", r.Name, r, raw)
		}
		if r.Name == "us" && (n.Rack != "us-b" || r.RTTMs != nil) {
			t.Errorf("snapshot local region %+v", r)
		}
	}
}

func TestKilledNodeFailsWithinBound(t *testing.T) {
	eu, us, ap := threeRegions(t, nil)
	allSee(t, 10*time.Second, []*tnode{eu, us, ap}, []string{"n-eu", "n-us", "n-ap"}, StateAlive)

	type seen struct {
		observer string
		kinds    []EventKind
		failedAt time.Time
	}
	results := make(chan seen, 2)
	var wg sync.WaitGroup
	bound := eu.cfg.Timings.FailureDetectionBound(3)
	ctx := ctxTimeout(t, bound+10*time.Second)
	for _, o := range []*tnode{eu, us} {
		ch := o.m.Subscribe(ctx)
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := seen{observer: o.cfg.NodeName}
			for ev := range ch {
				if ev.Node.Name != "n-ap" {
					continue
				}
				s.kinds = append(s.kinds, ev.Kind)
				if ev.Kind == EventFailed {
					s.failedAt = ev.Time
					break
				}
			}
			results <- s
		}()
	}

	killed := time.Now()
	ap.kill()
	wg.Wait()
	close(results)
	suspected := false
	for s := range results {
		if s.failedAt.IsZero() {
			t.Fatalf("%s never saw n-ap fail (events %v)", s.observer, s.kinds)
		}
		took := s.failedAt.Sub(killed)
		t.Logf("%s: n-ap failed after %v (bound %v), events %v", s.observer, took, bound, s.kinds)
		if took > bound {
			t.Errorf("%s: detection took %v, over the bound %v computed from the timings", s.observer, took, bound)
		}
		if len(s.kinds) >= 2 && s.kinds[len(s.kinds)-2] == EventSuspect {
			suspected = true
		}
	}
	// Some node's probe has to fail first and start the suspicion, and
	// that node reports the peer suspect right before failed.
	if !suspected {
		t.Errorf("no observer reported n-ap suspect before failed")
	}
}

func TestRestartedNodeRejoinsWithSameIdentity(t *testing.T) {
	a := start(t, testConfig(t, "a", "eu"))
	bcfg := testConfig(t, "b", "us")
	bcfg.Seeds = []string{a.addr()}
	b := start(t, bcfg)
	// c has no seeds: after the first explicit join only its snapshot can
	// bring it back.
	c := start(t, testConfig(t, "c", "ap"))
	if _, err := c.m.Join(ctxTimeout(t, 5*time.Second), a.addr()); err != nil {
		t.Fatal(err)
	}
	all := []*tnode{a, b, c}
	names := []string{"a", "b", "c"}
	allSee(t, 10*time.Second, all, names, StateAlive)
	id, addr := c.m.ID(), c.addr()

	c.kill()
	allSee(t, 10*time.Second, []*tnode{a, b}, []string{"c"}, StateFailed)
	c.restart()
	if c.m.ID() != id || c.addr() != addr {
		t.Fatalf("restarted c is %s at %s, was %s at %s", c.m.ID(), c.addr(), id, addr)
	}
	// No seeds: only the snapshot can make everyone see everyone again.
	allSee(t, 10*time.Second, all, names, StateAlive)
	for _, o := range []*tnode{a, b} {
		if n, _ := o.m.Directory().Node("c"); n.ID != id {
			t.Errorf("%s sees c with id %s, want %s", o.cfg.NodeName, n.ID, id)
		}
	}

	// A graceful stop is "left", and the next start rejoins as well.
	if err := c.m.Close(); err != nil {
		t.Fatal(err)
	}
	allSee(t, 10*time.Second, []*tnode{a, b}, []string{"c"}, StateLeft)
	c.restart()
	allSee(t, 10*time.Second, all, names, StateAlive)
	if n, _ := a.m.Directory().Node("c"); n.ID != id {
		t.Errorf("after a graceful restart a sees c with id %s, want %s", n.ID, id)
	}
}

func TestWrongGossipKeyCannotJoin(t *testing.T) {
	acfg := testConfig(t, "a", "eu")
	acfg.EncryptKey = key1
	a := start(t, acfg)

	bcfg := testConfig(t, "b", "us")
	bcfg.EncryptKey = key2
	bcfg.Seeds = []string{a.addr()}
	b := start(t, bcfg)

	err := b.m.WaitJoined(ctxTimeout(t, 2*time.Second))
	if !errors.Is(err, ErrJoin) {
		t.Fatalf("WaitJoined: %v, want ErrJoin", err)
	}
	for _, want := range []string{a.addr(), "decrypt", "gossip key"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("join error %q does not mention %q", err, want)
		}
	}
	if _, err := b.m.Join(ctxTimeout(t, 5*time.Second), a.addr()); !errors.Is(err, ErrJoin) || !strings.Contains(err.Error(), "decrypt") {
		t.Errorf("explicit Join: %v", err)
	}
	// The seed says why it refused, in its own log.
	waitFor(t, 5*time.Second, "seed logs the decryption failure", func() error {
		if !strings.Contains(a.logs.String(), "no installed keys could decrypt the message") {
			return errors.New("not logged")
		}
		return nil
	})
	if !strings.Contains(b.logs.String(), "join failed") {
		t.Errorf("joiner did not log its failed join")
	}

	// A node without any key cannot join an encrypted mesh either.
	ccfg := testConfig(t, "c", "ap")
	c := start(t, ccfg)
	_, err = c.m.Join(ctxTimeout(t, 5*time.Second), a.addr())
	if !errors.Is(err, ErrJoin) || !strings.Contains(err.Error(), "EncryptKey") {
		t.Errorf("plaintext join: %v", err)
	}
	for _, name := range []string{"b", "c"} {
		if _, ok := a.m.Directory().Node(name); ok {
			t.Errorf("a admitted %s", name)
		}
	}
	if n := len(b.m.Directory().Nodes); n != 1 {
		t.Errorf("b knows %d nodes", n)
	}
}

func TestNameInUseIsRefused(t *testing.T) {
	a := start(t, testConfig(t, "a", "eu"))
	bcfg := testConfig(t, "b", "us")
	bcfg.Seeds = []string{a.addr()}
	b := start(t, bcfg)
	allSee(t, 10*time.Second, []*tnode{a, b}, []string{"a", "b"}, StateAlive)

	// Another process claims the name b with a fresh identity.
	icfg := testConfig(t, "b", "ap")
	icfg.DataDir = t.TempDir()
	imp := start(t, icfg)
	_, err := imp.m.Join(ctxTimeout(t, 5*time.Second), a.addr())
	if !errors.Is(err, ErrNameInUse) || !strings.Contains(err.Error(), "pick another NodeName") {
		t.Fatalf("impostor join: %v", err)
	}
	if n, _ := a.m.Directory().Node("b"); n.ID != b.m.ID() || n.Region != "us" {
		t.Errorf("a sees b as %+v", n)
	}
}

func TestCloseIsPromptWhileASeedHangs(t *testing.T) {
	// A seed that accepts TCP and never answers: memberlist would wait
	// TCPTimeout for its push/pull reply.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	cfg := testConfig(t, "a", "eu")
	cfg.Timings.TCPTimeout = time.Minute
	cfg.Seeds = []string{ln.Addr().String()}
	a := start(t, cfg)
	select {
	case c := <-accepted:
		defer c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("the join never reached the hanging seed")
	}
	began := time.Now()
	if err := a.m.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > cfg.LeaveTimeout+time.Second {
		t.Errorf("Close took %v with a join hanging; want well under TCPTimeout %v", took, cfg.Timings.TCPTimeout)
	}
}
