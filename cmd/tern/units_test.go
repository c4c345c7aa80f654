package main

import (
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		bad  bool
	}{
		{in: "0", want: 0},
		{in: "1048576", want: 1 << 20},
		{in: "512KiB", want: 512 << 10},
		{in: "10GiB", want: 10 << 30},
		{in: "10gib", want: 10 << 30},
		{in: "4g", want: 4 << 30},
		{in: "4096k", want: 4096 << 10},
		{in: "5MB", want: 5e6},
		{in: "2TB", want: 2e12},
		{in: "100B", want: 100},
		{in: " 7 MiB ", want: 7 << 20},
		{in: "-1", want: -1},
		{in: "unlimited", want: -1},
		{in: "Infinite", want: -1},
		{in: "", bad: true},
		{in: "1.5GiB", bad: true},
		{in: "-5", bad: true},
		{in: "GiB", bad: true},
		{in: "10 parsecs", bad: true},
		{in: "9999999999999TiB", bad: true},
	}
	for _, c := range cases {
		got, err := parseSize(c.in)
		switch {
		case c.bad && err == nil:
			t.Errorf("parseSize(%q) = %d, want an error", c.in, got)
		case !c.bad && (err != nil || got != c.want):
			t.Errorf("parseSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
}

func TestParseDuration(t *testing.T) {
	day := 24 * time.Hour
	cases := []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{in: "0", want: 0},
		{in: "90s", want: 90 * time.Second},
		{in: "15m", want: 15 * time.Minute},
		{in: "250ms", want: 250 * time.Millisecond},
		{in: "7d", want: 7 * day},
		{in: "2w", want: 14 * day},
		{in: "1d12h", want: 36 * time.Hour},
		{in: "1h30m15s", want: time.Hour + 30*time.Minute + 15*time.Second},
		{in: "-1", want: -1},
		{in: "none", want: -1},
		{in: "", bad: true},
		{in: "7", bad: true},
		{in: "d", bad: true},
		{in: "1.5h", bad: true},
		{in: "3 days", bad: true},
		{in: "10y", bad: true},
		{in: "999999999999w", bad: true},
	}
	for _, c := range cases {
		got, err := parseDuration(c.in)
		switch {
		case c.bad && err == nil:
			t.Errorf("parseDuration(%q) = %v, want an error", c.in, got)
		case !c.bad && (err != nil || got != c.want):
			t.Errorf("parseDuration(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

func TestFormatRoundTrip(t *testing.T) {
	for _, d := range []time.Duration{time.Second, 90 * time.Second, time.Hour, 36 * time.Hour, 7 * 24 * time.Hour, 250 * time.Millisecond} {
		s := formatDuration(d)
		back, err := parseDuration(s)
		if err != nil || back != d {
			t.Errorf("formatDuration(%v) = %q, which parses as %v, %v", d, s, back, err)
		}
	}
	for _, n := range []int64{0, 100, 1 << 10, 1 << 20, 10 << 30, 3 << 40} {
		s := formatSize(n)
		back, err := parseSize(s)
		if err != nil || back != n {
			t.Errorf("formatSize(%d) = %q, which parses as %d, %v", n, s, back, err)
		}
	}
	if got := formatSize(1536); got != "1.5KiB" {
		t.Errorf("formatSize(1536) = %q", got)
	}
}

func TestParseTarget(t *testing.T) {
	cases := []struct {
		in, want string
		bad      string
	}{
		{in: "public/default", want: "namespace public/default"},
		{in: "acme/orders", want: "namespace acme/orders"},
		{in: "orders", want: "topic persistent://public/default/orders"},
		{in: "acme/billing/invoices", want: "topic persistent://acme/billing/invoices"},
		{in: "persistent://acme/billing/invoices", want: "topic persistent://acme/billing/invoices"},
		{in: "a/b/c/d", bad: "want persistent://"},
		{in: "pub lic/default", bad: "has ' '"},
		{in: "orders-partition-2", bad: "a policy applies to a whole topic"},
		{in: "non-persistent://a/b/c", bad: "only the persistent:// domain"},
		{in: "/default", bad: "tenant name is empty"},
		{in: "", bad: "topic name is empty"},
	}
	for _, c := range cases {
		got, err := parseTarget(c.in)
		if c.bad != "" {
			if err == nil || !strings.Contains(err.Error(), c.bad) {
				t.Errorf("parseTarget(%q) = %v, %v; want an error saying %q", c.in, got, err, c.bad)
			} else if _, ok := err.(usageError); !ok {
				t.Errorf("parseTarget(%q): %v is not a usage error", c.in, err)
			}
			continue
		}
		if err != nil || got.String() != c.want {
			t.Errorf("parseTarget(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestParseStart(t *testing.T) {
	regions := []string{"eu", "us"}
	got, err := parseStart("latest", regions)
	if err != nil || got["eu"] != "latest" || got["us"] != "latest" {
		t.Fatalf("parseStart(latest) = %v, %v", got, err)
	}
	got, err = parseStart("eu=latest,us=earliest", regions)
	if err != nil || got["eu"] != "latest" || got["us"] != "earliest" {
		t.Fatalf("parseStart(pairs) = %v, %v", got, err)
	}
	for _, bad := range []string{"soon", "eu=soon", "mars=latest", "eu", "eu=latest,us"} {
		if _, err := parseStart(bad, regions); err == nil {
			t.Errorf("parseStart(%q): no error", bad)
		}
	}
}

// FuzzParseSize: any input gives a size or an error, never a panic or a negative size other
// than -1.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"0", "10GiB", "4g", "5MB", "-1", "unlimited", "", "GiB", "99999999999999999999", "9223372036854775807", "8796093022208TiB", "1kb", " 1 b "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseSize(s)
		if err == nil && n < -1 {
			t.Fatalf("parseSize(%q) = %d", s, n)
		}
	})
}

// FuzzParseDuration: any input gives a duration or an error; a duration formats and parses
// back to itself.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"0", "90s", "7d", "1d12h", "2w", "250ms", "-1", "", "1h1h1h", "999999999999w", "15250w", "1m1ms", "000000000001s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseDuration(s)
		if err != nil {
			return
		}
		if d < -1 {
			t.Fatalf("parseDuration(%q) = %v", s, d)
		}
		if d >= 0 {
			back, err := parseDuration(formatDuration(d))
			if err != nil || back != d {
				t.Fatalf("parseDuration(%q) = %v, formatted %q, parsed back %v, %v", s, d, formatDuration(d), back, err)
			}
		}
	})
}

// FuzzParseTarget: any argument is a namespace, a topic, or a usage error.
func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{"public/default", "orders", "a/b/c", "persistent://a/b/c", "a/b/c/d", "x-partition-1", "://", "/", "a//b", "persistent:///", "é/ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tg, err := parseTarget(s)
		if err != nil {
			if _, ok := err.(usageError); !ok {
				t.Fatalf("parseTarget(%q): %v is not a usage error", s, err)
			}
			return
		}
		if again, err := parseTarget(tg.String()[strings.Index(tg.String(), " ")+1:]); err != nil || again != tg {
			t.Fatalf("parseTarget(%q) = %v, which reads back as %v, %v", s, tg, again, err)
		}
	})
}
