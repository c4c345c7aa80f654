package perf

import "testing"

func TestCountSaysOneAndMany(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{{0, "0 consumers"}, {1, "1 consumer"}, {2, "2 consumers"}, {64, "64 consumers"}} {
		if got := Count(c.n, "consumer"); got != c.want {
			t.Errorf("Count(%d, consumer) = %q, want %q", c.n, got, c.want)
		}
	}
}
