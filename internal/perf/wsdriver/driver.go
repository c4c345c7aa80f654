package wsdriver

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/ternmq/tern/internal/perf"
	"github.com/ternmq/tern/internal/wsclient"
)

// Config configures the WebSocket clients.
type Config struct {
	// URL is the endpoint's base (ws://host:port or wss://). Required.
	URL string
	// AdminURL is the admin REST base (http://host:port). Default: URL's
	// host over http (tern serves both on one port).
	AdminURL string
	// Namespace holds the topics. Default public/default.
	Namespace string
	// Window is how many messages a producer has awaiting the node's
	// answer. Default 1000, the node's (and Pulsar's) maxPendingMessages.
	Window int
	// Batching has producers ask the endpoint to batch their messages
	// (batchingEnabled=true), waiting at most BatchDelay, rounded to
	// milliseconds, to fill a batch. Off by default, as in Pulsar.
	Batching   bool
	BatchDelay time.Duration
}

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	if !strings.HasPrefix(c.URL, "ws://") && !strings.HasPrefix(c.URL, "wss://") {
		errs = append(errs, fmt.Errorf("wsdriver: endpoint %q: want ws://host:port", c.URL))
	}
	if c.AdminURL != "" && !strings.HasPrefix(c.AdminURL, "http://") && !strings.HasPrefix(c.AdminURL, "https://") {
		errs = append(errs, fmt.Errorf("wsdriver: admin URL %q: want http://host:port", c.AdminURL))
	}
	if c.BatchDelay < 0 {
		errs = append(errs, fmt.Errorf("wsdriver: batch delay %v is negative", c.BatchDelay))
	}
	if c.Window < 0 {
		errs = append(errs, fmt.Errorf("wsdriver: window %d is negative", c.Window))
	}
	return errors.Join(errs...)
}

// Driver is a perf.Driver speaking Pulsar's WebSocket API.
type Driver struct {
	cfg Config
}

// New checks cfg and returns a driver.
func New(cfg Config) (*Driver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.URL = strings.TrimRight(cfg.URL, "/")
	if cfg.AdminURL == "" {
		cfg.AdminURL = "http" + strings.TrimPrefix(cfg.URL, "ws")
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "public/default"
	}
	if cfg.Window == 0 {
		cfg.Window = 1000
	}
	return &Driver{cfg: cfg}, nil
}

// Name implements perf.Driver.
func (d *Driver) Name() string { return "websocket" }

// Close implements perf.Driver.
func (d *Driver) Close() error { return nil }

// CreateTopic implements perf.Driver through the admin API.
func (d *Driver) CreateTopic(ctx context.Context, topic string, partitions int) error {
	if err := perf.CreatePulsarTopic(ctx, d.cfg.AdminURL, d.cfg.Namespace, topic, partitions); err != nil {
		return fmt.Errorf("wsdriver: %w", err)
	}
	return nil
}

func (d *Driver) dial(ctx context.Context, kind, topic string, q url.Values) (*websocket.Conn, error) {
	tenant, ns, _ := strings.Cut(d.cfg.Namespace, "/")
	u := d.cfg.URL + wsclient.TopicPath(kind, tenant, ns, topic)
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	c, resp, err := wsclient.Dial(ctx, u)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("wsdriver: %s: HTTP %d: %w", u, resp.StatusCode, err)
		}
		return nil, fmt.Errorf("wsdriver: %s: %w", u, err)
	}
	return c, nil
}

// NewProducer implements perf.Driver: one producer session on the
// topic, sending to its partitions in turn.
func (d *Driver) NewProducer(ctx context.Context, topic string) (perf.Producer, error) {
	q := url.Values{}
	q.Set("messageRoutingMode", "RoundRobinPartition")
	q.Set("maxPendingMessages", fmt.Sprint(d.cfg.Window))
	if d.cfg.Batching {
		q.Set("batchingEnabled", "true")
		q.Set("batchingMaxPublishDelay", fmt.Sprint(d.cfg.BatchDelay.Round(time.Millisecond).Milliseconds()))
	}
	c, err := d.dial(ctx, "producer", topic, q)
	if err != nil {
		return nil, err
	}
	return &producer{p: wsclient.NewProducer(c, d.cfg.Window)}, nil
}

type producer struct {
	p *wsclient.Producer
}

func (p *producer) Send(ctx context.Context, payload []byte, done func(error)) {
	err := p.p.Send(ctx, wsclient.Message{Payload: payload}, func(_ string, err error) { done(err) })
	if err != nil {
		done(err)
	}
}

func (p *producer) Flush(ctx context.Context) error { return p.p.Flush(ctx) }

func (p *producer) Close() error { return p.p.Close() }

// NewConsumer implements perf.Driver: a reader session from the earliest
// message on each partition p with p % count == index.
func (d *Driver) NewConsumer(ctx context.Context, topic string, partitions, index, count int, handle func([][]byte)) (perf.Consumer, error) {
	c := &consumer{stop: make(chan struct{})}
	for p := index; p < partitions; p += count {
		q := url.Values{}
		q.Set("messageId", "earliest")
		q.Set("readerName", fmt.Sprintf("bench-%d", index))
		conn, err := d.dial(ctx, "reader", fmt.Sprintf("%s-partition-%d", topic, p), q)
		if err != nil {
			_ = c.Close()
			return nil, err
		}
		s := wsclient.NewConsumer(conn)
		c.sessions = append(c.sessions, s)
		c.wg.Add(1)
		go c.read(s, handle)
	}
	if len(c.sessions) == 0 {
		return nil, fmt.Errorf("wsdriver: consumer %d of %d has no partition of %d: use at most %d consumers", index, count, partitions, partitions)
	}
	return c, nil
}

type consumer struct {
	sessions []*wsclient.Consumer
	stop     chan struct{}
	wg       sync.WaitGroup

	mu  sync.Mutex
	err error // the first failure not caused by Close
}

func (c *consumer) fail(err error) {
	select {
	case <-c.stop:
		return
	default:
	}
	c.mu.Lock()
	if c.err == nil {
		c.err = fmt.Errorf("wsdriver: reader: %w", err)
	}
	c.mu.Unlock()
}

// read hands each message of one session to handle, alone (the session
// delivers them one at a time), and acknowledges it, until the session
// ends.
func (c *consumer) read(s *wsclient.Consumer, handle func([][]byte)) {
	defer c.wg.Done()
	ctx := context.Background()
	var buf []byte
	one := make([][]byte, 1)
	for {
		m, err := s.Next(ctx)
		if err != nil {
			c.fail(err)
			return
		}
		select {
		case <-c.stop:
			return
		default:
		}
		if buf, err = m.Value(buf); err != nil {
			c.fail(err)
			return
		}
		one[0] = buf
		handle(one)
		if err := s.Ack(ctx, m.MessageID); err != nil {
			c.fail(err)
			return
		}
	}
}

// Close ends the sessions and reports the first failure of a session
// before it.
func (c *consumer) Close() error {
	close(c.stop)
	var errs []error
	for _, s := range c.sessions {
		errs = append(errs, s.Close())
	}
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	return errors.Join(append([]error{c.err}, errs...)...)
}
