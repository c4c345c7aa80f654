package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/ternmq/tern/internal/perf/perfcli"
)

// benchBinary is the companion binary built from the bench module. It
// carries the clients tern does not link (the Pulsar client library is
// several megabytes and pulls in dozens of packages an edge binary has no
// use for), so `tern bench --protocol pulsar` runs it.
const benchBinary = "tern-bench"

// benchDrivers are the protocols `tern bench` drives itself; the others
// run tern-bench. bench_kafka.go adds Kafka unless built with the
// tern_nokgo tag.
var benchDrivers = map[string]perfcli.Factory{}

func newBenchCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "bench",
		Short: "Load a node and report msgs/s, MB/s and latency percentiles (produce, consume, e2e); time the disk (disk)",
		Long: `Load a node in the style of kafka-producer-perf-test and pulsar-perf: a progress
line each second, then a table of msgs/s, MB/s and latency p50/p95/p99/p99.9/max
from an HDR histogram (or JSON with --json).

Kafka is driven from this binary. Pulsar runs the tern-bench binary from the
bench module (found next to tern, or on PATH, or named by $TERN_BENCH_BIN),
so the Pulsar client stays out of tern.

disk times group commits on the disk under a directory, at the same write
rate, with no node running: the floor under the latencies the others show.`,
	}
	c.AddCommand(perfcli.Commands(perfcli.Options{
		Drivers:         benchDrivers,
		Delegate:        runBenchBinary,
		Protocols:       []string{"kafka", "pulsar", "websocket"},
		DefaultAdminURL: func() string { return (&apiFlags{}).base() },
	})...)
	c.AddCommand(perfcli.DiskCommand())
	return c
}

// runBenchBinary runs tern-bench with the same bench arguments.
func runBenchBinary(ctx context.Context, protocol string, args []string) error {
	bin, err := findBenchBinary()
	if err != nil {
		return usagef("--protocol %s: %v", protocol, err)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("%s exited with status %d", bin, ee.ExitCode())
		}
		return fmt.Errorf("run %s: %w", bin, err)
	}
	return nil
}

// findBenchBinary looks in $TERN_BENCH_BIN, next to this executable, then
// on PATH.
func findBenchBinary() (string, error) {
	if p := os.Getenv("TERN_BENCH_BIN"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("TERN_BENCH_BIN=%s: %w", p, err)
		}
		return p, nil
	}
	dir := "."
	if exe, err := os.Executable(); err == nil {
		dir = filepath.Dir(exe)
		p := filepath.Join(dir, benchBinary)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	if p, err := exec.LookPath(benchBinary); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("this protocol's client is not linked into tern; it runs %s, which was not found next to tern (%s), on PATH or in $TERN_BENCH_BIN. Build it from the source tree with: (cd bench && go build -o %s ./cmd/tern-bench)",
		benchBinary, dir, filepath.Join(dir, benchBinary))
}
