package perf

import "context"

// Driver connects the workload to one system through one client library.
// Its methods are called from one goroutine; the Producers and Consumers
// it returns are each used by one goroutine, while their callbacks may run
// on any goroutine.
type Driver interface {
	// Name is a short label such as "kafka" or "jetstream".
	Name() string
	// CreateTopic makes the topic with the given number of partitions
	// (or the system's equivalent). An existing topic with that many
	// partitions is fine.
	CreateTopic(ctx context.Context, topic string, partitions int) error
	// NewProducer returns a producer publishing to topic.
	NewProducer(ctx context.Context, topic string) (Producer, error)
	// NewConsumer starts consumer index of count on topic, reading from
	// the start of its share of the partitions, and calls handle until
	// Close with the payloads of the messages it received together (one
	// poll's, or one message where the client hands them over one at a
	// time): the load generator reads the clock once for them. Calls may
	// come from several goroutines at once (one per partition session,
	// say). The slice and payloads are valid only during the call.
	NewConsumer(ctx context.Context, topic string, partitions, index, count int, handle func(payloads [][]byte)) (Consumer, error)
	// Close releases what the driver holds.
	Close() error
}

// Producer publishes messages.
type Producer interface {
	// Send publishes payload, which the producer owns until it calls done
	// exactly once with the outcome (from any goroutine). Send may block
	// while the client's buffer is full; it gives up when ctx ends, still
	// calling done.
	Send(ctx context.Context, payload []byte, done func(error))
	// Flush waits until done was called for every message sent.
	Flush(ctx context.Context) error
	// Close stops the producer; messages not yet acknowledged fail.
	Close() error
}

// Consumer is a running consumer.
type Consumer interface {
	// Close stops it; handle is not called after Close returns.
	Close() error
}
