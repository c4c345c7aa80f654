package kafka

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ternmq/tern/protocols"
)

// Config configures the Kafka front end.
type Config struct {
	// Namespace holds Kafka topics, as tenant/namespace. Default
	// "public/default".
	Namespace string
	// MaxRequestBytes bounds one request frame; a larger frame closes the
	// connection. Default 100 MiB (Kafka's socket.request.max.bytes).
	MaxRequestBytes int
	// MaxInflightBytes bounds the request bytes a connection may have read
	// but not yet answered; the connection is not read further until
	// responses catch up. Default 64 MiB.
	MaxInflightBytes int
	// MaxInflightRequests bounds the requests a connection may have read
	// but not yet answered. Default 128.
	MaxInflightRequests int
	// MaxConnections bounds open connections; further connections are
	// closed at once. Default 10000.
	MaxConnections int
	// FetchMaxBytes bounds the record bytes of one fetch response,
	// whatever the request asks (the broker's fetch.max.bytes). A fetch
	// still returns the first batch whole when it alone is larger
	// (KIP-74), so consumers always make progress; a consumer asking more
	// gets this much and fetches again. The node copies a response's
	// batches through memory (it does not send from the page cache as
	// Kafka does), so this bounds the heap one fetch takes. Default 4 MiB.
	FetchMaxBytes int
	// GroupMinSessionTimeout and GroupMaxSessionTimeout bound the session
	// timeouts group members may ask for (Kafka's
	// group.min.session.timeout.ms and group.max.session.timeout.ms).
	// Defaults 6s and 30m.
	GroupMinSessionTimeout time.Duration
	GroupMaxSessionTimeout time.Duration
	// Logger receives connection and protocol-violation logs. Default
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock of the group coordinator. Default time.Now.
	Now func() time.Time
	// ObserveRequest, if set, is told each answered request's API key and
	// the time from its frame being read to its response being handed to
	// the connection (Kafka's request total time; a Fetch includes its
	// long-poll wait, a Produce with acks=all its fsync). It runs on the
	// connection's writer and must not block.
	ObserveRequest func(key int16, d time.Duration)
}

// DefaultConfig is the configuration a node runs with unless told
// otherwise.
func DefaultConfig() Config {
	return Config{
		Namespace:              "public/default",
		MaxRequestBytes:        100 << 20,
		MaxInflightBytes:       64 << 20,
		MaxInflightRequests:    128,
		MaxConnections:         10000,
		FetchMaxBytes:          4 << 20,
		GroupMinSessionTimeout: 6 * time.Second,
		GroupMaxSessionTimeout: 30 * time.Minute,
	}
}

// Validate reports every problem at once, naming the field.
func (c Config) Validate() error {
	var errs []error
	if _, err := protocols.ParseNamespace(c.Namespace); err != nil {
		errs = append(errs, fmt.Errorf("kafka: Namespace: %w", err))
	}
	if c.MaxRequestBytes < 1<<10 {
		errs = append(errs, fmt.Errorf("kafka: MaxRequestBytes %d: want at least 1024", c.MaxRequestBytes))
	}
	if c.MaxInflightBytes < c.MaxRequestBytes && c.MaxInflightBytes < 1<<20 {
		errs = append(errs, fmt.Errorf("kafka: MaxInflightBytes %d: want at least 1 MiB", c.MaxInflightBytes))
	}
	if c.MaxInflightRequests < 1 {
		errs = append(errs, fmt.Errorf("kafka: MaxInflightRequests %d: want at least 1", c.MaxInflightRequests))
	}
	if c.MaxConnections < 1 {
		errs = append(errs, fmt.Errorf("kafka: MaxConnections %d: want at least 1", c.MaxConnections))
	}
	if c.FetchMaxBytes < 1<<10 {
		errs = append(errs, fmt.Errorf("kafka: FetchMaxBytes %d: want at least 1024", c.FetchMaxBytes))
	}
	if c.GroupMinSessionTimeout <= 0 || c.GroupMaxSessionTimeout < c.GroupMinSessionTimeout {
		errs = append(errs, fmt.Errorf("kafka: GroupMinSessionTimeout %v / GroupMaxSessionTimeout %v: want 0 < min <= max", c.GroupMinSessionTimeout, c.GroupMaxSessionTimeout))
	}
	return errors.Join(errs...)
}
