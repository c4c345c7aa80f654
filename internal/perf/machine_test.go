package perf

import (
	"math"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const statBefore = `cpu  1000 10 500 8000 200 30 20 40 0 0
cpu0 500 5 250 4000 100 15 10 20 0 0
cpu1 500 5 250 4000 100 15 10 20 0 0
intr 123456 0 0
ctxt 987654
`

const statAfter = `cpu  1300 20 700 8300 300 40 30 140 0 0
cpu0 650 10 350 4150 150 20 15 70 0 0
cpu1 650 10 350 4150 150 20 15 70 0 0
intr 223456 0 0
`

// TestMachineCPUShares: the window's ticks split as /proc/stat counts
// them, in shares that add up to the whole.
func TestMachineCPUShares(t *testing.T) {
	a, ok := parseCPUTicks(strings.NewReader(statBefore))
	if !ok {
		t.Fatal("the first sample did not parse")
	}
	b, ok := parseCPUTicks(strings.NewReader(statAfter))
	if !ok {
		t.Fatal("the second sample did not parse")
	}
	m := machineSince(a, b)
	if m == nil {
		t.Fatal("no figures for a window of 1000 ticks")
	}
	// Deltas: user+nice 310, system 200, irq+softirq 20, iowait 100,
	// steal 100, idle 300: 1030 ticks.
	want := MachineCPU{Cores: 2, User: 310.0 / 1030, System: 200.0 / 1030, Interrupts: 20.0 / 1030,
		IOWait: 100.0 / 1030, Steal: 100.0 / 1030, Idle: 300.0 / 1030}
	want.Busy = want.User + want.System + want.Interrupts
	if *m != want {
		t.Errorf("got %+v\nwant %+v", *m, want)
	}
	if got := m.String(); got != "51 % of 2 cores busy (user 30, system 19, interrupts 2), iowait 10 %, steal 10 %, idle 29 %" {
		t.Errorf("String() = %q", got)
	}
	if machineSince(a, a) != nil {
		t.Error("figures for a window of no ticks")
	}
	short := a
	short.user += 25
	short.idle += 24
	if m := machineSince(a, short); m != nil {
		t.Errorf("figures for a window of 49 ticks: %+v", m)
	}
	short.idle++
	if m := machineSince(a, short); m == nil || m.Busy != 0.5 {
		t.Errorf("a window of 50 ticks, half of them busy: %+v", m)
	}
	if machineSince(b, a) != nil {
		t.Error("figures from counters that went back")
	}
}

func TestParseCPUTicksRefusesOtherText(t *testing.T) {
	for name, text := range map[string]string{
		"empty":       "",
		"short line":  "cpu 1 2 3\ncpu0 1 2 3\n",
		"not numbers": "cpu a b c d e f g h\ncpu0 1 1 1 1 1 1 1 1\n",
		"no cores":    "cpu 1 2 3 4 5 6 7 8\n",
	} {
		if _, ok := parseCPUTicks(strings.NewReader(text)); ok {
			t.Errorf("%s: parsed", name)
		}
	}
}

// TestMachineCPUOfThisMachine reads the real /proc/stat around a
// spinning goroutine: some of the cores' time was busy, and the shares
// add up.
func TestMachineCPUOfThisMachine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/stat is Linux's")
	}
	a, ok := readCPUTicks()
	if !ok {
		t.Fatal("/proc/stat did not parse")
	}
	var stop atomic.Bool
	go spin(&stop)
	defer stop.Store(true)
	var m *MachineCPU
	for range 100 { // a clock tick is 10 ms: wait for a few dozen
		time.Sleep(20 * time.Millisecond)
		b, _ := readCPUTicks()
		if m = machineSince(a, b); m != nil && b.user+b.system-a.user-a.system >= 20 {
			break
		}
	}
	if m == nil || m.Busy <= 0 || m.Busy > 1 {
		t.Fatalf("machine figures %+v: want a busy share in (0, 1]", m)
	}
	// /proc/stat lists every online core; this process may be allowed
	// fewer.
	if m.Cores < runtime.NumCPU() {
		t.Errorf("%d cores counted, the Go runtime may use %d", m.Cores, runtime.NumCPU())
	}
	if sum := m.Busy + m.IOWait + m.Steal + m.Idle; math.Abs(sum-1) > 1e-9 {
		t.Errorf("shares add up to %v", sum)
	}
}
