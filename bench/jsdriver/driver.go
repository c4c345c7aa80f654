package jsdriver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ternmq/tern/internal/perf"
)

// maxPending is how many publishes may await their acknowledgement; it is
// nats.go's own default for PublishAsync.
const maxPending = 4000

// Driver is a perf.Driver speaking NATS JetStream.
type Driver struct {
	url        string
	partitions atomic.Int64 // of the last topic created
}

// New returns a driver for the NATS server at url.
func New(url string) (*Driver, error) {
	if url == "" {
		return nil, errors.New("jsdriver: empty NATS URL")
	}
	return &Driver{url: url}, nil
}

// Name implements perf.Driver.
func (d *Driver) Name() string { return "jetstream" }

// Close implements perf.Driver.
func (d *Driver) Close() error { return nil }

func stream(topic string, p int) string  { return fmt.Sprintf("%s-%d", topic, p) }
func subject(topic string, p int) string { return fmt.Sprintf("%s.%d", topic, p) }

func (d *Driver) connect() (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(d.url)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(maxPending))
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// CreateTopic implements perf.Driver: one file-storage stream per
// partition.
func (d *Driver) CreateTopic(ctx context.Context, topic string, partitions int) error {
	nc, js, err := d.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	for p := range partitions {
		_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name:     stream(topic, p),
			Subjects: []string{subject(topic, p)},
			Storage:  jetstream.FileStorage,
		})
		if err != nil {
			return fmt.Errorf("jsdriver: stream %s: %w", stream(topic, p), err)
		}
	}
	// Remember the partition count for producers.
	d.partitions.Store(int64(partitions))
	return nil
}

// NewProducer implements perf.Driver. Messages go to the partitions'
// streams in turn.
func (d *Driver) NewProducer(ctx context.Context, topic string) (perf.Producer, error) {
	nc, js, err := d.connect()
	if err != nil {
		return nil, err
	}
	n := int(max(d.partitions.Load(), 1))
	p := &producer{nc: nc, js: js, pending: make(chan pending, maxPending), done: make(chan struct{})}
	for i := range n {
		p.subjects = append(p.subjects, subject(topic, i))
	}
	go p.acks()
	return p, nil
}

type pending struct {
	f    jetstream.PubAckFuture
	done func(error)
}

type producer struct {
	nc       *nats.Conn
	js       jetstream.JetStream
	subjects []string
	next     int
	pending  chan pending
	done     chan struct{}
	wg       sync.WaitGroup
	closed   bool
}

func (p *producer) Send(ctx context.Context, payload []byte, done func(error)) {
	subj := p.subjects[p.next%len(p.subjects)]
	p.next++
	// With maxPending unacknowledged, PublishAsync waits for room up to
	// the stall wait (200ms by default, then it fails); waiting as long as
	// it takes is the back-pressure every other driver applies.
	f, err := p.js.PublishAsync(subj, payload, jetstream.WithStallWait(time.Minute))
	if err != nil {
		done(err)
		return
	}
	p.wg.Add(1)
	// PublishAsync already holds at most maxPending unacknowledged, so
	// this never waits long.
	p.pending <- pending{f, done}
}

// acks resolves acknowledgements in publish order, which is the order the
// server answers in.
func (p *producer) acks() {
	defer close(p.done)
	for pd := range p.pending {
		select {
		case <-pd.f.Ok():
			pd.done(nil)
		case err := <-pd.f.Err():
			pd.done(err)
		}
		p.wg.Done()
	}
}

func (p *producer) Flush(ctx context.Context) error {
	all := make(chan struct{})
	go func() { p.wg.Wait(); close(all) }()
	select {
	case <-all:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *producer) Close() error {
	p.nc.Close() // fails what is still pending, which the ack loop reports
	if !p.closed {
		p.closed = true
		close(p.pending)
	}
	<-p.done
	return nil
}

// NewConsumer implements perf.Driver: consumer index of count reads the
// streams of partitions p with p % count == index from the start through
// ordered consumers.
func (d *Driver) NewConsumer(ctx context.Context, topic string, partitions, index, count int, handle func([][]byte)) (perf.Consumer, error) {
	nc, js, err := d.connect()
	if err != nil {
		return nil, err
	}
	c := &consumer{nc: nc}
	var mu sync.Mutex        // handle is called from one goroutine at a time
	one := make([][]byte, 1) // the client hands messages over one at a time
	for p := index; p < partitions; p += count {
		oc, err := js.OrderedConsumer(ctx, stream(topic, p), jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
		if err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("jsdriver: consumer on %s: %w", stream(topic, p), err)
		}
		cc, err := oc.Consume(func(m jetstream.Msg) {
			mu.Lock()
			one[0] = m.Data()
			handle(one)
			mu.Unlock()
		})
		if err != nil {
			_ = c.Close()
			return nil, err
		}
		c.ccs = append(c.ccs, cc)
	}
	if len(c.ccs) == 0 {
		_ = c.Close()
		return nil, fmt.Errorf("jsdriver: consumer %d of %d has no partition of %d", index, count, partitions)
	}
	return c, nil
}

type consumer struct {
	nc  *nats.Conn
	ccs []jetstream.ConsumeContext
}

func (c *consumer) Close() error {
	for _, cc := range c.ccs {
		cc.Stop()
		<-cc.Closed()
	}
	c.nc.Close()
	return nil
}
