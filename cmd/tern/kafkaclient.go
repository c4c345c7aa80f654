//go:build !tern_nokgo

package main

// --protocol kafka, through franz-go's kgo: about 3.2 MiB of a stripped binary. Build with
// -tags tern_nokgo to leave it out (the same tag leaves kgo out of `tern bench`); the
// WebSocket protocol then remains.

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ternmq/tern/regions"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() {
	drivers["kafka"] = driver{producer: newKafkaProducer, consumer: newKafkaConsumer}
}

// kafkaTopic is the Kafka name of a topic: its local name, if it lives in the namespace the
// node serves to Kafka clients.
func kafkaTopic(o clientOptions) (string, error) {
	ns, err := parseNamespace(o.kafkaNS)
	if err != nil {
		return "", usagef("--kafka-namespace: %v", err)
	}
	if o.topic.NamespaceName() != ns {
		return "", usagef("Kafka clients see only the topics of the node's Kafka namespace (%s), not %s: name a topic there, use --protocol ws, or set --kafka-namespace to the node's kafka.namespace",
			ns, o.topic.NamespaceName())
	}
	return o.topic.Local, nil
}

// kafkaBootstrap is --kafka, or the Kafka listener the node at --url advertises.
func kafkaBootstrap(ctx context.Context, o clientOptions) (string, error) {
	if o.kafkaAddr != "" {
		return o.kafkaAddr, nil
	}
	var snap regions.Snapshot
	if err := o.api.call(ctx, "GET", "/api/v1/mesh", nil, &snap); err != nil {
		return "", fmt.Errorf("finding the node's Kafka listener: %w (or give --kafka host:port)", err)
	}
	for _, r := range snap.Regions {
		for _, n := range r.Nodes {
			if n.Local && n.KafkaAddr != "" {
				return n.KafkaAddr, nil
			}
		}
	}
	return "", errors.New("the node advertises no Kafka listener: give --kafka host:port")
}

func kafkaClient(ctx context.Context, o clientOptions, extra ...kgo.Opt) (*kgo.Client, string, error) {
	topic, err := kafkaTopic(o)
	if err != nil {
		return nil, "", err
	}
	addr, err := kafkaBootstrap(ctx, o)
	if err != nil {
		return nil, "", err
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ClientID("tern-cli")}, extra...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, "", usagef("--kafka %s: %v", addr, err)
	}
	return cl, topic, nil
}

type kafkaProducer struct {
	cl    *kgo.Client
	topic string
	// order delivers results in the order of Send, as the producer interface promises; kgo
	// calls back per partition in order, but partitions interleave.
	mu      sync.Mutex
	results []*kafkaResult
}

type kafkaResult struct {
	done  func(produced, error)
	ready bool
	r     produced
	err   error
}

func newKafkaProducer(ctx context.Context, o clientOptions) (producer, error) {
	cl, topic, err := kafkaClient(ctx, o, kgo.AllowAutoTopicCreation())
	if err != nil {
		return nil, err
	}
	return &kafkaProducer{cl: cl, topic: topic}, nil
}

func (p *kafkaProducer) Send(ctx context.Context, m outMessage, done func(produced, error)) error {
	rec := &kgo.Record{Topic: p.topic, Value: m.Value}
	if m.Key != nil {
		rec.Key = []byte(*m.Key)
	}
	for k, v := range m.Properties {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	res := &kafkaResult{done: done}
	p.mu.Lock()
	p.results = append(p.results, res)
	p.mu.Unlock()
	p.cl.Produce(ctx, rec, func(r *kgo.Record, err error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		res.ready, res.err = true, err
		res.r = produced{Partition: int(r.Partition), Offset: r.Offset}
		for len(p.results) > 0 && p.results[0].ready {
			h := p.results[0]
			p.results = p.results[1:]
			h.done(h.r, h.err)
		}
	})
	return nil
}

func (p *kafkaProducer) Flush(ctx context.Context) error { return p.cl.Flush(ctx) }

func (p *kafkaProducer) Close() error {
	p.cl.Close()
	return nil
}

type kafkaConsumer struct {
	cl      *kgo.Client
	group   bool
	pending []*kgo.Record
}

func newKafkaConsumer(ctx context.Context, o clientOptions) (consumer, error) {
	start := kgo.NewOffset().AtStart()
	if o.from == "latest" {
		start = kgo.NewOffset().AtEnd()
	}
	topic, err := kafkaTopic(o)
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(start)}
	if o.subscription != "" {
		opts = append(opts, kgo.ConsumerGroup(o.subscription), kgo.DisableAutoCommit())
	}
	cl, _, err := kafkaClient(ctx, o, opts...)
	if err != nil {
		return nil, err
	}
	return &kafkaConsumer{cl: cl, group: o.subscription != ""}, nil
}

func (c *kafkaConsumer) Next(ctx context.Context) (inMessage, error) {
	for len(c.pending) == 0 {
		fs := c.cl.PollRecords(ctx, 500)
		if err := ctx.Err(); err != nil {
			return inMessage{}, err
		}
		var errs []error
		fs.EachError(func(t string, p int32, err error) {
			errs = append(errs, fmt.Errorf("%s partition %d: %w", t, p, err))
		})
		if len(errs) > 0 {
			return inMessage{}, errors.Join(errs...)
		}
		c.pending = fs.Records()
	}
	r := c.pending[0]
	c.pending = c.pending[1:]
	m := inMessage{Partition: int(r.Partition), Offset: r.Offset, Value: r.Value, PublishTime: r.Timestamp, ack: r}
	if r.Key != nil {
		k := string(r.Key)
		m.Key = &k
	}
	if len(r.Headers) > 0 {
		m.Properties = map[string]string{}
		for _, h := range r.Headers {
			m.Properties[h.Key] = string(h.Value)
		}
	}
	return m, nil
}

func (c *kafkaConsumer) Ack(ctx context.Context, m inMessage) error {
	if !c.group {
		return nil
	}
	return c.cl.CommitRecords(ctx, m.ack.(*kgo.Record))
}

func (c *kafkaConsumer) Close() error {
	c.cl.Close()
	return nil
}
