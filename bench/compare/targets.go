package compare

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ternmq/tern/bench/jsdriver"
	"github.com/ternmq/tern/bench/peer"
	"github.com/ternmq/tern/bench/pulsardriver"
	"github.com/ternmq/tern/configs"
	"github.com/ternmq/tern/internal/perf"
	"github.com/ternmq/tern/internal/perf/kafkadriver"
	"github.com/ternmq/tern/internal/perf/wsdriver"
)

// target is one system under test: a server and the client driving it.
type target struct {
	name string
	// peerArgs start the server: tern-bench peer ARGS...
	peerArgs []string
	// driver builds the client for a started server.
	driver func(a peer.Addrs, linger time.Duration) (perf.Driver, error)
	// note is said under the tables.
	note string
	// self, if set, is another tern-bench binary to run the server with
	// (SYSTEM@BINARY), so two builds can be compared in one run.
	self string
	// config, if set, is a tern config file whose settings the server
	// runs with (SYSTEM#FILE), so two settings can be compared in one run.
	config string
}

// Targets are the systems compare knows, by name. Any of them may be given
// as NAME@BINARY to run its server with another tern-bench binary, and a
// tern one as NAME#FILE to run it with the settings of a tern config file
// (the system's durability stands over the file's).
var Targets = []string{"tern/kafka", "tern/pulsar", "tern/websocket", "tern-async/kafka", "kfake", "jetstream", "jetstream-fsync"}

// DefaultTargets are those compared without --systems.
var DefaultTargets = []string{"tern/kafka", "kfake", "jetstream", "jetstream-fsync"}

func kafka(a peer.Addrs, linger time.Duration) (perf.Driver, error) {
	cfg := kafkadriver.DefaultConfig()
	cfg.Brokers = []string{a.Kafka}
	cfg.Linger = linger
	return kafkadriver.New(cfg)
}

// lookupTarget resolves a system name; NAME@BINARY runs NAME's server
// with another tern-bench binary (an older build, say), and NAME#FILE a
// tern server with the settings of config file FILE (both may be given,
// in that order).
func lookupTarget(full string) (target, error) {
	name, config, hasConfig := strings.Cut(full, "#")
	name, self, _ := strings.Cut(name, "@")
	t, err := lookupKnown(name)
	if err != nil {
		return t, err
	}
	t.name, t.self = full, self
	if self != "" {
		t.note = fmt.Sprintf("%s: the server built into %s", full, self)
	}
	if hasConfig {
		if t.peerArgs[0] != peer.Tern {
			return t, fmt.Errorf("compare: %s: a config file (#FILE) is for tern's systems", full)
		}
		if config == "" {
			return t, fmt.Errorf("compare: %s: name a tern config file after #", full)
		}
		if config, err = filepath.Abs(config); err != nil {
			return t, fmt.Errorf("compare: %s: %w", full, err)
		}
		if _, err := configs.Load(config); err != nil {
			return t, fmt.Errorf("compare: %s: %w", full, err)
		}
		t.config = config
		t.peerArgs = append(slices.Clone(t.peerArgs), "--config", config)
	}
	return t, nil
}

func lookupKnown(name string) (target, error) {
	switch name {
	case "tern/kafka":
		return target{name: name, peerArgs: []string{peer.Tern, "--durability", "sync"}, driver: kafka,
			note: "tern/kafka: sync durability (fsync before every acknowledgement, shared by concurrent appends); franz-go kgo, acks=all, idempotent"}, nil
	case "tern-async/kafka":
		return target{name: name, peerArgs: []string{peer.Tern, "--durability", "async"}, driver: kafka,
			note: "tern-async/kafka: async durability (acknowledged after the write, before the group fsync that makes it durable and visible): not durable per message"}, nil
	case "tern/pulsar":
		return target{name: name, peerArgs: []string{peer.Tern, "--durability", "sync"},
			driver: func(a peer.Addrs, linger time.Duration) (perf.Driver, error) {
				return pulsardriver.New(pulsardriver.Config{URL: a.Pulsar, AdminURL: a.HTTP, Linger: linger})
			},
			note: "tern/pulsar: sync durability; Apache Pulsar Go client, batches of up to 1000 messages and 128 KiB (the client's defaults)"}, nil
	case "tern/websocket":
		return target{name: name, peerArgs: []string{peer.Tern, "--durability", "sync"},
			driver: func(a peer.Addrs, _ time.Duration) (perf.Driver, error) {
				return wsdriver.New(wsdriver.Config{URL: "ws" + strings.TrimPrefix(a.HTTP, "http"), AdminURL: a.HTTP})
			},
			note: "tern/websocket: sync durability; Pulsar's WebSocket API (JSON, payloads in base64, one answer per message), 1000 messages in flight per producer, every message acknowledged"}, nil
	case "kfake":
		return target{name: name, peerArgs: []string{peer.Kfake}, driver: kafka,
			note: "kfake: franz-go's in-memory Kafka (no disk at all); same kgo client and settings"}, nil
	case "jetstream", "jetstream-fsync":
		args := []string{peer.JetStream}
		note := "jetstream: NATS JetStream file storage with NATS's defaults: acknowledged before fsync, fsync every 2 minutes: not durable per message"
		if name == "jetstream-fsync" {
			args = append(args, "--fsync")
			note = "jetstream-fsync: file storage with sync_interval always (fsync every write before the acknowledgement)"
		}
		return target{name: name, peerArgs: args,
			driver: func(a peer.Addrs, _ time.Duration) (perf.Driver, error) { return jsdriver.New(a.NATS) },
			note:   note + "; nats.go PublishAsync (4000 pending), ordered consumers"}, nil
	}
	return target{}, fmt.Errorf("compare: system %q: want one of %s", name, strings.Join(Targets, ", "))
}
