//go:build !tern_nokgo

package main

// Kafka's load generator is built in: franz-go's kgo client adds about
// 4 MiB to the binary (about 13%), which buys `tern bench` on a device
// without a second binary. Build with -tags tern_nokgo to leave it out;
// `tern bench --protocol kafka` then runs tern-bench like Pulsar does.

import (
	"github.com/ternmq/tern/internal/perf"
	"github.com/ternmq/tern/internal/perf/kafkadriver"
	"github.com/ternmq/tern/internal/perf/perfcli"
)

func init() { benchDrivers["kafka"] = kafkaBenchDriver }

func kafkaBenchDriver(f *perfcli.Flags) (perf.Driver, error) {
	return kafkadriver.New(kafkadriver.FlagsConfig(f))
}
