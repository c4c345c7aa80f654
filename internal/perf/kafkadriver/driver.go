package kafkadriver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ternmq/tern/internal/perf"
	"github.com/ternmq/tern/internal/perf/perfcli"
)

// Config configures the Kafka clients.
type Config struct {
	// Brokers are the bootstrap addresses. Required.
	Brokers []string
	// Acks is "all", "1" or "0". Default "all" (idempotent producer).
	Acks string
	// Linger is how long a producer waits to fill a batch. Default 1ms,
	// as the OpenMessaging Benchmark's Kafka driver and pulsar-perf use
	// (kgo's own default is 10ms).
	Linger time.Duration
	// Compression is "none", "gzip", "snappy", "lz4" or "zstd".
	// Default "none".
	Compression string
	// FetchSize is the most a consumer asks for per partition per fetch
	// (max.partition.fetch.bytes). Default 1 MiB, kgo's default and
	// kafka-consumer-perf-test's --fetch-size; throughput-tuned consumers
	// often use 10 MiB.
	FetchSize int
}

// defaultFetchSize is FetchSize's default; maxFetchSize is its largest
// value, kgo's whole-fetch default.
const (
	defaultFetchSize = 1 << 20
	maxFetchSize     = 50 << 20
)

// DefaultConfig is acks=all, 1ms linger, no compression, 1 MiB fetches.
func DefaultConfig() Config {
	return Config{Acks: "all", Linger: time.Millisecond, Compression: "none", FetchSize: defaultFetchSize}
}

// FlagsConfig is the configuration the bench flags ask for.
func FlagsConfig(f *perfcli.Flags) Config {
	cfg := DefaultConfig()
	cfg.Brokers = strings.Split(f.KafkaAddr, ",")
	cfg.Acks, cfg.Linger, cfg.Compression = f.Acks, f.Linger, f.Compression
	if f.FetchSize != 0 {
		cfg.FetchSize = f.FetchSize
	}
	return cfg
}

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("kafkadriver: no brokers: set the bootstrap address"))
	}
	if _, err := c.acks(); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.codec(); err != nil {
		errs = append(errs, err)
	}
	if c.Linger < 0 {
		errs = append(errs, fmt.Errorf("kafkadriver: linger %v is negative", c.Linger))
	}
	if c.FetchSize < 0 || c.FetchSize > maxFetchSize {
		errs = append(errs, fmt.Errorf("kafkadriver: fetch size %d: want 1 to %d bytes per partition (0 for the default 1 MiB)", c.FetchSize, maxFetchSize))
	}
	return errors.Join(errs...)
}

func (c Config) acks() (kgo.Acks, error) {
	switch c.Acks {
	case "all", "-1", "":
		return kgo.AllISRAcks(), nil
	case "1":
		return kgo.LeaderAck(), nil
	case "0":
		return kgo.NoAck(), nil
	}
	return kgo.AllISRAcks(), fmt.Errorf("kafkadriver: acks %q: want all, 1 or 0", c.Acks)
}

func (c Config) codec() (kgo.CompressionCodec, error) {
	switch c.Compression {
	case "none", "":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.NoCompression(), fmt.Errorf("kafkadriver: compression %q: want none, gzip, snappy, lz4 or zstd", c.Compression)
}

func (d *Driver) fetchSize() int {
	if d.cfg.FetchSize == 0 {
		return defaultFetchSize
	}
	return d.cfg.FetchSize
}

// Driver is a perf.Driver speaking Kafka.
type Driver struct {
	cfg Config
}

// New checks cfg and returns a driver; clients connect when used.
func New(cfg Config) (*Driver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Driver{cfg: cfg}, nil
}

// Name implements perf.Driver.
func (d *Driver) Name() string { return "kafka" }

// Close implements perf.Driver.
func (d *Driver) Close() error { return nil }

// CreateTopic implements perf.Driver with a CreateTopics request; a topic
// that exists with the same partition count is accepted.
func (d *Driver) CreateTopic(ctx context.Context, topic string, partitions int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.cfg.Brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, int32(partitions), 1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30_000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if len(resp.Topics) != 1 {
		return fmt.Errorf("kafkadriver: CreateTopics answered %d topics", len(resp.Topics))
	}
	t := resp.Topics[0]
	err = kerr.ErrorForCode(t.ErrorCode)
	if errors.Is(err, kerr.TopicAlreadyExists) {
		return d.checkPartitions(ctx, cl, topic, partitions)
	}
	if err != nil {
		msg := ""
		if t.ErrorMessage != nil {
			msg = ": " + *t.ErrorMessage
		}
		return fmt.Errorf("%w%s", err, msg)
	}
	return nil
}

func (d *Driver) checkPartitions(ctx context.Context, cl *kgo.Client, topic string, partitions int) error {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if len(resp.Topics) != 1 {
		return fmt.Errorf("kafkadriver: metadata for %s answered %d topics", topic, len(resp.Topics))
	}
	if got := len(resp.Topics[0].Partitions); got != partitions {
		return fmt.Errorf("kafkadriver: topic %s exists with %d partitions, not %d: pick another --topic", topic, got, partitions)
	}
	return nil
}

// NewProducer implements perf.Driver.
func (d *Driver) NewProducer(ctx context.Context, topic string) (perf.Producer, error) {
	acks, _ := d.cfg.acks()
	codec, _ := d.cfg.codec()
	opts := []kgo.Opt{
		kgo.SeedBrokers(d.cfg.Brokers...),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(acks),
		kgo.ProducerBatchCompression(codec),
		kgo.ProducerLinger(d.cfg.Linger),
	}
	if d.cfg.Acks != "all" && d.cfg.Acks != "-1" && d.cfg.Acks != "" {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	return &producer{cl: cl}, nil
}

type producer struct{ cl *kgo.Client }

// records holds the kgo.Records of sends whose promises ran, for reuse:
// kgo no longer holds a record once its promise returns. A record (160
// bytes) a message was the load generator's largest allocation.
var records = sync.Pool{New: func() any { return new(kgo.Record) }}

func (p *producer) Send(ctx context.Context, payload []byte, done func(error)) {
	r := records.Get().(*kgo.Record)
	r.Value = payload
	p.cl.Produce(ctx, r, func(r *kgo.Record, err error) {
		*r = kgo.Record{}
		records.Put(r)
		done(err)
	})
}

func (p *producer) Flush(ctx context.Context) error { return p.cl.Flush(ctx) }

func (p *producer) Close() error {
	p.cl.Close()
	return nil
}

// NewConsumer implements perf.Driver: consumer index of count reads the
// partitions p with p % count == index from the start, without a group,
// as kafka-consumer-perf-test does with assigned partitions.
func (d *Driver) NewConsumer(ctx context.Context, topic string, partitions, index, count int, handle func([][]byte)) (perf.Consumer, error) {
	assign := map[int32]kgo.Offset{}
	for p := index; p < partitions; p += count {
		assign[int32(p)] = kgo.NewOffset().AtStart()
	}
	if len(assign) == 0 {
		return nil, fmt.Errorf("kafkadriver: consumer %d of %d has no partition of %d: use at most %d consumers", index, count, partitions, partitions)
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(d.cfg.Brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign}),
		kgo.FetchMaxPartitionBytes(int32(d.fetchSize())),
	)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithCancel(context.Background())
	c := &consumer{cl: cl, cancel: cancel}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		var values [][]byte // one poll's, handed on together
		for cctx.Err() == nil {
			fs := cl.PollFetches(cctx)
			if cctx.Err() != nil {
				return
			}
			fs.EachError(func(t string, p int32, err error) {
				if !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "client closed") {
					c.setErr(fmt.Errorf("fetch %s/%d: %w", t, p, err))
				}
			})
			values = values[:0]
			fs.EachRecord(func(r *kgo.Record) { values = append(values, r.Value) })
			if len(values) > 0 {
				handle(values)
			}
			clear(values) // the poll's buffers may go
		}
	}()
	return c, nil
}

type consumer struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu  sync.Mutex
	err error
}

func (c *consumer) setErr(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
}

// Close stops polling and reports the first fetch error, if any.
func (c *consumer) Close() error {
	c.cancel()
	c.wg.Wait()
	c.cl.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}
