package perf

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"
)

// Mode is a workload.
type Mode string

const (
	// ModeProduce publishes and measures publish rate and latency.
	ModeProduce Mode = "produce"
	// ModeConsume fills a backlog, then measures how fast consumers drain it.
	ModeConsume Mode = "consume"
	// ModeE2E publishes and consumes at once and measures end-to-end
	// latency (publish call to consumer callback) beside the publish figures.
	ModeE2E Mode = "e2e"
)

// minMessageSize leaves room for the send time each payload starts with.
const minMessageSize = 8

// Config is one workload run.
type Config struct {
	// Mode is the workload. Required.
	Mode Mode
	// Topic is the topic to use. Default: a fresh name per run
	// ("bench-" and the start time), so runs never read each other's data.
	Topic string
	// MessageSize is the payload size in bytes, at least 8. Default 1024.
	MessageSize int
	// Partitions is the topic's partition count. Default 1.
	Partitions int
	// Producers is the number of producer clients. Default 1.
	Producers int
	// Consumers is the number of consumer clients (consume and e2e
	// modes); the partitions are split among them. Default 1.
	Consumers int
	// Rate is the target publish rate in messages per second over all
	// producers; 0 publishes as fast as the system takes. Default 0.
	Rate int
	// Duration is the measured window. Default 10s.
	Duration time.Duration
	// Warmup runs before the measured window and is not counted.
	// Default 2s. A consume run's warm-up also ends once a fifth of the
	// backlog is read.
	Warmup time.Duration
	// Backlog is the number of messages produced before consumers start
	// in consume mode. Default 1,000,000.
	Backlog int64
	// DrainTimeout bounds the wait for in-flight messages after the
	// window (publish acknowledgements, and in e2e mode the consumers
	// catching up), and a consume run's fill for its next
	// acknowledgement. Default 30s.
	DrainTimeout time.Duration
	// Interval is the progress line period. Default 1s.
	Interval time.Duration
	// Progress receives one line per Interval; nil prints nothing.
	Progress io.Writer
	// Probe, if set, samples the server process each Interval (RSS and
	// CPU time), so the result reports what the run cost the server.
	Probe Probe
	// Label names the system under test in lines and results, such as
	// "tern/kafka". Default: the driver's name.
	Label string
	// ClientGOGC is the Go GC target of the load generator's process for
	// the run (what GOGC sets); 0 leaves the process's own setting.
	// Default 400: at Go's 100 the clients' heap is a few MiB, the
	// collector runs about 30 times a second at 65k msgs/s, and its
	// pauses of the client showed up as tens of milliseconds of p99 that
	// the server never saw.
	ClientGOGC int
}

// DefaultConfig is the workload `tern bench` runs without flags: 1 KiB
// messages, one partition, one producer and one consumer, as fast as
// possible, 2 s warm-up then 10 s measured.
func DefaultConfig() Config {
	return Config{
		Mode:         ModeProduce,
		MessageSize:  1024,
		Partitions:   1,
		Producers:    1,
		Consumers:    1,
		Duration:     10 * time.Second,
		Warmup:       2 * time.Second,
		Backlog:      1_000_000,
		DrainTimeout: 30 * time.Second,
		Interval:     time.Second,
		ClientGOGC:   400,
	}
}

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	bad := func(flag, format string, args ...any) {
		errs = append(errs, fmt.Errorf("perf: --%s %s", flag, fmt.Sprintf(format, args...)))
	}
	switch c.Mode {
	case ModeProduce, ModeConsume, ModeE2E:
	default:
		bad("mode", "%q: want produce, consume or e2e", c.Mode)
	}
	if c.MessageSize < minMessageSize {
		bad("size", "%d: want at least %d bytes (each payload starts with its send time)", c.MessageSize, minMessageSize)
	}
	if c.Partitions < 1 {
		bad("partitions", "%d: want at least 1", c.Partitions)
	}
	if c.Producers < 1 {
		bad("producers", "%d: want at least 1", c.Producers)
	}
	if c.Mode != ModeProduce && c.Consumers < 1 {
		bad("consumers", "%d: want at least 1", c.Consumers)
	}
	if c.Rate < 0 {
		bad("rate", "%d: want 0 (as fast as possible) or a positive rate", c.Rate)
	}
	if c.Duration <= 0 {
		bad("duration", "%v: want a positive duration such as 10s", c.Duration)
	}
	if c.Warmup < 0 {
		bad("warmup", "%v: want 0 or a positive duration", c.Warmup)
	}
	if c.Mode == ModeConsume && c.Backlog < 1 {
		bad("backlog", "%d: want at least 1 message to consume", c.Backlog)
	}
	if c.DrainTimeout <= 0 {
		bad("drain-timeout", "%v: want a positive duration", c.DrainTimeout)
	}
	if c.Interval <= 0 {
		bad("interval", "%v: want a positive duration", c.Interval)
	}
	if c.ClientGOGC < 0 {
		bad("client-gogc", "%d: want a percentage above 0, or 0 to keep the process's GOGC", c.ClientGOGC)
	}
	return errors.Join(errs...)
}

// RegisterFlags binds the workload flags that every bench command shares,
// with c's current values as defaults.
func (c *Config) RegisterFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Topic, "topic", c.Topic, "topic to use (default: a fresh topic per run)")
	fs.IntVar(&c.MessageSize, "size", c.MessageSize, "message payload size in bytes")
	fs.IntVar(&c.Partitions, "partitions", c.Partitions, "partitions of the topic")
	fs.IntVar(&c.Producers, "producers", c.Producers, "producer clients")
	fs.IntVar(&c.Consumers, "consumers", c.Consumers, "consumer clients (consume and e2e); partitions are split among them")
	fs.IntVar(&c.Rate, "rate", c.Rate, "target publish rate in msgs/s over all producers; 0 = as fast as possible")
	fs.DurationVar(&c.Duration, "duration", c.Duration, "measured time")
	fs.DurationVar(&c.Warmup, "warmup", c.Warmup, "time run before measuring, not counted (consume: at most a fifth of the backlog)")
	fs.Int64Var(&c.Backlog, "backlog", c.Backlog, "consume: messages produced before the consumers start")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", c.DrainTimeout, "how long to wait for in-flight messages after the measured window, and for the next acknowledgement while filling a consume run's backlog")
	fs.DurationVar(&c.Interval, "interval", c.Interval, "progress line period")
	fs.IntVar(&c.ClientGOGC, "client-gogc", c.ClientGOGC, "Go GC target (GOGC) of this load generator during the run; 0 keeps $GOGC")
}

func (c *Config) fill() {
	d := DefaultConfig()
	if c.Topic == "" {
		c.Topic = fmt.Sprintf("bench-%d", time.Now().UnixNano())
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = d.DrainTimeout
	}
	if c.Interval == 0 {
		c.Interval = d.Interval
	}
	if c.Mode == ModeProduce {
		c.Consumers = 0
	}
}
