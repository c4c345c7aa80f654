package replicator

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"
)

// Config configures a Transport. Every field has a default in DefaultConfig; NodeName, Region
// and one TLS mode must be set by the caller.
type Config struct {
	// ListenAddr is the UDP address the mesh QUIC endpoint listens on and dials from.
	// Default ":7947".
	ListenAddr string `yaml:"listen_addr"`
	// NodeName identifies this node in the mesh; it must be unique across all regions and equal
	// to the name the membership layer advertises. Required.
	NodeName string `yaml:"node_name"`
	// Region is the region this node serves; peers check that streams meant for a region reach
	// a node of that region. Required.
	Region string `yaml:"region"`
	// TLS selects how the mesh authenticates nodes: certificate files or a dev-mode secret.
	TLS TLSConfig `yaml:"tls"`

	// HandshakeTimeout bounds a QUIC handshake plus the HELLO exchange, and the wait for a new
	// stream's OPEN frame. Default 10s.
	HandshakeTimeout time.Duration `yaml:"handshake_timeout"`
	// KeepAlivePeriod is how often QUIC sends a keep-alive packet on an idle connection so NATs
	// and the idle timer keep it open. Default 5s; 0 disables.
	KeepAlivePeriod time.Duration `yaml:"keep_alive_period"`
	// IdleTimeout closes a connection that received nothing for this long (QUIC max_idle_timeout;
	// peers use the smaller of the two, never below 5s). Default 30s.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// HeartbeatInterval is how often each side sends a PING on the control stream. Default 2s.
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval"`
	// HeartbeatTimeout declares a link dead when no control frame arrived for this long; it lets
	// a severed link be noticed sooner than the QUIC idle timeout. Default 10s.
	HeartbeatTimeout time.Duration `yaml:"heartbeat_timeout"`

	// InitialStreamReceiveWindow is QUIC's starting per-stream receive window, in bytes.
	// Default 2 MiB.
	InitialStreamReceiveWindow uint64 `yaml:"initial_stream_receive_window"`
	// MaxStreamReceiveWindow caps QUIC's auto-tuned per-stream window, in bytes. It bounds a
	// stream's throughput to about window/RTT, so size it for bulk catch-up over the slowest
	// inter-region path: 16 MiB at 80 ms is about 200 MB/s. Default 16 MiB.
	MaxStreamReceiveWindow uint64 `yaml:"max_stream_receive_window"`
	// InitialConnectionReceiveWindow is QUIC's starting connection receive window, in bytes.
	// Default 4 MiB.
	InitialConnectionReceiveWindow uint64 `yaml:"initial_connection_receive_window"`
	// MaxConnectionReceiveWindow caps QUIC's auto-tuned connection window, in bytes; it is shared
	// by all partition streams to one node. Default 64 MiB.
	MaxConnectionReceiveWindow uint64 `yaml:"max_connection_receive_window"`
	// MaxIncomingStreams is how many concurrent streams a peer may open to us: one per
	// replicated partition plus the control stream. Default 4096.
	MaxIncomingStreams int64 `yaml:"max_incoming_streams"`

	// MaxFrameBytes is the largest link frame this node accepts, in bytes; it is announced in
	// HELLO so senders split runs of entries to fit, and an entry larger than this (less a few
	// bytes of framing) cannot be replicated to this node. Default 4 MiB; 64 KiB to 64 MiB.
	MaxFrameBytes int `yaml:"max_frame_bytes"`
	// StreamCreditBytes is the credit, in entry value bytes, a receiving stream grants when it
	// starts; it bounds the bytes a sender has in flight per stream until the receiver grants
	// more. It must be at least MaxFrameBytes so any acceptable entry can be sent. Default 8 MiB.
	StreamCreditBytes int64 `yaml:"stream_credit_bytes"`
	// StreamCreditEntries is the matching initial credit in entries. Default 16384.
	StreamCreditEntries int64 `yaml:"stream_credit_entries"`

	// ReconnectInitial is the first delay before redialing a lost or failed link. Default 200ms.
	ReconnectInitial time.Duration `yaml:"reconnect_initial"`
	// ReconnectMax caps the exponentially growing redial delay. Default 30s.
	ReconnectMax time.Duration `yaml:"reconnect_max"`
	// ReconnectJitter spreads each delay uniformly by +-this fraction so nodes that lost the same
	// link do not redial in lockstep. Default 0.2; 0 to 1.
	ReconnectJitter float64 `yaml:"reconnect_jitter"`

	// Logger receives the transport's logs (keys: peer, region, addr, stream, topic, partition,
	// err). Nil means slog.Default().
	Logger *slog.Logger `yaml:"-"`
}

// TLSConfig selects the mesh's mutual TLS. Set either the three files (production: a mesh CA
// issues each node a certificate usable for both client and server authentication) or
// MeshSecret (dev mode: every node derives the same CA from the secret and issues itself a
// certificate), not both.
type TLSConfig struct {
	// CertFile is this node's PEM certificate (chain); its key usages must allow both TLS client
	// and server authentication.
	CertFile string `yaml:"cert_file"`
	// KeyFile is the PEM private key for CertFile.
	KeyFile string `yaml:"key_file"`
	// CAFile holds the PEM certificates of the mesh CA(s) peers must chain to.
	CAFile string `yaml:"ca_file"`
	// MeshSecret enables dev mode: at least 16 bytes shared by every node of the mesh. Anyone
	// holding it can join the mesh, so treat it like a private key.
	MeshSecret string `yaml:"mesh_secret"`
	// DevCertValidity is how long the self-issued dev-mode certificate is valid. Default 8760h.
	DevCertValidity time.Duration `yaml:"dev_cert_validity"`
}

const (
	minFrameBytes   = 64 << 10
	maxFrameBytes   = 64 << 20
	minSecretLength = 16
	maxNameLength   = 255
)

// DefaultConfig returns the defaults documented on each field. NodeName, Region and a TLS mode
// are left empty: they have no sensible default.
func DefaultConfig() Config {
	return Config{
		ListenAddr:                     ":7947",
		HandshakeTimeout:               10 * time.Second,
		KeepAlivePeriod:                5 * time.Second,
		IdleTimeout:                    30 * time.Second,
		HeartbeatInterval:              2 * time.Second,
		HeartbeatTimeout:               10 * time.Second,
		InitialStreamReceiveWindow:     2 << 20,
		MaxStreamReceiveWindow:         16 << 20,
		InitialConnectionReceiveWindow: 4 << 20,
		MaxConnectionReceiveWindow:     64 << 20,
		MaxIncomingStreams:             4096,
		MaxFrameBytes:                  4 << 20,
		StreamCreditBytes:              8 << 20,
		StreamCreditEntries:            16384,
		ReconnectInitial:               200 * time.Millisecond,
		ReconnectMax:                   30 * time.Second,
		ReconnectJitter:                0.2,
		TLS:                            TLSConfig{DevCertValidity: 365 * 24 * time.Hour},
		Logger:                         slog.Default(),
	}
}

// Validate reports every problem at once, each naming the field and what to change.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if c.ListenAddr == "" {
		bad("replicator: ListenAddr is empty: set a UDP host:port such as \":7947\"")
	} else if _, _, err := net.SplitHostPort(c.ListenAddr); err != nil {
		bad("replicator: ListenAddr %q is not host:port: %w", c.ListenAddr, err)
	}
	if err := checkName("NodeName", c.NodeName); err != nil {
		errs = append(errs, err)
	}
	if err := checkName("Region", c.Region); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.TLS.validate()...)

	positive := func(name string, d time.Duration) {
		if d <= 0 {
			bad("replicator: %s is %v: it must be positive", name, d)
		}
	}
	positive("HandshakeTimeout", c.HandshakeTimeout)
	positive("IdleTimeout", c.IdleTimeout)
	positive("HeartbeatInterval", c.HeartbeatInterval)
	positive("HeartbeatTimeout", c.HeartbeatTimeout)
	positive("ReconnectInitial", c.ReconnectInitial)
	positive("ReconnectMax", c.ReconnectMax)
	if c.KeepAlivePeriod < 0 {
		bad("replicator: KeepAlivePeriod is %v: use 0 to disable or a positive period", c.KeepAlivePeriod)
	}
	if c.HeartbeatInterval > 0 && c.HeartbeatTimeout > 0 && c.HeartbeatTimeout < 2*c.HeartbeatInterval {
		bad("replicator: HeartbeatTimeout %v is shorter than two HeartbeatIntervals (%v): one lost PING would drop the link",
			c.HeartbeatTimeout, 2*c.HeartbeatInterval)
	}
	if c.ReconnectMax > 0 && c.ReconnectInitial > c.ReconnectMax {
		bad("replicator: ReconnectInitial %v exceeds ReconnectMax %v", c.ReconnectInitial, c.ReconnectMax)
	}
	if c.ReconnectJitter < 0 || c.ReconnectJitter > 1 {
		bad("replicator: ReconnectJitter is %v: use a fraction from 0 to 1", c.ReconnectJitter)
	}
	if c.InitialStreamReceiveWindow == 0 || c.MaxStreamReceiveWindow < c.InitialStreamReceiveWindow {
		bad("replicator: stream receive windows (initial %d, max %d) must be positive with max >= initial",
			c.InitialStreamReceiveWindow, c.MaxStreamReceiveWindow)
	}
	if c.InitialConnectionReceiveWindow == 0 || c.MaxConnectionReceiveWindow < c.InitialConnectionReceiveWindow {
		bad("replicator: connection receive windows (initial %d, max %d) must be positive with max >= initial",
			c.InitialConnectionReceiveWindow, c.MaxConnectionReceiveWindow)
	}
	if c.MaxConnectionReceiveWindow < c.MaxStreamReceiveWindow {
		bad("replicator: MaxConnectionReceiveWindow %d is smaller than MaxStreamReceiveWindow %d: one stream could never use its window",
			c.MaxConnectionReceiveWindow, c.MaxStreamReceiveWindow)
	}
	if c.MaxIncomingStreams < 2 {
		bad("replicator: MaxIncomingStreams is %d: at least 2 (the control stream and one partition)", c.MaxIncomingStreams)
	}
	if c.MaxFrameBytes < minFrameBytes || c.MaxFrameBytes > maxFrameBytes {
		bad("replicator: MaxFrameBytes is %d: use %d to %d", c.MaxFrameBytes, minFrameBytes, maxFrameBytes)
	}
	if c.StreamCreditBytes < int64(c.MaxFrameBytes) {
		bad("replicator: StreamCreditBytes %d is below MaxFrameBytes %d: an entry of the largest acceptable size could never be sent",
			c.StreamCreditBytes, c.MaxFrameBytes)
	}
	if c.StreamCreditEntries < 1 {
		bad("replicator: StreamCreditEntries is %d: it must be at least 1", c.StreamCreditEntries)
	}
	return errors.Join(errs...)
}

func (t TLSConfig) validate() []error {
	var errs []error
	files := t.CertFile != "" || t.KeyFile != "" || t.CAFile != ""
	switch {
	case files && t.MeshSecret != "":
		errs = append(errs, errors.New("replicator: TLS sets both certificate files and MeshSecret: choose files (production) or MeshSecret (dev mode)"))
	case files:
		if t.CertFile == "" || t.KeyFile == "" || t.CAFile == "" {
			errs = append(errs, fmt.Errorf("replicator: TLS needs CertFile, KeyFile and CAFile together (have cert %q, key %q, ca %q)",
				t.CertFile, t.KeyFile, t.CAFile))
		}
	case t.MeshSecret != "":
		if len(t.MeshSecret) < minSecretLength {
			errs = append(errs, fmt.Errorf("replicator: TLS.MeshSecret is %d bytes: use at least %d random bytes", len(t.MeshSecret), minSecretLength))
		}
		if t.DevCertValidity <= 0 {
			errs = append(errs, fmt.Errorf("replicator: TLS.DevCertValidity is %v: it must be positive", t.DevCertValidity))
		}
	default:
		errs = append(errs, errors.New("replicator: TLS is not configured: set CertFile, KeyFile and CAFile, or MeshSecret for dev mode"))
	}
	return errs
}

func checkName(field, v string) error {
	if v == "" {
		return fmt.Errorf("replicator: %s is empty: it is required", field)
	}
	if len(v) > maxNameLength {
		return fmt.Errorf("replicator: %s is %d bytes: at most %d", field, len(v), maxNameLength)
	}
	for _, r := range v {
		if r <= ' ' || r == 0x7f {
			return fmt.Errorf("replicator: %s %q contains a space or control character", field, v)
		}
	}
	return nil
}
