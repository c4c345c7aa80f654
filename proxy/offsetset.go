package proxy

import "sort"

// span is a half-open run of offsets [from, to).
type span struct{ from, to int64 }

// offsetSet is a set of offsets kept as sorted, disjoint, non-adjacent
// spans. Subscriptions use it for what a consumer holds unacknowledged and
// for what waits to be redelivered; both are runs of consecutive offsets in
// practice, so the set stays a handful of spans.
type offsetSet struct{ spans []span }

// add inserts [from, to).
func (s *offsetSet) add(from, to int64) {
	if to <= from {
		return
	}
	// First span that ends at or after from (could merge with it).
	i := sort.Search(len(s.spans), func(i int) bool { return s.spans[i].to >= from })
	j := i
	for j < len(s.spans) && s.spans[j].from <= to {
		from = min(from, s.spans[j].from)
		to = max(to, s.spans[j].to)
		j++
	}
	if i == j {
		s.spans = append(s.spans, span{})
		copy(s.spans[i+1:], s.spans[i:])
		s.spans[i] = span{from, to}
		return
	}
	s.spans[i] = span{from, to}
	s.spans = append(s.spans[:i+1], s.spans[j:]...)
}

// remove deletes [from, to).
func (s *offsetSet) remove(from, to int64) {
	if to <= from || len(s.spans) == 0 {
		return
	}
	out := s.spans[:0:0]
	for _, sp := range s.spans {
		if sp.to <= from || sp.from >= to {
			out = append(out, sp)
			continue
		}
		if sp.from < from {
			out = append(out, span{sp.from, from})
		}
		if sp.to > to {
			out = append(out, span{to, sp.to})
		}
	}
	s.spans = out
}

// removeBelow deletes every offset below to.
func (s *offsetSet) removeBelow(to int64) {
	i := 0
	for i < len(s.spans) && s.spans[i].to <= to {
		i++
	}
	s.spans = s.spans[i:]
	if len(s.spans) > 0 && s.spans[0].from < to {
		s.spans[0].from = to
	}
}

// contains reports whether off is in the set.
func (s *offsetSet) contains(off int64) bool {
	i := sort.Search(len(s.spans), func(i int) bool { return s.spans[i].to > off })
	return i < len(s.spans) && s.spans[i].from <= off
}

// intersect returns the parts of [from, to) in the set.
func (s *offsetSet) intersect(from, to int64) []span {
	var out []span
	i := sort.Search(len(s.spans), func(i int) bool { return s.spans[i].to > from })
	for ; i < len(s.spans) && s.spans[i].from < to; i++ {
		out = append(out, span{max(from, s.spans[i].from), min(to, s.spans[i].to)})
	}
	return out
}

// count is the number of offsets in the set.
func (s *offsetSet) count() int64 {
	var n int64
	for _, sp := range s.spans {
		n += sp.to - sp.from
	}
	return n
}

func (s *offsetSet) empty() bool { return len(s.spans) == 0 }

func (s *offsetSet) clear() { s.spans = nil }
