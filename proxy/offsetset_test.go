package proxy

import (
	"math/rand/v2"
	"testing"
)

// TestOffsetSetAgainstMap checks the span set against a plain map under
// random adds and removes.
func TestOffsetSetAgainstMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var s offsetSet
	m := map[int64]bool{}
	for step := 0; step < 5000; step++ {
		from := int64(r.IntN(200))
		to := from + int64(r.IntN(20))
		switch r.IntN(3) {
		case 0, 1:
			s.add(from, to)
			for o := from; o < to; o++ {
				m[o] = true
			}
		case 2:
			s.remove(from, to)
			for o := from; o < to; o++ {
				delete(m, o)
			}
		}
		if step%50 == 0 {
			b := int64(r.IntN(200))
			s.removeBelow(b)
			for o := range m {
				if o < b {
					delete(m, o)
				}
			}
		}
		if s.count() != int64(len(m)) {
			t.Fatalf("step %d: count %d, want %d (%v)", step, s.count(), len(m), s.spans)
		}
		for i := 1; i < len(s.spans); i++ {
			if s.spans[i].from <= s.spans[i-1].to || s.spans[i].from >= s.spans[i].to {
				t.Fatalf("step %d: spans not normal: %v", step, s.spans)
			}
		}
		for o := int64(0); o < 230; o++ {
			if s.contains(o) != m[o] {
				t.Fatalf("step %d: contains(%d) = %v", step, o, s.contains(o))
			}
		}
		var n int64
		for _, sp := range s.intersect(50, 150) {
			n += sp.to - sp.from
		}
		var want int64
		for o := range m {
			if o >= 50 && o < 150 {
				want++
			}
		}
		if n != want {
			t.Fatalf("step %d: intersect counts %d, want %d", step, n, want)
		}
	}
}
