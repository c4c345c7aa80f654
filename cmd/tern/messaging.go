package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/ternmq/tern/protocols"
)

// `tern produce` and `tern consume` speak one of several client protocols. The default is
// Pulsar's WebSocket API v2 on the node's HTTP port: the same --url as every other command, and
// the client adds about 120 KiB to the binary (nothing once the node serves WebSockets, which
// links the same library). Kafka, through franz-go's kgo, is built in unless the binary is built
// with -tags tern_nokgo: kgo adds about 3.2 MiB (10%) to a stripped binary, a cost an edge
// build may refuse.

// outMessage is one message to produce.
type outMessage struct {
	Key        *string
	Value      []byte
	Properties map[string]string
}

// produced is where the node put a message.
type produced struct {
	// Partition is -1 for a non-partitioned topic.
	Partition int    `json:"partition"`
	Offset    int64  `json:"offset"`
	MessageID string `json:"message_id,omitempty"`
}

// inMessage is one consumed message.
type inMessage struct {
	Partition       int
	Offset          int64
	MessageID       string
	Key             *string
	Value           []byte
	Properties      map[string]string
	PublishTime     time.Time
	EventTime       time.Time
	RedeliveryCount int
	// ack is the handle the protocol acknowledges by.
	ack any
}

// producer sends messages; Send may pipeline and reports each result through done, in the
// order of the calls.
type producer interface {
	Send(ctx context.Context, m outMessage, done func(produced, error)) error
	// Flush waits until every message sent has its result.
	Flush(ctx context.Context) error
	Close() error
}

// consumer receives messages and acknowledges the ones handled.
type consumer interface {
	// Next blocks until a message arrives or ctx ends.
	Next(ctx context.Context) (inMessage, error)
	// Ack acknowledges a handled message (commits the group's offset).
	Ack(ctx context.Context, m inMessage) error
	Close() error
}

// clientOptions are what every protocol needs.
type clientOptions struct {
	api   *apiFlags
	topic protocols.TopicName
	// kafkaAddr and kafkaNS are the Kafka bootstrap address (empty: ask the node) and the
	// node's Kafka namespace.
	kafkaAddr, kafkaNS string

	// Consumers: subscription (or group) name, empty for a reader; its type; where a new
	// subscription or a reader starts.
	subscription string
	subType      string
	from         string
	name         string
}

// driver opens producers and consumers of one protocol.
type driver struct {
	producer func(ctx context.Context, o clientOptions) (producer, error)
	consumer func(ctx context.Context, o clientOptions) (consumer, error)
}

// drivers are the protocols this binary has; kafka registers itself when built in.
var drivers = map[string]driver{
	"ws": {producer: newWSProducer, consumer: newWSConsumer},
}

// protocolFlags are the flags that pick and reach a protocol.
type protocolFlags struct {
	protocol  string
	kafkaAddr string
	kafkaNS   string
}

func (p *protocolFlags) register(c *cobra.Command) {
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range drivers {
			if !yield(k) {
				return
			}
		}
	})
	c.Flags().StringVarP(&p.protocol, "protocol", "p", "ws", "client protocol: "+strings.Join(names, " or ")+
		" (ws: Pulsar's WebSocket API at --url)")
	c.Flags().StringVar(&p.kafkaAddr, "kafka", "", "Kafka bootstrap host:port, with --protocol kafka (default: the node's Kafka listener as --url reports it)")
	c.Flags().StringVar(&p.kafkaNS, "kafka-namespace", defaultNamespace, "the namespace the node serves to Kafka clients (its kafka.namespace)")
}

func (p *protocolFlags) driver() (driver, error) {
	d, ok := drivers[p.protocol]
	if ok {
		return d, nil
	}
	if p.protocol == "kafka" {
		return d, usagef("--protocol kafka: this tern was built without the Kafka client (-tags tern_nokgo); use --protocol ws")
	}
	return d, usagef("--protocol %q: want ws or kafka", p.protocol)
}

func propsText(p map[string]string) string {
	if len(p) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%s", k, p[k])
	}
	return b.String()
}
