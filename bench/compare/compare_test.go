package compare

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ternmq/tern/bench/peer"
	"github.com/ternmq/tern/internal/perf"
)

// TestMain lets this test binary serve as the peer processes the runner
// starts (it runs `SELF peer KIND ...`), so the test needs no second build.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "peer" {
		if err := peer.Command(os.Args[2:], os.Stdin, os.Stdout, os.Stderr); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestCompareTiny compares tern, kfake and JetStream in a tiny run of
// every workload and checks the tables and the ratios are printed.
func TestCompareTiny(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Systems = []string{"tern/kafka", "kfake", "jetstream"}
	cfg.Rounds = 1
	cfg.Self = os.Args[0]
	cfg.Dir = t.TempDir()
	cfg.Workload.Warmup = 0
	cfg.Workload.Duration = 500 * time.Millisecond
	cfg.Workload.Backlog = 2000
	cfg.Workload.MessageSize = 256
	var progress bytes.Buffer
	cfg.Progress = &progress
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	if got, want := len(rep.Runs), 3*3; got != want {
		t.Fatalf("%d runs, want %d", got, want)
	}
	for _, r := range rep.Runs {
		if f := headline(r); f == nil || f.Messages == 0 {
			t.Errorf("%s %s: no messages", r.Label, r.Mode)
		}
		if r.Server == nil || r.Server.RSSPeak <= 0 {
			t.Errorf("%s %s: no server RSS", r.Label, r.Mode)
		}
		if r.Mode == perf.ModeE2E && r.Rate <= 0 {
			t.Errorf("%s e2e ran at rate %d; want half its produce rate", r.Label, r.Rate)
		}
	}
	var out bytes.Buffer
	if err := rep.WriteTables(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"produce, as fast as possible", "consume a backlog", "end-to-end at a fixed rate", "tern/kafka / this", "kfake", "jetstream", "load average"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("tables lack %q:\n%s", want, out.String())
		}
	}
}

func TestValidate(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Systems = []string{"redpanda"}
	cfg.Modes = []perf.Mode{perf.ModeE2E}
	cfg.Rounds = 0
	err := cfg.Validate()
	for _, want := range []string{`"redpanda"`, "needs the produce workload", "--rounds"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %s", err, want)
		}
	}
}
