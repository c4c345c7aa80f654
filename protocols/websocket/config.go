package websocket

import (
	"errors"
	"fmt"
	"log/slog"
	"path"
	"time"
)

// Config configures the WebSocket front end.
type Config struct {
	// MaxMessageSize bounds one message's payload after base64 decoding,
	// in bytes. Default 5 MiB, Pulsar's default.
	MaxMessageSize int
	// MaxFrameSize bounds one WebSocket message a client sends, in bytes;
	// a larger one closes the session with 1009 (message too big). Zero
	// derives it from MaxMessageSize: base64 grows a payload by a third,
	// and the JSON around it gets 64 KiB.
	MaxFrameSize int
	// MaxSessions bounds open sessions; an upgrade past it gets HTTP 503.
	// Default 10000.
	MaxSessions int
	// MaxInflightBytes bounds the payload bytes one producer session may
	// have waiting to become durable; past it the session is not read
	// until appends complete. Default 64 MiB.
	MaxInflightBytes int
	// MaxPendingMessages is how many messages one producer session may have
	// waiting to become durable, unless the session's maxPendingMessages
	// parameter says otherwise; past it the session is not read until
	// appends complete. Default 1000, Pulsar's default.
	MaxPendingMessages int
	// KeepAliveInterval is how often a session is pinged; one that does not
	// answer within the same interval is closed. Default 30s.
	KeepAliveInterval time.Duration
	// WriteTimeout bounds one write to a client. Default 30s.
	WriteTimeout time.Duration
	// SetupTimeout bounds creating a session's producer, consumer or
	// reader during the upgrade; past it the client gets HTTP 504.
	// Default 30s.
	SetupTimeout time.Duration
	// AutoCreateTopics creates a non-partitioned topic when a session names
	// one that does not exist, as Pulsar does by default. Default true.
	AutoCreateTopics bool
	// AllowedOrigins lists host patterns (path.Match syntax, e.g.
	// "*.example.com") of the pages a browser may open sessions from. Empty
	// allows every origin, as Pulsar's WebSocket service does; set it when
	// browsers on other sites can reach the node.
	AllowedOrigins []string
	// Authenticate, when set, is asked about every session before the
	// upgrade, with the token from the Authorization header or the token
	// query parameter. Nil lets every session in (the node has no
	// authentication configured).
	Authenticate AuthFunc
	// Logger receives session-level events. Default slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		MaxMessageSize:     5 << 20,
		MaxSessions:        10000,
		MaxInflightBytes:   64 << 20,
		MaxPendingMessages: 1000,
		KeepAliveInterval:  30 * time.Second,
		WriteTimeout:       30 * time.Second,
		SetupTimeout:       30 * time.Second,
		AutoCreateTopics:   true,
	}
}

// frameLimit is the effective MaxFrameSize.
func (c Config) frameLimit() int {
	if c.MaxFrameSize > 0 {
		return c.MaxFrameSize
	}
	return (c.MaxMessageSize+2)/3*4 + 64<<10
}

// Validate reports every problem at once, naming the field.
func (c Config) Validate() error {
	var errs []error
	if c.MaxMessageSize < 1024 || c.MaxMessageSize > 1<<30 {
		errs = append(errs, fmt.Errorf("MaxMessageSize %d: want 1 KiB to 1 GiB", c.MaxMessageSize))
	}
	if c.MaxFrameSize < 0 {
		errs = append(errs, fmt.Errorf("MaxFrameSize %d: want 0 (derived) or a positive size", c.MaxFrameSize))
	} else if c.MaxFrameSize > 0 && c.MaxFrameSize < 4096 {
		errs = append(errs, fmt.Errorf("MaxFrameSize %d: want at least 4 KiB", c.MaxFrameSize))
	}
	if c.MaxSessions <= 0 {
		errs = append(errs, fmt.Errorf("MaxSessions %d: want a positive number", c.MaxSessions))
	}
	if c.MaxInflightBytes < c.MaxMessageSize {
		errs = append(errs, fmt.Errorf("MaxInflightBytes %d is below MaxMessageSize %d; raise it", c.MaxInflightBytes, c.MaxMessageSize))
	}
	if c.MaxPendingMessages <= 0 {
		errs = append(errs, fmt.Errorf("MaxPendingMessages %d: want a positive number", c.MaxPendingMessages))
	}
	if c.KeepAliveInterval < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("KeepAliveInterval %v: want at least 100ms", c.KeepAliveInterval))
	}
	if c.WriteTimeout <= 0 {
		errs = append(errs, fmt.Errorf("WriteTimeout %v: want a positive duration", c.WriteTimeout))
	}
	if c.SetupTimeout <= 0 {
		errs = append(errs, fmt.Errorf("SetupTimeout %v: want a positive duration", c.SetupTimeout))
	}
	for _, p := range c.AllowedOrigins {
		if _, err := path.Match(p, ""); err != nil {
			errs = append(errs, fmt.Errorf("AllowedOrigins %q: %w", p, err))
		}
	}
	return errors.Join(errs...)
}
