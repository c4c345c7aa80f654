package dedup

import (
	"errors"
	"testing"
)

func TestPulsarStateRoundTrip(t *testing.T) {
	s := PulsarState{Sequence: 41, Base: 1000, Last: 1009}
	got, err := DecodePulsarState(s.Encode())
	if err != nil || got != s {
		t.Fatalf("round trip %+v -> %+v, %v", s, got, err)
	}
	golden := []byte{1, 0, 0, 0, 0, 0, 0, 0, 41, 0, 0, 0, 0, 0, 0, 3, 232, 0, 0, 0, 0, 0, 0, 3, 241}
	if string(s.Encode()) != string(golden) {
		t.Fatalf("encoding changed: %v", s.Encode())
	}
	for _, bad := range [][]byte{nil, {1}, append([]byte{2}, golden[1:]...), append(golden, 0)} {
		if _, err := DecodePulsarState(bad); !errors.Is(err, ErrCorruptState) {
			t.Errorf("decode %v: %v", bad, err)
		}
	}
}

func TestPulsarCheck(t *testing.T) {
	p := NewPulsarProducers()
	steps := []struct {
		name        string
		first, last int64
		dup         bool
		base        int64
	}{
		{"a", 0, 0, false, -1},
		{"a", 1, 9, false, -1},
		{"a", 1, 9, true, 1},  // resend of the latest entry: its offsets
		{"a", 0, 0, true, -1}, // an older one: no position
		{"b", 0, 4, false, -1},
		{"a", 10, 10, false, -1},
	}
	next := int64(0)
	for i, s := range steps {
		v := p.Check(s.name, s.first, s.last)
		if v.Duplicate != s.dup || v.Base != s.base {
			t.Fatalf("step %d: %+v, want dup=%v base=%d", i, v, s.dup, s.base)
		}
		if !v.Duplicate {
			n := s.last - s.first + 1
			p.Record(s.name, s.last, next, next+n-1)
			next += n
		}
	}
	if p.Last("a") != 10 || p.Last("b") != 4 || p.Last("c") != -1 || p.Len() != 2 {
		t.Fatalf("last a=%d b=%d c=%d len=%d", p.Last("a"), p.Last("b"), p.Last("c"), p.Len())
	}
	// Record never moves the sequence back.
	if s := p.Record("a", 3, 99, 99); s.Sequence != 10 {
		t.Fatalf("sequence went back: %+v", s)
	}
}

func TestPulsarRestore(t *testing.T) {
	p := NewPulsarProducers()
	p.Record("a", 5, 0, 5)
	prev, had := p.State("a")
	p.Record("a", 9, 6, 9)
	p.Restore("a", prev, had)
	if p.Last("a") != 5 {
		t.Fatalf("restored to %d, want 5", p.Last("a"))
	}
	_, had = p.State("b")
	p.Record("b", 1, 10, 11)
	p.Restore("b", PulsarState{}, had)
	if p.Last("b") != -1 || p.Len() != 1 {
		t.Fatalf("a new name was not forgotten: last %d, %d names", p.Last("b"), p.Len())
	}
}

func FuzzDecodePulsarState(f *testing.F) {
	f.Add(PulsarState{Sequence: 1, Base: 2, Last: 3}.Encode())
	f.Add([]byte{})
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodePulsarState(b)
		if err == nil && string(s.Encode()) != string(b) {
			t.Fatalf("decoded %+v does not encode back to the input", s)
		}
	})
}
