package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
)

// maxLine bounds one line read from stdin: one message.
const maxLine = 8 << 20

type produceFlags struct {
	api        apiFlags
	proto      protocolFlags
	key        string
	keySep     string
	properties []string
	name       string
}

func newProduceCmd() *cobra.Command {
	var f produceFlags
	c := &cobra.Command{
		Use:   "produce TOPIC",
		Short: "Send each line of stdin as a message",
		Long: `Send each line read from stdin as one message to TOPIC, then print how many
were sent (with --json, one line per message: partition, offset, message id).
Lines may carry a key (--key-separator), and every message the same
properties (--property).`,
		Example: `  echo hello | tern produce orders
  printf 'k1:v1\nk2:v2\n' | tern produce orders --key-separator : --property source=cli
  tern produce acme/billing/invoices --protocol kafka < invoices.txt`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runProduce(ctx, cmd, args[0], &f)
		},
	}
	fl := c.Flags()
	fl.StringVarP(&f.key, "key", "k", "", "the key of every message")
	fl.StringVar(&f.keySep, "key-separator", "", "split each line at the first SEP into key and value")
	fl.StringArrayVarP(&f.properties, "property", "P", nil, "a property (Kafka header) of every message, key=value; repeatable")
	fl.StringVar(&f.name, "name", "", "producer name (Pulsar's producerName)")
	f.proto.register(c)
	f.api.register(c)
	return c
}

func runProduce(ctx context.Context, cmd *cobra.Command, arg string, f *produceFlags) error {
	topic, err := parseTopic(arg)
	if err != nil {
		return err
	}
	if cmd.Flags().Changed("key") && f.keySep != "" {
		return usagef("--key and --key-separator both set the key: choose one")
	}
	props := map[string]string{}
	for _, kv := range f.properties {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usagef("--property %q: want key=value", kv)
		}
		props[k] = v
	}
	d, err := f.proto.driver()
	if err != nil {
		return err
	}
	o := clientOptions{api: &f.api, topic: topic, kafkaAddr: f.proto.kafkaAddr, kafkaNS: f.proto.kafkaNS, name: f.name}
	p, err := d.producer(ctx, o)
	if err != nil {
		return err
	}
	defer p.Close()

	out := cmd.OutOrStdout()
	var mu sync.Mutex
	var sent int64
	var firstErr error
	done := func(r produced, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			return
		}
		sent++
		if f.api.asJSON {
			_ = printJSONLine(out, r)
		}
	}
	sc := bufio.NewScanner(cmd.InOrStdin())
	sc.Buffer(make([]byte, 64<<10), maxLine)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		m := outMessage{Value: []byte(text), Properties: props}
		switch {
		case cmd.Flags().Changed("key"):
			k := f.key
			m.Key = &k
		case f.keySep != "":
			k, v, ok := strings.Cut(text, f.keySep)
			if !ok {
				return fmt.Errorf("line %d has no %q to split key from value; nothing more was sent after line %d", line, f.keySep, line-1)
			}
			m.Key, m.Value = &k, []byte(v)
		}
		if err := p.Send(ctx, m, done); err != nil {
			return fmt.Errorf("sending line %d: %w", line, err)
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("line %d is longer than %s: split it, or send it another way", line+1, formatSize(maxLine))
		}
		return fmt.Errorf("reading stdin: %w", err)
	}
	if err := p.Flush(ctx); err != nil && firstErr == nil {
		firstErr = err
	}
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		return fmt.Errorf("%d of %d messages were not acknowledged: %w", int64(line)-sent, line, firstErr)
	}
	if !f.api.asJSON {
		fmt.Fprintf(out, "produced %s to %s\n", plural(sent, "message"), topic)
	}
	return nil
}

// printJSONLine writes v as one line of JSON.
func printJSONLine(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}
