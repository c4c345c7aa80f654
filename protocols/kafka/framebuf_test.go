package kafka

import (
	"runtime"
	"testing"
	"time"
)

// TestFramePoolReusesAndBounds: a buffer handed back serves the next frame
// that fits it, the smallest that fits first; the bytes kept idle stay
// within the pool's bound, the oldest going first, and a buffer larger
// than the bound is unmapped at once; buffers idle for the pool's age are
// unmapped.
func TestFramePoolReusesAndBounds(t *testing.T) {
	p := &framePool{maxIdle: 4<<20 + frameMin, age: 200 * time.Millisecond}
	check := func(wantMaps, wantIdle int) {
		t.Helper()
		maps, idle := p.stats()
		if runtime.GOOS != "linux" {
			maps = wantMaps // nothing is mapped
		}
		if maps != wantMaps || idle != wantIdle {
			t.Fatalf("%d buffers mapped, %d bytes idle; want %d and %d", maps, idle, wantMaps, wantIdle)
		}
	}
	a := p.get(100)
	if len(a.b) != frameMin {
		t.Fatalf("a 100-byte frame got %d bytes; want %d", len(a.b), frameMin)
	}
	b := p.get(3<<20 + 1)
	if len(b.b) != 4<<20 {
		t.Fatalf("a frame of 3 MiB and a byte got %d bytes; want the next power of two, 4 MiB", len(b.b))
	}
	if runtime.GOOS == "linux" && (!a.mapped || !b.mapped) {
		t.Fatal("buffers on the Go heap; want them mapped outside it")
	}
	for i := range b.b { // every byte is writable and reads back
		b.b[i] = byte(i)
	}
	for i := range b.b {
		if b.b[i] != byte(i) {
			t.Fatalf("byte %d reads %d", i, b.b[i])
		}
	}
	p.put(a)
	p.put(b)
	check(2, 4<<20+frameMin)

	c, d := p.get(1000), p.get(1000)
	if &c.b[0] != &a.b[0] || &d.b[0] != &b.b[0] {
		t.Fatal("two small frames did not get the idle buffers, the smaller first")
	}
	p.put(c)
	p.put(d)
	check(2, 4<<20+frameMin)

	x, y := p.get(3<<20), p.get(3<<20) // b, and a new one
	if &x.b[0] != &b.b[0] || len(y.b) != 4<<20 {
		t.Fatal("two 3 MiB frames did not get the idle 4 MiB buffer and a new one")
	}
	check(3, frameMin)
	p.put(x) // a and x (b) idle: the bound
	p.put(y) // the oldest, a then b, make room
	check(1, 4<<20)

	big := p.get(8 << 20)
	check(2, 4<<20)
	p.put(big) // larger than the bound: unmapped at once
	check(1, 4<<20)

	deadline := time.Now().Add(5 * time.Second)
	for {
		maps, idle := p.stats()
		if idle == 0 && maps == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d buffers mapped and %d bytes idle 5 s after the last use; want none past the 200 ms age", maps, idle)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
