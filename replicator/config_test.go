package replicator

import (
	"bytes"
	"crypto/x509"
	"strings"
	"testing"
	"time"
)

func TestDefaultConfigNeedsOnlyIdentity(t *testing.T) {
	cfg := DefaultConfig()
	err := cfg.Validate()
	for _, want := range []string{"NodeName is empty", "Region is empty", "TLS is not configured"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("default config error %v does not mention %q", err, want)
		}
	}
	cfg.NodeName, cfg.Region, cfg.TLS.MeshSecret = "n1", "eu", testSecret
	if err := cfg.Validate(); err != nil {
		t.Fatalf("default config with identity: %v", err)
	}
}

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	base := DefaultConfig()
	base.NodeName, base.Region, base.TLS.MeshSecret = "n1", "eu", testSecret
	tests := []struct {
		name   string
		mutate func(*Config)
		want   []string
	}{
		{"listen addr", func(c *Config) { c.ListenAddr = "7947" }, []string{"ListenAddr"}},
		{"name with space", func(c *Config) { c.NodeName = "a b" }, []string{"NodeName", "space"}},
		{"long region", func(c *Config) { c.Region = strings.Repeat("r", 256) }, []string{"Region", "at most 255"}},
		{"short secret", func(c *Config) { c.TLS.MeshSecret = "short" }, []string{"MeshSecret", "at least 16"}},
		{"files and secret", func(c *Config) { c.TLS.CertFile = "x" }, []string{"both certificate files and MeshSecret"}},
		{"partial files", func(c *Config) { c.TLS = TLSConfig{CertFile: "c", KeyFile: "k"} }, []string{"CertFile, KeyFile and CAFile together"}},
		{"timings", func(c *Config) {
			c.HandshakeTimeout, c.IdleTimeout, c.HeartbeatInterval = 0, -1, 0
		}, []string{"HandshakeTimeout", "IdleTimeout", "HeartbeatInterval"}},
		{"heartbeat timeout", func(c *Config) { c.HeartbeatTimeout = c.HeartbeatInterval }, []string{"two HeartbeatIntervals"}},
		{"backoff", func(c *Config) { c.ReconnectInitial, c.ReconnectMax, c.ReconnectJitter = time.Minute, time.Second, 2 }, []string{"exceeds ReconnectMax", "ReconnectJitter"}},
		{"windows", func(c *Config) { c.MaxStreamReceiveWindow, c.MaxConnectionReceiveWindow = 1, 1 }, []string{"stream receive windows", "connection receive windows"}},
		{"frames and credit", func(c *Config) { c.MaxFrameBytes, c.StreamCreditBytes, c.StreamCreditEntries = 100, 10, 0 }, []string{"MaxFrameBytes", "StreamCreditBytes", "StreamCreditEntries"}},
		{"credit below frame", func(c *Config) { c.StreamCreditBytes = int64(c.MaxFrameBytes) - 1 }, []string{"could never be sent"}},
		{"streams", func(c *Config) { c.MaxIncomingStreams = 1 }, []string{"MaxIncomingStreams"}},
		{"keep alive", func(c *Config) { c.KeepAlivePeriod = -time.Second }, []string{"KeepAlivePeriod"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.mutate(&cfg)
			err := cfg.Validate()
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	if _, err := New(DefaultConfig(), nil); err == nil {
		t.Fatal("New accepted a config without identity")
	}
	cfg, _ := testConfig(t, "n1", "eu")
	cfg.TLS = TLSConfig{CertFile: "/nonexistent/c", KeyFile: "/nonexistent/k", CAFile: "/nonexistent/ca"}
	if _, err := New(cfg, nil); err == nil || !strings.Contains(err.Error(), "TLS.CertFile") {
		t.Fatalf("New with missing files: %v", err)
	}
}

func TestNewListensOnListenAddr(t *testing.T) {
	cfg, _ := testConfig(t, "n1", "eu")
	tr, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tr.Addr().String(), "127.0.0.1:") {
		t.Fatalf("listening on %s", tr.Addr())
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := tr.AddPeer(Peer{Name: "x", Addr: "127.0.0.1:1"}); err == nil {
		t.Fatal("AddPeer after Close")
	}
}

func TestDevCAIsDeterministic(t *testing.T) {
	c1, k1, err := DevCA(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	c2, k2, err := DevCA(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(c1, c2) || !k1.Equal(k2) {
		t.Fatal("the same secret gave different CAs")
	}
	c3, _, err := DevCA("a different secret of some size")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(c1, c3) {
		t.Fatal("different secrets gave the same CA")
	}
	if _, _, err := DevCA("short"); err == nil {
		t.Fatal("short secret accepted")
	}
	ca, err := x509.ParseCertificate(c1)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := IssueLeaf(c1, k1, "node-1", "eu", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if err := verifyChain([]*x509.Certificate{leaf.Leaf}, roots, usage); err != nil {
			t.Fatalf("leaf does not verify for usage %v: %v", usage, err)
		}
	}
	other, _ := x509.ParseCertificate(c3)
	otherRoots := x509.NewCertPool()
	otherRoots.AddCert(other)
	if err := verifyChain([]*x509.Certificate{leaf.Leaf}, otherRoots, x509.ExtKeyUsageServerAuth); err == nil {
		t.Fatal("leaf verified against another mesh's CA")
	}
}

func TestBackoff(t *testing.T) {
	b := newBackoff(100*time.Millisecond, time.Second, 0.2)
	b.rand = func() float64 { return 0.5 } // no jitter
	var got []time.Duration
	for range 6 {
		got = append(got, b.Next())
	}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("delays %v, want %v ms", got, want)
		}
	}
	b.Reset()
	if d := b.Next(); d != 100*time.Millisecond {
		t.Fatalf("after Reset: %v", d)
	}
	for _, tc := range []struct {
		r    float64
		want time.Duration
	}{{0, 160 * time.Millisecond}, {0.999999, 240 * time.Millisecond}} {
		b := newBackoff(200*time.Millisecond, time.Second, 0.2)
		b.rand = func() float64 { return tc.r }
		if d := b.Next(); d < tc.want-time.Millisecond || d > tc.want+time.Millisecond {
			t.Fatalf("jitter with r=%v: %v, want about %v", tc.r, d, tc.want)
		}
	}
	// Real randomness stays inside the band.
	b = newBackoff(time.Second, time.Second, 0.2)
	for range 1000 {
		if d := b.Next(); d < 800*time.Millisecond || d > 1200*time.Millisecond {
			t.Fatalf("jittered delay %v outside +-20%%", d)
		}
	}
}

func TestOpenRequestValidate(t *testing.T) {
	ok := OpenRequest{Topic: "t", Partition: 0, PartitionCount: 0, DestRegion: "eu"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("non-partitioned request: %v", err)
	}
	bad := []OpenRequest{
		{Topic: "", DestRegion: "eu"},
		{Topic: "t", Partition: 1, PartitionCount: 0, DestRegion: "eu"},
		{Topic: "t", Partition: -1, PartitionCount: 2, DestRegion: "eu"},
		{Topic: "t", PartitionCount: 1},
		{Topic: "t", PartitionCount: 1, DestRegion: "eu", StartOffset: -1},
		{Topic: "t", PartitionCount: 1, DestRegion: "eu", Extra: make([]byte, 4097)},
	}
	for i, r := range bad {
		if err := r.Validate(); err == nil {
			t.Fatalf("request %d (%+v) passed", i, r)
		}
	}
}
