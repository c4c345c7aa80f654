package dedup

import (
	"bytes"
	"errors"
	"testing"
)

func TestReplCheck(t *testing.T) {
	s := ReplState{Epoch: 7, Next: 100, LocalBase: 40, LocalCount: 5}
	for _, tc := range []struct {
		name string
		e    ReplEntry
		want ReplVerdict
		err  error
	}{
		{"next entry", ReplEntry{Epoch: 7, Offset: 100, Count: 3}, ReplApply, nil},
		{"gap is fine", ReplEntry{Epoch: 7, Offset: 250, Count: 1}, ReplApply, nil},
		{"last applied again", ReplEntry{Epoch: 7, Offset: 95, Count: 5}, ReplDuplicate, nil},
		{"old entry", ReplEntry{Epoch: 7, Offset: 0, Count: 10}, ReplDuplicate, nil},
		{"overlap", ReplEntry{Epoch: 7, Offset: 98, Count: 5}, 0, ErrReplOverlap},
		{"newer incarnation starts over", ReplEntry{Epoch: 8, Offset: 0, Count: 1}, ReplApply, nil},
		{"older incarnation", ReplEntry{Epoch: 6, Offset: 500, Count: 1}, ReplStale, nil},
	} {
		got, err := s.Check(tc.e)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("%s: err %v, want %v", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %v %v, want %v", tc.name, got, err, tc.want)
		}
	}
	if _, err := s.Check(ReplEntry{Epoch: 7, Offset: 100, Count: 0}); err == nil {
		t.Error("an empty entry passed the check")
	}
	var zero ReplState
	if v, err := zero.Check(ReplEntry{Offset: 0, Count: 1}); v != ReplApply || err != nil {
		t.Errorf("first entry on an empty state: %v %v", v, err)
	}
}

// A sequence of entries arriving by two paths and by a resend: every origin
// entry is applied exactly once, in origin order.
func TestReplTwoPathsApplyOnce(t *testing.T) {
	origin := []ReplEntry{{1, 0, 3}, {1, 3, 1}, {1, 4, 10}, {1, 14, 2}, {1, 16, 1}}
	// Path A delivers everything; path B lags and resends; A reconnects and
	// resends from an older cursor.
	arrivals := []ReplEntry{origin[0], origin[1], origin[0], origin[2], origin[1], origin[2], origin[3], origin[2], origin[3], origin[4], origin[4]}
	var s ReplState
	var applied []ReplEntry
	local := int64(0)
	for _, e := range arrivals {
		v, err := s.Check(e)
		if err != nil {
			t.Fatal(err)
		}
		if v == ReplApply {
			applied = append(applied, e)
			s = s.Applied(e, local)
			local += e.Count
		}
	}
	if len(applied) != len(origin) {
		t.Fatalf("applied %v, want %v", applied, origin)
	}
	for i := range origin {
		if applied[i] != origin[i] {
			t.Fatalf("applied %v, want %v", applied, origin)
		}
	}
	if s.Next != 17 || s.LocalBase != 16 || s.LocalCount != 1 {
		t.Fatalf("final state %+v", s)
	}
}

func TestReplStateGolden(t *testing.T) {
	s := ReplState{Epoch: 0x0102030405060708, Next: 300, LocalBase: 17, LocalCount: 2}
	want := []byte{1,
		1, 2, 3, 4, 5, 6, 7, 8,
		0, 0, 0, 0, 0, 0, 1, 44,
		0, 0, 0, 0, 0, 0, 0, 17,
		0, 0, 0, 0, 0, 0, 0, 2}
	if got := s.Encode(); !bytes.Equal(got, want) {
		t.Fatalf("encode %v, want %v", got, want)
	}
	back, err := DecodeReplState(want)
	if err != nil || back != s {
		t.Fatalf("decode %+v %v", back, err)
	}
	for _, bad := range [][]byte{nil, {1}, append([]byte{2}, want[1:]...), append(want, 0)} {
		if _, err := DecodeReplState(bad); !errors.Is(err, ErrReplState) {
			t.Errorf("decode %v: %v", bad, err)
		}
	}
}

func FuzzDecodeReplState(f *testing.F) {
	f.Add(ReplState{}.Encode())
	f.Add(ReplState{Epoch: -1, Next: 1 << 62, LocalBase: 5, LocalCount: 1}.Encode())
	f.Add([]byte{})
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	neg := ReplState{Next: 1}.Encode()
	neg[9] = 0x80
	f.Add(neg)
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeReplState(b)
		if err != nil {
			return
		}
		if !bytes.Equal(s.Encode(), b) {
			t.Fatalf("decode/encode does not round-trip %x", b)
		}
		// Whatever decoded, a check must answer without panicking.
		_, _ = s.Check(ReplEntry{Epoch: s.Epoch, Offset: s.Next, Count: 1})
	})
}
