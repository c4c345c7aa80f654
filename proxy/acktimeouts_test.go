package proxy

import (
	"slices"
	"testing"
	"time"
)

// TestForgetDeadlines: handing back [from, to) takes exactly those offsets
// out of the deadlines, splitting one that covers more, and keeps the rest
// in their order.
func TestForgetDeadlines(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	start := []ackDeadline{{0, 10, at(0)}, {10, 12, at(1)}, {12, 20, at(2)}}
	for _, tc := range []struct {
		name     string
		from, to int64
		want     []ackDeadline
	}{
		{"none overlaps", 20, 30, start},
		{"a whole delivery", 10, 12, []ackDeadline{{0, 10, at(0)}, {12, 20, at(2)}}},
		{"the middle of one", 3, 5, []ackDeadline{{0, 3, at(0)}, {5, 10, at(0)}, {10, 12, at(1)}, {12, 20, at(2)}}},
		{"across two", 8, 15, []ackDeadline{{0, 8, at(0)}, {15, 20, at(2)}}},
		{"all", 0, 20, []ackDeadline{}},
	} {
		c := &consumer{timeouts: slices.Clone(start)}
		c.forgetDeadlines(tc.from, tc.to)
		if !slices.Equal(c.timeouts, tc.want) {
			t.Errorf("%s: [%d, %d) left %v, want %v", tc.name, tc.from, tc.to, c.timeouts, tc.want)
		}
	}
	// A split, then a later deadline over the same offsets.
	c := &consumer{timeouts: []ackDeadline{{0, 10, at(0)}, {2, 4, at(1)}, {20, 30, at(2)}}}
	c.forgetDeadlines(3, 5)
	want := []ackDeadline{{0, 3, at(0)}, {5, 10, at(0)}, {2, 3, at(1)}, {20, 30, at(2)}}
	if !slices.Equal(c.timeouts, want) {
		t.Errorf("split and overlap: left %v, want %v", c.timeouts, want)
	}
}
