package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
)

type consumeFlags struct {
	api          apiFlags
	proto        protocolFlags
	subscription string
	subType      string
	from         string
	count        int64
	idle         time.Duration
	values       bool
	name         string
}

func newConsumeCmd() *cobra.Command {
	var f consumeFlags
	c := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Print messages with their partition, offset, key and properties",
		Long: `Print the messages of TOPIC as they arrive: partition, offset, key,
properties and value (with --json, one object per line, with the message id).

Without --subscription the topic is read from --from without leaving a trace.
With --subscription (for Kafka, the group) every printed message is
acknowledged (committed), and a new subscription starts at --from.

It runs until Ctrl-C, or until --count messages arrived, or until none arrived
for --idle; if --count was not reached by then the exit status is 1.`,
		Example: `  tern consume orders --from earliest -n 10
  tern consume orders --subscription billing --type shared
  tern consume orders --protocol kafka --group billing --idle 5s`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runConsume(ctx, cmd, args[0], &f)
		},
	}
	fl := c.Flags()
	fl.StringVarP(&f.subscription, "subscription", "s", "", "durable subscription (Pulsar) or consumer group (Kafka) to consume as")
	fl.StringVarP(&f.subscription, "group", "g", "", "alias of --subscription")
	fl.StringVar(&f.subType, "type", "exclusive", "subscription type: exclusive, shared, failover or key_shared (ws)")
	fl.StringVar(&f.from, "from", "earliest", "where a reader or a new subscription starts: earliest or latest")
	fl.Int64VarP(&f.count, "count", "n", 0, "stop after this many messages (0: no limit)")
	fl.DurationVar(&f.idle, "idle", 0, "stop when no message arrived for this long (0: wait forever)")
	fl.BoolVar(&f.values, "values", false, "print only the values, one per line")
	fl.StringVar(&f.name, "name", "", "consumer or reader name")
	f.proto.register(c)
	f.api.register(c)
	return c
}

var subTypes = map[string]string{"exclusive": "Exclusive", "shared": "Shared", "failover": "Failover", "key_shared": "Key_Shared"}

func runConsume(ctx context.Context, cmd *cobra.Command, arg string, f *consumeFlags) error {
	topic, err := parseTopic(arg)
	if err != nil {
		return err
	}
	st, ok := subTypes[strings.ToLower(f.subType)]
	if !ok {
		return usagef("--type %q: want exclusive, shared, failover or key_shared", f.subType)
	}
	if f.from != "earliest" && f.from != "latest" {
		return usagef("--from %q: want earliest or latest", f.from)
	}
	if f.count < 0 || f.idle < 0 {
		return usagef("--count and --idle cannot be negative")
	}
	d, err := f.proto.driver()
	if err != nil {
		return err
	}
	o := clientOptions{api: &f.api, topic: topic, kafkaAddr: f.proto.kafkaAddr, kafkaNS: f.proto.kafkaNS,
		subscription: f.subscription, subType: st, from: f.from, name: f.name}
	c, err := d.consumer(ctx, o)
	if err != nil {
		return err
	}
	defer c.Close()

	out := cmd.OutOrStdout()
	var got int64
	for f.count == 0 || got < f.count {
		nctx, cancel := ctx, context.CancelFunc(func() {})
		if f.idle > 0 {
			nctx, cancel = context.WithTimeout(ctx, f.idle)
		}
		m, err := c.Next(nctx)
		cancel()
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return nil // interrupted: a normal end
		case errors.Is(err, context.DeadlineExceeded):
			if f.count > 0 {
				return fmt.Errorf("received %d of %d messages; none arrived for %v", got, f.count, f.idle)
			}
			return nil
		default:
			return err
		}
		if got == 0 && !f.api.asJSON && !f.values {
			fmt.Fprintf(out, "%-9s  %-8s  %-12s  %-20s  %s\n", "PARTITION", "OFFSET", "KEY", "PROPERTIES", "VALUE")
		}
		printMessage(out, m, f.api.asJSON, f.values)
		got++
		if err := c.Ack(ctx, m); err != nil {
			return fmt.Errorf("acknowledging offset %d of partition %d: %w", m.Offset, m.Partition, err)
		}
	}
	return nil
}

// consumedJSON is one message as `tern consume --json` prints it.
type consumedJSON struct {
	Partition       int               `json:"partition"`
	Offset          int64             `json:"offset"`
	MessageID       string            `json:"message_id,omitempty"`
	Key             *string           `json:"key,omitempty"`
	Properties      map[string]string `json:"properties,omitempty"`
	Value           *string           `json:"value,omitempty"`
	ValueBase64     []byte            `json:"value_base64,omitempty"`
	PublishTime     *time.Time        `json:"publish_time,omitempty"`
	EventTime       *time.Time        `json:"event_time,omitempty"`
	RedeliveryCount int               `json:"redelivery_count,omitempty"`
}

func printMessage(w io.Writer, m inMessage, asJSON, values bool) {
	if asJSON {
		j := consumedJSON{Partition: m.Partition, Offset: m.Offset, MessageID: m.MessageID, Key: m.Key, Properties: m.Properties,
			RedeliveryCount: m.RedeliveryCount}
		if utf8.Valid(m.Value) {
			v := string(m.Value)
			j.Value = &v
		} else {
			j.ValueBase64 = m.Value
		}
		if !m.PublishTime.IsZero() {
			j.PublishTime = &m.PublishTime
		}
		if !m.EventTime.IsZero() {
			j.EventTime = &m.EventTime
		}
		_ = printJSONLine(w, j)
		return
	}
	if values {
		fmt.Fprintln(w, printable(m.Value))
		return
	}
	key := "-"
	if m.Key != nil {
		key = printable([]byte(*m.Key))
	}
	fmt.Fprintf(w, "%-9s  %-8d  %-12s  %-20s  %s\n", partitionIndex(m.Partition), m.Offset, key, propsText(m.Properties), printable(m.Value))
}

// printable shows text as it is and anything else quoted, so one message stays one line.
func printable(b []byte) string {
	s := string(b)
	if utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) && r != '\t' }) < 0 {
		return s
	}
	return strconv.Quote(s)
}
