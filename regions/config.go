package regions

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
)

// DefaultGossipPort is the port the mesh gossips on when BindAddr names
// none.
const DefaultGossipPort = 7946

// Config describes one node's membership in the mesh. The zero value is not
// usable; start from DefaultConfig.
type Config struct {
	// NodeName identifies the node in the mesh and must be unique there.
	// Letters, digits, '-' and '.', at most 128 bytes (serf's rule).
	// Default: the host name, cleaned to those characters.
	NodeName string

	// Region is the region this node serves. Letters, digits, '-', '_' and
	// '.', at most 64 bytes. Default "local".
	Region string

	// Rack is the node's rack or zone inside its region, used for
	// placement. Same characters as Region; optional. Default "".
	Rack string

	// BindAddr is the gossip listen address, host:port, used for both UDP
	// and TCP. An empty host binds every interface; port 0 picks a free
	// port. Default ":7946".
	BindAddr string

	// AdvertiseAddr is the address other nodes use to reach this node's
	// gossip port: an IP, optionally with :port (default port: the bound
	// one). Default "": the bound IP, or a private IP when bound to every
	// interface, or 127.0.0.1 for a node with no seeds and no private IP.
	AdvertiseAddr string

	// Seeds are gossip addresses (host:port) of nodes already in the mesh.
	// The node keeps trying them, with jittered exponential backoff, until
	// one answers or the mesh is closed. Default: none (first node).
	Seeds []string

	// JoinRetryMin is the first delay between rounds of join attempts.
	// Default 1s.
	JoinRetryMin time.Duration

	// JoinRetryMax caps the delay between rounds of join attempts.
	// Default 60s.
	JoinRetryMax time.Duration

	// EncryptKey is the gossip encryption key, standard base64 of 16, 24
	// or 32 bytes (AES-128/192/256-GCM). Every node of a mesh needs a key
	// in common. When the keyring file exists its keys take precedence, so
	// rotations survive restarts. Default "": no encryption.
	EncryptKey string

	// KeyringFile is where the keyring is loaded from and where key
	// rotations are persisted (a JSON list of base64 keys, primary first).
	// Default "": DataDir/keyring.json when DataDir is set and a key is
	// configured; no persistence otherwise.
	KeyringFile string

	// DataDir holds the node's identity (node-id) and serf's snapshot
	// (serf.snapshot) so that a restarted node rejoins the peers it knew
	// under the same identity, without seeds. Default "": identity and
	// peers are forgotten on restart.
	DataDir string

	// MeshName labels every gossip packet; nodes with different mesh names
	// ignore each other. Default "tern".
	MeshName string

	// RejoinAfterLeave makes a node that left gracefully (Close) rejoin the
	// peers in its snapshot when started again. tern nodes leave on every
	// shutdown, so this defaults to true.
	RejoinAfterLeave bool

	// LeaveTimeout bounds the graceful leave in Close; after it the node
	// shuts down regardless and peers may see it fail instead of leave.
	// Half of it bounds the wait for a tag update's broadcast. Default 5s.
	LeaveTimeout time.Duration

	// SubscriberBuffer is how many undelivered events a subscriber may
	// fall behind before its subscription is ended with EventOverflow.
	// Default 4096.
	SubscriberBuffer int

	// Advertise holds the addresses and version this node publishes in its
	// tags.
	Advertise Advertise

	// Timings is the failure-detection and gossip profile. Default
	// WANTimings().
	Timings Timings

	// Logger receives the package's own records and everything serf and
	// memberlist log (key "component" says which). Default slog.Default().
	Logger *slog.Logger
}

// Advertise is what a node tells the mesh about the services it runs, so
// replication can dial it and clients can be pointed at it. Every address
// is host:port and optional.
type Advertise struct {
	// QUIC is the replication (mesh data) address. Tag "quic".
	QUIC string
	// Kafka is the Kafka client address. Tag "kafka".
	Kafka string
	// Pulsar is the Pulsar client address. Tag "pulsar".
	Pulsar string
	// HTTP is the admin, WebSocket and metrics address. Tag "http".
	HTTP string
	// Version is the tern version string. Tag "v".
	Version string
}

// Timings is the gossip profile. Failure detection time and bandwidth trade
// against each other; see FailureDetectionBound.
type Timings struct {
	// ProbeInterval is how often a node probes one peer. WAN 5s, LAN 1s.
	ProbeInterval time.Duration
	// ProbeTimeout is how long a direct probe waits for its ack before
	// asking peers to probe indirectly; must be below ProbeInterval.
	// WAN 3s, LAN 500ms.
	ProbeTimeout time.Duration
	// SuspicionMult scales the suspicion timeout:
	// SuspicionMult * max(1, log10(nodes)) * ProbeInterval. WAN 6, LAN 4.
	SuspicionMult int
	// SuspicionMaxTimeoutMult bounds how far the suspicion timeout can
	// stretch when few peers confirm the suspicion. Default 6.
	SuspicionMaxTimeoutMult int
	// GossipInterval is how often queued messages are gossiped.
	// WAN 500ms, LAN 200ms.
	GossipInterval time.Duration
	// GossipNodes is how many peers each gossip round reaches. WAN 4,
	// LAN 3.
	GossipNodes int
	// GossipToTheDead is how long dead nodes still receive gossip (and are
	// remembered by memberlist). WAN 60s, LAN 30s.
	GossipToTheDead time.Duration
	// PushPullInterval is how often two nodes exchange full state over
	// TCP. WAN 60s, LAN 30s.
	PushPullInterval time.Duration
	// TCPTimeout bounds a TCP push/pull or join exchange. WAN 30s,
	// LAN 10s.
	TCPTimeout time.Duration
	// ReapInterval is how often failed and left nodes are checked for
	// removal. Default 15s.
	ReapInterval time.Duration
	// ReconnectInterval is how often a failed node is retried. Default 30s.
	ReconnectInterval time.Duration
	// ReconnectTimeout is how long a failed node is remembered and retried
	// before it is reaped. Default 72h, so an edge node offline for a
	// weekend is still known.
	ReconnectTimeout time.Duration
	// TombstoneTimeout is how long a node that left is remembered.
	// Default 24h.
	TombstoneTimeout time.Duration
	// LeavePropagateDelay is how long a leaving node keeps answering probes
	// so its leave spreads before it goes silent. Default 1s.
	LeavePropagateDelay time.Duration
}

// WANTimings is memberlist's WAN profile (failure detection in tens of
// seconds) with serf's housekeeping defaults; the mesh spans regions, so
// this is the default.
func WANTimings() Timings {
	return timingsFrom(memberlist.DefaultWANConfig())
}

// LoopbackTimings suit nodes on one machine (tests, demos): a failure is
// detected in about two seconds and a leave propagates at once. Over real
// networks they would flap.
func LoopbackTimings() Timings {
	return Timings{
		ProbeInterval:           400 * time.Millisecond,
		ProbeTimeout:            200 * time.Millisecond,
		SuspicionMult:           3,
		SuspicionMaxTimeoutMult: 3,
		GossipInterval:          100 * time.Millisecond,
		GossipNodes:             3,
		GossipToTheDead:         4 * time.Second,
		PushPullInterval:        2 * time.Second,
		TCPTimeout:              5 * time.Second,
		ReapInterval:            200 * time.Millisecond,
		ReconnectInterval:       500 * time.Millisecond,
		ReconnectTimeout:        time.Hour,
		TombstoneTimeout:        time.Hour,
		LeavePropagateDelay:     50 * time.Millisecond,
	}
}

// LANTimings is memberlist's LAN profile, for meshes whose nodes share a
// network (development meshes, one region).
func LANTimings() Timings {
	return timingsFrom(memberlist.DefaultLANConfig())
}

func timingsFrom(ml *memberlist.Config) Timings {
	return Timings{
		ProbeInterval:           ml.ProbeInterval,
		ProbeTimeout:            ml.ProbeTimeout,
		SuspicionMult:           ml.SuspicionMult,
		SuspicionMaxTimeoutMult: ml.SuspicionMaxTimeoutMult,
		GossipInterval:          ml.GossipInterval,
		GossipNodes:             ml.GossipNodes,
		GossipToTheDead:         ml.GossipToTheDeadTime,
		PushPullInterval:        ml.PushPullInterval,
		TCPTimeout:              ml.TCPTimeout,
		ReapInterval:            15 * time.Second,
		ReconnectInterval:       30 * time.Second,
		ReconnectTimeout:        72 * time.Hour,
		TombstoneTimeout:        24 * time.Hour,
		LeavePropagateDelay:     time.Second,
	}
}

// SuspicionTimeout is the shortest time a peer stays suspect before it is
// declared failed, in a mesh of n nodes (memberlist's formula).
func (t Timings) SuspicionTimeout(n int) time.Duration {
	scale := math.Max(1, math.Log10(math.Max(1, float64(n))))
	return time.Duration(float64(t.SuspicionMult) * scale * float64(t.ProbeInterval))
}

// SuspicionMaxTimeout is the longest time a peer stays suspect when no
// other node confirms the suspicion.
func (t Timings) SuspicionMaxTimeout(n int) time.Duration {
	return time.Duration(t.SuspicionMaxTimeoutMult) * t.SuspicionTimeout(n)
}

// FailureDetectionBound is an upper bound on the time from a node dying
// silently to every healthy peer reporting it failed, in a mesh of n nodes:
// the dead node is probed within two probe rounds (the probe order is
// reshuffled after each round), the failed probe takes one probe interval,
// the suspicion runs at most SuspicionMaxTimeout, and the dead message
// spreads within a few gossip rounds. It assumes a healthy prober
// (memberlist's Lifeguard stretches probes on an overloaded node). Use it
// to size anything that waits on failure detection; gossip is far too slow
// to drive data-path failover.
func (t Timings) FailureDetectionBound(n int) time.Duration {
	if n < 2 {
		n = 2
	}
	probeRounds := time.Duration(2*(n-1)+1) * t.ProbeInterval
	spread := time.Duration(4*int(math.Ceil(math.Log10(float64(n+1))))+2) * t.GossipInterval
	return probeRounds + t.SuspicionMaxTimeout(n) + spread
}

// DefaultConfig is a single node in region "local" gossiping on :7946 with
// WAN timings, no seeds and no encryption.
func DefaultConfig() Config {
	return Config{
		NodeName:         defaultNodeName(),
		Region:           "local",
		BindAddr:         fmt.Sprintf(":%d", DefaultGossipPort),
		JoinRetryMin:     time.Second,
		JoinRetryMax:     60 * time.Second,
		MeshName:         "tern",
		RejoinAfterLeave: true,
		LeaveTimeout:     5 * time.Second,
		SubscriberBuffer: 4096,
		Timings:          WANTimings(),
	}
}

func defaultNodeName() string {
	host, err := os.Hostname()
	if err != nil {
		return "tern"
	}
	var b strings.Builder
	for _, r := range host {
		if validNodeNameRune(r) {
			b.WriteRune(r)
		}
	}
	name := b.String()
	if name == "" {
		return "tern"
	}
	if len(name) > maxNodeNameLen {
		name = name[:maxNodeNameLen]
	}
	return name
}

const (
	maxNodeNameLen = 128
	maxRegionLen   = 64
)

const (
	nodeNameChars = "letters, digits, '-' and '.'"
	regionChars   = "letters, digits, '-', '_' and '.'"
)

func validNodeNameRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.'
}

func validRegionRune(r rune) bool {
	return validNodeNameRune(r) || r == '_'
}

func checkName(field, v string, max int, ok func(rune) bool, allowed string, allowEmpty bool) error {
	if v == "" {
		if allowEmpty {
			return nil
		}
		return fmt.Errorf("%w: %s is empty; set it", ErrInvalidConfig, field)
	}
	if len(v) > max {
		return fmt.Errorf("%w: %s %q is %d bytes; use at most %d", ErrInvalidConfig, field, v, len(v), max)
	}
	for _, r := range v {
		if !ok(r) {
			return fmt.Errorf("%w: %s %q contains %q; use only %s", ErrInvalidConfig, field, v, r, allowed)
		}
	}
	return nil
}

// checkHostPort accepts host:port with a port in 1..65535 (0 too when
// allowZero), and a non-empty host unless allowEmptyHost.
func checkHostPort(field, v string, allowEmptyHost, allowZero bool) error {
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return fmt.Errorf("%w: %s %q: want host:port (%v)", ErrInvalidConfig, field, v, err)
	}
	if host == "" && !allowEmptyHost {
		return fmt.Errorf("%w: %s %q: the host is empty", ErrInvalidConfig, field, v)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 || (p == 0 && !allowZero) {
		return fmt.Errorf("%w: %s %q: port must be a number in 1..65535", ErrInvalidConfig, field, v)
	}
	return nil
}

// Validate reports every problem in the config at once, each naming its
// field and what to change.
func (c Config) Validate() error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	add(checkName("NodeName", c.NodeName, maxNodeNameLen, validNodeNameRune, nodeNameChars, false))
	add(checkName("Region", c.Region, maxRegionLen, validRegionRune, regionChars, false))
	add(checkName("Rack", c.Rack, maxRegionLen, validRegionRune, regionChars, true))
	add(checkName("MeshName", c.MeshName, memberlist.LabelMaxSize, validRegionRune, regionChars, false))
	if err := checkHostPort("BindAddr", c.BindAddr, true, true); err != nil {
		add(err)
	} else if host, _, _ := net.SplitHostPort(c.BindAddr); host != "" && net.ParseIP(host) == nil {
		add(fmt.Errorf("%w: BindAddr %q: the host must be an IP address, or empty for every interface", ErrInvalidConfig, c.BindAddr))
	}
	if c.AdvertiseAddr != "" {
		host, port := c.AdvertiseAddr, ""
		if h, p, err := net.SplitHostPort(c.AdvertiseAddr); err == nil {
			host, port = h, p
		}
		if net.ParseIP(host) == nil {
			add(fmt.Errorf("%w: AdvertiseAddr %q: want an IP address, optionally with :port", ErrInvalidConfig, c.AdvertiseAddr))
		} else if port != "" {
			add(checkHostPort("AdvertiseAddr", c.AdvertiseAddr, false, false))
		}
	}
	for i, s := range c.Seeds {
		add(checkHostPort(fmt.Sprintf("Seeds[%d]", i), s, false, false))
	}
	if c.JoinRetryMin <= 0 {
		add(fmt.Errorf("%w: JoinRetryMin %v must be positive", ErrInvalidConfig, c.JoinRetryMin))
	}
	if c.JoinRetryMax < c.JoinRetryMin {
		add(fmt.Errorf("%w: JoinRetryMax %v must be at least JoinRetryMin %v", ErrInvalidConfig, c.JoinRetryMax, c.JoinRetryMin))
	}
	if c.EncryptKey != "" {
		if _, err := decodeKey(c.EncryptKey); err != nil {
			add(fmt.Errorf("%w: EncryptKey: %w", ErrInvalidConfig, err))
		}
	}
	if c.LeaveTimeout <= 0 {
		add(fmt.Errorf("%w: LeaveTimeout %v must be positive", ErrInvalidConfig, c.LeaveTimeout))
	}
	if c.SubscriberBuffer < 1 {
		add(fmt.Errorf("%w: SubscriberBuffer %d must be at least 1", ErrInvalidConfig, c.SubscriberBuffer))
	}
	add(c.Advertise.validate())
	errs = append(errs, c.Timings.validate()...)
	if len(errs) == 0 {
		// Only meaningful once the individual tags are well formed.
		_, err := encodeTagsChecked(c.tags(placeholderID))
		add(err)
	}
	return errors.Join(errs...)
}

func (a Advertise) validate() error {
	var errs []error
	for _, f := range []struct{ name, v string }{
		{"Advertise.QUIC", a.QUIC}, {"Advertise.Kafka", a.Kafka},
		{"Advertise.Pulsar", a.Pulsar}, {"Advertise.HTTP", a.HTTP},
	} {
		if f.v != "" {
			if err := checkHostPort(f.name, f.v, false, false); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if strings.ContainsFunc(a.Version, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		errs = append(errs, fmt.Errorf("%w: Advertise.Version %q contains control characters", ErrInvalidConfig, a.Version))
	}
	return errors.Join(errs...)
}

func (t Timings) validate() []error {
	var errs []error
	pos := func(name string, d time.Duration) {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%w: Timings.%s %v must be positive", ErrInvalidConfig, name, d))
		}
	}
	pos("ProbeInterval", t.ProbeInterval)
	pos("ProbeTimeout", t.ProbeTimeout)
	pos("GossipInterval", t.GossipInterval)
	pos("GossipToTheDead", t.GossipToTheDead)
	pos("PushPullInterval", t.PushPullInterval)
	pos("TCPTimeout", t.TCPTimeout)
	pos("ReapInterval", t.ReapInterval)
	pos("ReconnectInterval", t.ReconnectInterval)
	pos("ReconnectTimeout", t.ReconnectTimeout)
	pos("TombstoneTimeout", t.TombstoneTimeout)
	if t.LeavePropagateDelay < 0 {
		errs = append(errs, fmt.Errorf("%w: Timings.LeavePropagateDelay %v must not be negative", ErrInvalidConfig, t.LeavePropagateDelay))
	}
	if t.ProbeTimeout >= t.ProbeInterval && t.ProbeInterval > 0 {
		errs = append(errs, fmt.Errorf("%w: Timings.ProbeTimeout %v must be below ProbeInterval %v", ErrInvalidConfig, t.ProbeTimeout, t.ProbeInterval))
	}
	if t.SuspicionMult < 1 {
		errs = append(errs, fmt.Errorf("%w: Timings.SuspicionMult %d must be at least 1", ErrInvalidConfig, t.SuspicionMult))
	}
	if t.SuspicionMaxTimeoutMult < 1 {
		errs = append(errs, fmt.Errorf("%w: Timings.SuspicionMaxTimeoutMult %d must be at least 1", ErrInvalidConfig, t.SuspicionMaxTimeoutMult))
	}
	if t.GossipNodes < 1 {
		errs = append(errs, fmt.Errorf("%w: Timings.GossipNodes %d must be at least 1", ErrInvalidConfig, t.GossipNodes))
	}
	return errs
}
