package perf

import (
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	if err := ok.Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	for _, tc := range []struct {
		name  string
		tweak func(*Config)
		want  []string
	}{
		{"mode", func(c *Config) { c.Mode = "soak" }, []string{"--mode"}},
		{"tiny message", func(c *Config) { c.MessageSize = 4 }, []string{"--size 4"}},
		{"several", func(c *Config) { c.Partitions, c.Producers, c.Rate = 0, 0, -1 }, []string{"--partitions", "--producers", "--rate"}},
		{"consume backlog", func(c *Config) { c.Mode, c.Backlog = ModeConsume, 0 }, []string{"--backlog"}},
		{"e2e consumers", func(c *Config) { c.Mode, c.Consumers = ModeE2E, 0 }, []string{"--consumers"}},
		{"times", func(c *Config) { c.Duration, c.Warmup, c.Interval = 0, -1, 0 }, []string{"--duration", "--warmup", "--interval"}},
		{"client gc", func(c *Config) { c.ClientGOGC = -5 }, []string{"--client-gogc -5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.tweak(&c)
			err := c.Validate()
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
		})
	}
	// A produce run needs no consumers.
	c := DefaultConfig()
	c.Consumers = 0
	if err := c.Validate(); err != nil {
		t.Errorf("produce with 0 consumers: %v", err)
	}
}
