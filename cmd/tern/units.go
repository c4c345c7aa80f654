package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Sizes and durations as operators type them. -1, "unlimited", "infinite" and "none" mean no
// limit (returned as -1), as in Kafka and Pulsar configs.

func unlimited(s string) bool {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "-1", "unlimited", "infinite", "none":
		return true
	}
	return false
}

// sizeUnits are the accepted suffixes: k, m, g, t and KiB... are powers of 1024 (as in
// pulsar-admin's 4096k, 4g); KB... are powers of 1000.
var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40},
	{"b", 1},
}

// parseSize reads a byte size such as 1048576, 512KiB, 10GB, 4g, or -1 for no limit.
func parseSize(s string) (int64, error) {
	if unlimited(s) {
		return -1, nil
	}
	v := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(v, u.suffix) {
			v, mult = strings.TrimSpace(strings.TrimSuffix(v, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size: use bytes or a whole number with a unit (512KiB, 10GiB, 4g, 5MB), or -1 for no limit", s)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n * mult, nil
}

// durationUnits are the accepted units, longest first so "ms" is not read as "m".
var durationUnits = []struct {
	suffix string
	d      time.Duration
}{
	{"ms", time.Millisecond}, {"w", 7 * 24 * time.Hour}, {"d", 24 * time.Hour},
	{"h", time.Hour}, {"m", time.Minute}, {"s", time.Second},
}

// parseDuration reads a duration such as 90s, 15m, 12h, 7d, 2w or 1d12h, or -1 for no limit.
// Go's time.ParseDuration lacks days, which retention is usually counted in.
func parseDuration(s string) (time.Duration, error) {
	if unlimited(s) {
		return -1, nil
	}
	v := strings.ToLower(strings.TrimSpace(s))
	if v == "0" {
		return 0, nil
	}
	bad := fmt.Errorf("%q is not a duration: use whole numbers with units, such as 90s, 15m, 12h, 7d, 2w or 1d12h, or -1 for no limit", s)
	if v == "" {
		return 0, bad
	}
	var total time.Duration
	for v != "" {
		i := 0
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i++
		}
		if i == 0 || i > 12 {
			return 0, bad
		}
		n, _ := strconv.ParseInt(v[:i], 10, 64)
		v = v[i:]
		var unit time.Duration
		for _, u := range durationUnits {
			if strings.HasPrefix(v, u.suffix) {
				unit, v = u.d, v[len(u.suffix):]
				break
			}
		}
		if unit == 0 {
			return 0, bad
		}
		if time.Duration(n) > (math.MaxInt64-total)/unit {
			return 0, fmt.Errorf("%q is too long", s)
		}
		total += time.Duration(n) * unit
	}
	return total, nil
}

// formatDuration writes a duration in whole units, largest first: 7d, 1d12h, 1m30s, 250ms.
func formatDuration(d time.Duration) string {
	if d < 0 {
		return "unlimited"
	}
	if d == 0 {
		return "0s"
	}
	if d%time.Millisecond != 0 {
		return d.String()
	}
	var b strings.Builder
	for _, u := range []struct {
		s string
		d time.Duration
	}{{"d", 24 * time.Hour}, {"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}, {"ms", time.Millisecond}} {
		if d >= u.d {
			fmt.Fprintf(&b, "%d%s", d/u.d, u.s)
			d %= u.d
		}
	}
	return b.String()
}

// formatSize writes a byte count in binary units, exactly when it is whole: 10GiB, 1536B.
func formatSize(n int64) string {
	if n < 0 {
		return "unlimited"
	}
	for _, u := range []struct {
		s string
		m int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.m && n%u.m == 0 {
			return fmt.Sprintf("%d%s", n/u.m, u.s)
		}
	}
	if n >= 1<<10 {
		return bytesHuman(uint64(n))
	}
	return fmt.Sprintf("%dB", n)
}

// parseOnOff reads a boolean flag value the way operators write it.
func parseOnOff(flag, s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "on", "true", "yes", "enabled", "1":
		return true, nil
	case "off", "false", "no", "disabled", "0":
		return false, nil
	}
	return false, usagef("--%s %q: want on or off", flag, s)
}

// plural writes "1 message" or "3 messages".
func plural(n int64, one string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.FormatInt(n, 10) + " " + one + "s"
}
