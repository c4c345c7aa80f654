package replicator

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// EngineConfig configures the replication logic that runs above the transport: senders,
// receivers, cursors, policies and status. (Config configures the transport itself.)
type EngineConfig struct {
	// NodeName is this node's name in the mesh, as the transport and the membership layer know
	// it. Required.
	NodeName string `yaml:"-"`
	// Region is the region this node serves. Required.
	Region string `yaml:"-"`

	// StallAfter is how long a stream may have a backlog without the destination acknowledging
	// anything before it is reported stalled (state "stalled" in the status and the
	// tern_replication_stalled metric). Default 30s.
	StallAfter time.Duration `yaml:"stall_after"`
	// ReadBytes is how many bytes of entries a sender reads from its log at a time (at least one
	// entry is always read). Larger reads make catch-up cheaper per entry. Default 1 MiB.
	ReadBytes int `yaml:"read_bytes"`
	// RescanInterval is how often the engine lists local topics to start senders for new ones and
	// stop those of deleted ones; policy and membership changes act at once. Default 1s.
	RescanInterval time.Duration `yaml:"rescan_interval"`
	// RetryInitial is the first delay before a sender retries after its stream failed or was
	// refused. Default 200ms.
	RetryInitial time.Duration `yaml:"retry_initial"`
	// RetryMax caps the growing retry delay. Default 30s.
	RetryMax time.Duration `yaml:"retry_max"`
	// Logger receives the engine's logs (keys: region, topic, partition, dest, peer, err). Nil
	// means slog.Default().
	Logger *slog.Logger `yaml:"-"`
	// Now is the clock for status and policy timestamps. Nil means time.Now.
	Now func() time.Time `yaml:"-"`
}

// DefaultEngineConfig returns the defaults documented on each field; NodeName and Region are
// left empty.
func DefaultEngineConfig() EngineConfig {
	return EngineConfig{
		StallAfter:     30 * time.Second,
		ReadBytes:      1 << 20,
		RescanInterval: time.Second,
		RetryInitial:   200 * time.Millisecond,
		RetryMax:       30 * time.Second,
	}
}

// Validate reports every problem at once, each naming the field.
func (c EngineConfig) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if err := checkName("EngineConfig.NodeName", c.NodeName); err != nil {
		errs = append(errs, err)
	}
	if err := checkName("EngineConfig.Region", c.Region); err != nil {
		errs = append(errs, err)
	}
	if c.StallAfter <= 0 {
		bad("replicator: StallAfter is %v: it must be positive (30s is a good start)", c.StallAfter)
	}
	if c.ReadBytes < 4<<10 || c.ReadBytes > 64<<20 {
		bad("replicator: ReadBytes is %d: use 4 KiB to 64 MiB", c.ReadBytes)
	}
	if c.RescanInterval <= 0 {
		bad("replicator: RescanInterval is %v: it must be positive", c.RescanInterval)
	}
	if c.RetryInitial <= 0 || c.RetryMax <= 0 {
		bad("replicator: RetryInitial %v and RetryMax %v must be positive", c.RetryInitial, c.RetryMax)
	} else if c.RetryInitial > c.RetryMax {
		bad("replicator: RetryInitial %v exceeds RetryMax %v", c.RetryInitial, c.RetryMax)
	}
	return errors.Join(errs...)
}
