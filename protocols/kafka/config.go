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
	// FetchSessionSlots bounds the fetch sessions (KIP-227) the node keeps
	// (Kafka's max.incremental.fetch.session.cache.slots); 0 keeps none,
	// and consumers send full fetches. Default 1000.
	FetchSessionSlots int
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
	// where its time went. It runs on the connection's writer and must
	// not block.
	ObserveRequest func(key int16, t RequestTimes)
}

// RequestTimes is where one answered request's time went, in the phases
// Kafka's request metrics name (its RequestQueue, Local, Remote,
// ResponseQueue and ResponseSend times), so a slow request shows whether
// the client, the node's work, the disk or the connection held it.
type RequestTimes struct {
	// Receive runs from the frame's first bytes being read to its last:
	// the client sending a large request, a reader that fell behind, or
	// one held by the connection's in-flight budget.
	Receive time.Duration
	// Local is the handler's work in the reader: decoding, validating,
	// and for a produce, assigning offsets and writing to the log.
	Local time.Duration
	// Queue is the reply waiting for the connection's earlier replies to
	// be written (responses leave in request order).
	Queue time.Duration
	// Wait is the deferred part: a produce's fsync, a fetch's long poll,
	// a join waiting for the rebalance.
	Wait time.Duration
	// Send is encoding the response and writing it to the socket,
	// including any time its bytes waited in the connection's write
	// buffer behind later answers.
	Send time.Duration
}

// Total is the time from the frame being read to the response being
// written (Kafka's request total time, less the receive).
func (t RequestTimes) Total() time.Duration { return t.Local + t.Queue + t.Wait + t.Send }

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
		FetchSessionSlots:      1000,
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
	if c.FetchSessionSlots < 0 {
		errs = append(errs, fmt.Errorf("kafka: FetchSessionSlots %d: want 0 (none) or more", c.FetchSessionSlots))
	}
	if c.GroupMinSessionTimeout <= 0 || c.GroupMaxSessionTimeout < c.GroupMinSessionTimeout {
		errs = append(errs, fmt.Errorf("kafka: GroupMinSessionTimeout %v / GroupMaxSessionTimeout %v: want 0 < min <= max", c.GroupMinSessionTimeout, c.GroupMaxSessionTimeout))
	}
	return errors.Join(errs...)
}
