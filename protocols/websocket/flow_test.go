package websocket

import (
	"testing"
	"time"
)

func items(slot int, from, to int64) []item {
	var out []item
	for o := from; o < to; o++ {
		out = append(out, item{key: msgKey{slot, o}, entry: from, index: int(o - from), size: int(to - from)})
	}
	return out
}

func offsets(its []item) []int64 {
	var out []int64
	for _, it := range its {
		out = append(out, it.key.off)
	}
	return out
}

func sameGrants(a, b []grant) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestFlowPush: the client never holds more than the queue size; an
// overdrawn delivery waits in the buffer; acks free slots and top up.
func TestFlowPush(t *testing.T) {
	now := time.Unix(1000, 0)
	f := newFlow(1, false, 3, 0)
	if g := f.grants(); !sameGrants(g, []grant{{0, 3}}) {
		t.Fatalf("initial grants %v", g)
	}
	// A five-message entry arrives against three permits.
	f.delivered(0, 5, items(0, 0, 5))
	if got := offsets(f.take(now)); len(got) != 3 {
		t.Fatalf("took %v", got)
	}
	if g := f.grants(); g != nil {
		t.Fatalf("grants while full %v", g)
	}
	if !f.release(msgKey{0, 1}) || f.release(msgKey{0, 1}) || f.release(msgKey{0, 99}) {
		t.Fatal("release")
	}
	if got := offsets(f.take(now)); len(got) != 1 || got[0] != 3 {
		t.Fatalf("after an ack took %v", got)
	}
	// The node owes two permits (overdraw); with one buffered message and
	// no room, nothing is granted.
	if g := f.grants(); g != nil {
		t.Fatalf("grants %v", g)
	}
	f.release(msgKey{0, 0})
	f.release(msgKey{0, 2})
	f.release(msgKey{0, 3})
	if got := offsets(f.take(now)); len(got) != 1 || got[0] != 4 {
		t.Fatalf("took %v", got)
	}
	// Held: 4. Room for two; the node's permits are at -2, so granting
	// four brings them to the two wanted.
	if g := f.grants(); !sameGrants(g, []grant{{0, 4}}) {
		t.Fatalf("grants %v", g)
	}
}

// TestFlowRedeliveredWhileHeld: a message the node delivers again while
// the client holds it keeps its one slot.
func TestFlowRedeliveredWhileHeld(t *testing.T) {
	now := time.Unix(1000, 0)
	f := newFlow(1, false, 2, 0)
	f.grants()
	f.delivered(0, 2, items(0, 0, 2))
	f.take(now)
	f.delivered(0, 1, items(0, 1, 2))
	if f.held() != 1 {
		t.Fatalf("held %d", f.held())
	}
	if got := offsets(f.take(now)); len(got) != 1 || got[0] != 1 || f.held() != 2 {
		t.Fatalf("took %v, held %d", got, f.held())
	}
	// The same message twice in the buffer is sent once.
	f.release(msgKey{0, 0})
	f.release(msgKey{0, 1})
	f.delivered(0, 1, items(0, 5, 6))
	f.delivered(0, 1, items(0, 5, 6))
	if got := offsets(f.take(now)); len(got) != 1 {
		t.Fatalf("took %v", got)
	}
}

// TestFlowAckTimeout: a message held past the ack timeout frees its slot.
func TestFlowAckTimeout(t *testing.T) {
	now := time.Unix(1000, 0)
	f := newFlow(1, false, 1, time.Second)
	f.grants()
	f.delivered(0, 2, items(0, 0, 2))
	f.take(now)
	if d := f.deadline(); !d.Equal(now.Add(time.Second)) {
		t.Fatalf("deadline %v", d)
	}
	if got := f.take(now.Add(500 * time.Millisecond)); got != nil {
		t.Fatalf("took %v before the timeout", offsets(got))
	}
	if got := offsets(f.take(now.Add(time.Second))); len(got) != 1 || got[0] != 1 {
		t.Fatalf("took %v after the timeout", got)
	}
	// An ack before the timeout leaves no stale deadline behind.
	f.release(msgKey{0, 1})
	if d := f.deadline(); !d.IsZero() {
		t.Fatalf("deadline %v with nothing held", d)
	}
}

// TestFlowPull: pull mode sends exactly the permits, whatever is acked.
func TestFlowPull(t *testing.T) {
	now := time.Unix(1000, 0)
	f := newFlow(2, true, 1000, 0)
	if g := f.grants(); g != nil {
		t.Fatalf("grants without permits %v", g)
	}
	f.permit(3)
	if g := f.grants(); !sameGrants(g, []grant{{0, 3}, {1, 3}}) {
		t.Fatalf("grants %v", g)
	}
	f.delivered(0, 3, items(0, 0, 3))
	f.delivered(1, 2, items(1, 0, 2))
	if got := f.take(now); len(got) != 3 {
		t.Fatalf("took %d", len(got))
	}
	f.release(msgKey{0, 0})
	if got := f.take(now); got != nil {
		t.Fatalf("took %d after an ack", len(got))
	}
	f.permit(1)
	if got := f.take(now); len(got) != 1 || got[0].key.slot != 1 {
		t.Fatalf("took %v", got)
	}
	// Log 0 has no permits left and an empty buffer; log 1 has one
	// message buffered and one permit outstanding: a new permit tops up
	// log 0 only.
	f.permit(1)
	if g := f.grants(); !sameGrants(g, []grant{{0, 1}}) {
		t.Fatalf("grants %v", g)
	}
}

// TestFlowReset: a replaced consumer's messages and permits are forgotten.
func TestFlowReset(t *testing.T) {
	now := time.Unix(1000, 0)
	f := newFlow(2, false, 10, 0)
	f.grants()
	f.delivered(0, 2, items(0, 0, 2))
	f.delivered(1, 2, items(1, 0, 2))
	f.take(now)
	f.delivered(0, 3, items(0, 2, 5))
	f.reset(0)
	if f.held() != 2 || len(f.ready) != 0 {
		t.Fatalf("held %d, buffered %d", f.held(), len(f.ready))
	}
	if g := f.grants(); !sameGrants(g, []grant{{0, 8}}) {
		t.Fatalf("grants %v", g)
	}
}

// TestJavaStringHash: Java's String.hashCode values, including a
// character outside the BMP (two UTF-16 units).
func TestJavaStringHash(t *testing.T) {
	for s, want := range map[string]int32{"": 0, "hello": 99162322, "Aa": 2112, "BB": 2112, "key-1": 101943363, "😀": 1772899, "polygenelubricants": -2147483648} {
		if got := int32(javaStringHash(s)); got != want {
			t.Errorf("%q: %d; want %d", s, got, want)
		}
	}
	r := newRouter(7, "SinglePartition", "JavaStringHash")
	if p := r.pick([]byte("polygenelubricants")); p != 0 {
		t.Errorf("a hash of MinInt32 masks to 0 and picks partition 0, got %d", p)
	}
	if p := r.pick([]byte("hello")); p != 99162322%7 {
		t.Errorf("hello: %d", p)
	}
	single := r.pick(nil)
	for range 10 {
		if r.pick(nil) != single {
			t.Fatal("SinglePartition moved")
		}
	}
	rr := newRouter(3, "RoundRobinPartition", "Murmur3_32Hash")
	seen := map[int]bool{}
	for range 3 {
		seen[rr.pick(nil)] = true
	}
	if len(seen) != 3 {
		t.Fatalf("round robin %v", seen)
	}
}
