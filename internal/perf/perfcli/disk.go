package perfcli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ternmq/tern/internal/perf"
)

// DiskCommand returns the disk command: the group-commit latency the disk
// under a directory gives at a broker's write rate, in the write patterns
// that matter for a log.
func DiskCommand() *cobra.Command {
	cfg := perf.DefaultDiskConfig()
	var (
		rateMiB  int64
		segMiB   int64
		cacheMiB int64
		patterns string
		asJSON   bool
	)
	c := &cobra.Command{
		Use:   "disk",
		Short: "Time group commits (write, fdatasync) on the disk under --dir at a broker's write rate",
		Long: `Time group commits on the disk that will hold tern's data.

Appends of --record bytes arrive at --rate; one writer writes what has
arrived, fdatasyncs, and starts again, as the log does under sync
durability. Four write patterns run in turn:

  log        appends into a file written in full before (a reused file),
             its pages dropped from the page cache first
  allocated  appends into new files of --segment-size, each allocated
             whole (fallocate) one ahead, as tern's segments are
  growing    appends into a new file
  log+flush  log, plus every byte written again into new 64 MiB files,
             as an LSM's memtable flush does beside its WAL

Pages more than --cache MiB behind the writer are dropped from the page
cache after each fdatasync, as tern's storage.segment_cache does. With
--group-commit-interval, fdatasyncs start at most once per interval, as
with tern's storage.group_commit_interval: compare syncs/s and commit
latency with and without it before setting it.

With --busy N, N threads spin on the CPU beside the writer, as a client
and a server sharing the machine's cores keep them busy: the writer then
waits for a core after each fdatasync, as a node's committer does under
load. --busy as many as the machine's cores is the worst case; the table
gives the cores the spinning threads got.

Commit latency is from an append's due time to the end of its fdatasync:
the floor under a produce request's latency on this disk. The probe
writes about rate x (warm-up + duration) bytes per pattern and removes
its files afterwards.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ps, err := perf.ParseDiskPatterns(patterns)
			if err != nil {
				return UsageError{fmt.Errorf("--patterns: %w", err)}
			}
			cfg.Patterns = ps
			cfg.Rate = rateMiB << 20
			cfg.SegmentFile = segMiB << 20
			cfg.Cache = cacheMiB << 20
			if err := cfg.Validate(); err != nil {
				return UsageError{err}
			}
			out := cmd.OutOrStdout()
			cfg.Progress = out
			if asJSON {
				cfg.Progress = cmd.ErrOrStderr()
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			res, err := perf.RunDisk(ctx, cfg)
			if err != nil {
				return err
			}
			if asJSON {
				return res.WriteJSON(out)
			}
			return res.WriteTable(out)
		},
	}
	fl := c.Flags()
	fl.StringVar(&cfg.Dir, "dir", cfg.Dir, "directory on the disk to test (the probe works in a new directory inside it)")
	fl.Int64Var(&rateMiB, "rate", cfg.Rate>>20, "MiB per second appended (130 is 130,000 1 KiB messages a second)")
	fl.IntVar(&cfg.Record, "record", cfg.Record, "bytes per append (one produce request's worth)")
	fl.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "unmeasured time at the start of each pattern")
	fl.DurationVar(&cfg.Duration, "duration", cfg.Duration, "measured time of each pattern")
	fl.Int64Var(&segMiB, "segment-size", cfg.SegmentFile>>20, "MiB per file in the allocated pattern (tern's storage.segment_size)")
	fl.Int64Var(&cacheMiB, "cache", cfg.Cache>>20, "MiB of the newest appends kept in the page cache; older pages are dropped (as tern's storage.segment_cache, whose auto is a sixteenth of memory; 0 keeps every page)")
	fl.DurationVar(&cfg.Settle, "settle", cfg.Settle, "pause between patterns, and between preparing the log file and writing into it, so the machine finishes with what was removed or dropped before")
	fl.DurationVar(&cfg.GroupCommitInterval, "group-commit-interval", 0, "least time between the starts of two fdatasyncs (tern's storage.group_commit_interval; 0: each at once)")
	fl.IntVar(&cfg.Busy, "busy", 0, "threads spinning on the CPU beside the writer (a machine's cores shared with clients and a server); 0: none")
	fl.StringVar(&patterns, "patterns", "log,allocated,growing,log+flush", "patterns to run, comma separated")
	fl.BoolVar(&asJSON, "json", false, "print the result as JSON (progress lines go to stderr)")
	return c
}
