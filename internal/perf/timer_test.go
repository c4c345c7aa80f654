package perf

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A stall of the load generator shows in its timer's lateness: a probe
// sleep that oversleeps once by 80 ms inside the window gives a maximum of
// at least that, while the median stays near nothing, and the table says
// so.
func TestClientTimerShowsTheClientsStalls(t *testing.T) {
	var calls atomic.Int64
	timerSleep = func(d time.Duration) {
		// The 60th wake is about 300 ms in: inside the 200-600 ms window.
		if calls.Add(1) == 60 {
			d += 80 * time.Millisecond
		}
		time.Sleep(d)
	}
	defer func() { timerSleep = time.Sleep }()
	res := runLaggingMode(t, ModeProduce, 200*time.Millisecond, 400*time.Millisecond, newLagDriver(0, 0))
	l := res.ClientTimerLate
	if l == nil {
		t.Fatal("no client timer figures in the result")
	}
	if l.Max < 80 || l.P50 > 4 {
		t.Errorf("client timer late by p50 %.2f, max %.2f ms; want a max of 80 or more and a p50 under 4", l.P50, l.Max)
	}
	if l.Count < 40 || l.Count > 100 {
		t.Errorf("%d timer wakes in a 400 ms window; want about 70", l.Count)
	}
	var b strings.Builder
	if err := res.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "client timer (every 5ms) late by p50") {
		t.Errorf("the table does not give the client timer:\n%s", b.String())
	}
}
