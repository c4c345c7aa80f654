package configs

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Duration is a time.Duration written as "100ms", "7d" or "168h" in YAML.
type Duration time.Duration

// UnmarshalYAML accepts Go duration strings plus a "d" (day) suffix.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration in Go's notation.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// ParseDuration parses "1h30m", "100ms", "7d" and "0".
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if strings.HasSuffix(s, "d") {
		n, err := strconv.ParseFloat(strings.TrimSuffix(s, "d"), 64)
		if err != nil {
			return 0, fmt.Errorf("duration %q: want a number of days like 7d, or a duration like 90m", s)
		}
		return time.Duration(n * float64(24*time.Hour)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("duration %q: want a duration like 100ms, 30s, 90m, 168h or 7d", s)
	}
	return d, nil
}

// Bytes is a size written as 1048576, "64MiB", "1GB" or "-1" in YAML.
type Bytes int64

var byteUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
}

// ParseBytes parses a size with an optional unit.
func ParseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	for _, u := range byteUnits {
		if strings.HasSuffix(s, u.suffix) {
			n, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), 64)
			if err != nil {
				break
			}
			return int64(n * float64(u.mult)), nil
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: want a number of bytes or a size like 64MiB or 1GB", s)
	}
	return n, nil
}

// UnmarshalYAML accepts a number or a string with a unit.
func (b *Bytes) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseBytes(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*b = Bytes(v)
	return nil
}

// String writes the size with the largest exact binary unit.
func (b Bytes) String() string {
	v := int64(b)
	for i := 3; i >= 0; i-- {
		u := byteUnits[i]
		if v != 0 && v%u.mult == 0 {
			return strconv.FormatInt(v/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(v, 10)
}

// MarshalYAML writes the size in the notation String uses.
func (b Bytes) MarshalYAML() (any, error) { return b.String(), nil }

// BytesOrAuto is a size that may instead be "auto": the node works the
// size out from the machine it runs on when it starts.
type BytesOrAuto struct {
	Bytes
	Auto bool
}

// UnmarshalYAML accepts "auto" or what Bytes accepts.
func (b *BytesOrAuto) UnmarshalYAML(n *yaml.Node) error {
	if strings.TrimSpace(n.Value) == "auto" {
		*b = BytesOrAuto{Auto: true}
		return nil
	}
	b.Auto = false
	return b.Bytes.UnmarshalYAML(n)
}

// String is "auto" or the size as Bytes writes it.
func (b BytesOrAuto) String() string {
	if b.Auto {
		return "auto"
	}
	return b.Bytes.String()
}

// MarshalYAML writes "auto" or the size.
func (b BytesOrAuto) MarshalYAML() (any, error) { return b.String(), nil }
