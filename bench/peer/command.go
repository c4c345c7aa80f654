package peer

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"
)

// Command is `tern-bench peer KIND [flags]`: it starts the system, prints
// its addresses as one JSON line on stdout, and serves until stdin reaches
// EOF (the runner closed it, or died) or SIGINT/SIGTERM arrives; then it
// stops the system cleanly. args start with the kind.
func Command(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("peer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	var cpuProfile, memProfile string
	fs.StringVar(&cfg.Dir, "dir", "", "data directory")
	fs.StringVar(&cfg.Durability, "durability", "", "tern: sync (default) or async")
	fs.StringVar(&cfg.ConfigFile, "config", "", "tern: a config file whose settings replace tern's defaults")
	fs.Int64Var(&cfg.MemtableSize, "memtable-size", 0, "tern: pebble memtable size in bytes (0: tern's default)")
	fs.Int64Var(&cfg.CacheSize, "cache-size", 0, "tern: pebble block cache size in bytes (0: tern's default)")
	fs.BoolVar(&cfg.Fsync, "fsync", false, "jetstream: fsync every write (sync_interval: always)")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	fs.StringVar(&memProfile, "memprofile", "", "write an allocation profile to this file before stopping")
	if len(args) == 0 {
		return fmt.Errorf("peer: name a kind: %s, %s or %s", Tern, Kfake, JetStream)
	}
	cfg.Kind = args[0]
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		}()
	}
	r, err := Start(cfg)
	if err != nil {
		return err
	}
	line, _ := json.Marshal(r.Addrs)
	if _, err := fmt.Fprintln(stdout, string(line)); err != nil {
		_ = r.Close(context.Background())
		return err
	}
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, bufio.NewReader(stdin))
		close(eof)
	}()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	select {
	case <-eof:
	case <-sigs:
	}
	if memProfile != "" {
		if err := writeAllocs(memProfile); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return r.Close(ctx)
}

func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("allocs").WriteTo(f, 0)
}
