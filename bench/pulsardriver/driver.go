package pulsardriver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/ternmq/tern/internal/perf"
)

// Config configures the Pulsar clients.
type Config struct {
	// URL is the service URL (pulsar://host:port). Required.
	URL string
	// AdminURL is the admin REST base URL (http://host:port). Required.
	AdminURL string
	// Linger is the batching delay. Default 1ms (pulsar-perf's).
	Linger time.Duration
	// NoBatching has producers send each message alone, as pulsar-perf's
	// --disable-batching does (the client's DisableBatching).
	NoBatching bool
	// Namespace holds the topics. Default public/default.
	Namespace string
}

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	if !strings.HasPrefix(c.URL, "pulsar://") {
		errs = append(errs, fmt.Errorf("pulsardriver: service URL %q: want pulsar://host:port", c.URL))
	}
	if !strings.HasPrefix(c.AdminURL, "http://") && !strings.HasPrefix(c.AdminURL, "https://") {
		errs = append(errs, fmt.Errorf("pulsardriver: admin URL %q: want http://host:port", c.AdminURL))
	}
	if c.Linger < 0 {
		errs = append(errs, fmt.Errorf("pulsardriver: linger %v is negative", c.Linger))
	}
	return errors.Join(errs...)
}

// Driver is a perf.Driver speaking Pulsar.
type Driver struct {
	cfg Config
}

// New checks cfg and returns a driver.
func New(cfg Config) (*Driver, error) {
	if cfg.Namespace == "" {
		cfg.Namespace = "public/default"
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.AdminURL = strings.TrimRight(cfg.AdminURL, "/")
	return &Driver{cfg: cfg}, nil
}

// Name implements perf.Driver.
func (d *Driver) Name() string { return "pulsar" }

// Close implements perf.Driver.
func (d *Driver) Close() error { return nil }

func (d *Driver) topic(name string) string {
	return "persistent://" + d.cfg.Namespace + "/" + name
}

// CreateTopic implements perf.Driver with the admin API's
// PUT .../partitions; a conflict (it exists) is accepted.
func (d *Driver) CreateTopic(ctx context.Context, topic string, partitions int) error {
	if err := perf.CreatePulsarTopic(ctx, d.cfg.AdminURL, d.cfg.Namespace, topic, partitions); err != nil {
		return fmt.Errorf("pulsardriver: %w", err)
	}
	return nil
}

func (d *Driver) client() (pulsar.Client, error) {
	return pulsar.NewClient(pulsar.ClientOptions{
		URL:    d.cfg.URL,
		Logger: plog.DefaultNopLogger(),
	})
}

// NewProducer implements perf.Driver.
func (d *Driver) NewProducer(ctx context.Context, topic string) (perf.Producer, error) {
	cl, err := d.client()
	if err != nil {
		return nil, err
	}
	pr, err := cl.CreateProducer(pulsar.ProducerOptions{
		Topic:                   d.topic(topic),
		BatchingMaxPublishDelay: max(d.cfg.Linger, time.Microsecond),
		// The batch limits are the client's defaults (1000 messages,
		// 128 KiB), which Java's client shares: what an unchanged
		// application sends. Since the node stores entries over 192 KiB
		// in parts, 1 MiB batches are as fast (257-262k msgs/s, node
		// 2.7-2.8 us/msg, against 257k and 3.0 at 128 KiB); before, they
		// cost the node 5.1-5.9 us/msg.
		BatchingMaxMessages: 1000,
		BatchingMaxSize:     128 << 10,
		MaxPendingMessages:  10000,
		DisableBatching:     d.cfg.NoBatching,
	})
	if err != nil {
		cl.Close()
		return nil, err
	}
	return &producer{cl: cl, pr: pr}, nil
}

type producer struct {
	cl pulsar.Client
	pr pulsar.Producer
}

func (p *producer) Send(ctx context.Context, payload []byte, done func(error)) {
	p.pr.SendAsync(ctx, &pulsar.ProducerMessage{Payload: payload}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
		done(err)
	})
}

func (p *producer) Flush(ctx context.Context) error { return p.pr.FlushWithCtx(ctx) }

func (p *producer) Close() error {
	p.pr.Close()
	p.cl.Close()
	return nil
}

// NewConsumer implements perf.Driver.
func (d *Driver) NewConsumer(ctx context.Context, topic string, partitions, index, count int, handle func([][]byte)) (perf.Consumer, error) {
	var topics []string
	for p := index; p < partitions; p += count {
		topics = append(topics, fmt.Sprintf("%s-partition-%d", d.topic(topic), p))
	}
	if len(topics) == 0 {
		return nil, fmt.Errorf("pulsardriver: consumer %d of %d has no partition of %d", index, count, partitions)
	}
	cl, err := d.client()
	if err != nil {
		return nil, err
	}
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{
		Topics:                      topics,
		SubscriptionName:            fmt.Sprintf("bench-%d", index),
		Type:                        pulsar.Exclusive,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
	})
	if err != nil {
		cl.Close()
		return nil, err
	}
	c := &consumer{cl: cl, cons: cons, stop: make(chan struct{})}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		ch := cons.Chan()
		one := make([][]byte, 1) // the client hands messages over one at a time
		for {
			select {
			case <-c.stop:
				return
			case m, ok := <-ch:
				if !ok {
					return
				}
				one[0] = m.Payload()
				handle(one)
				_ = cons.Ack(m.Message)
			}
		}
	}()
	return c, nil
}

type consumer struct {
	cl   pulsar.Client
	cons pulsar.Consumer
	stop chan struct{}
	wg   sync.WaitGroup
}

func (c *consumer) Close() error {
	close(c.stop)
	c.wg.Wait()
	c.cons.Close()
	c.cl.Close()
	return nil
}
