package perf

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// MachineCPU is how the machine's cores were spent in a measured window,
// by every process and the kernel, from /proc/stat. Each figure is a
// fraction of all the cores' time: at Busy near 1 the load generator and
// the server wait for a core, so their latencies show the machine's
// queue as well as their own work.
type MachineCPU struct {
	Cores int `json:"cores"`
	// Busy is User plus System plus Interrupts.
	Busy       float64 `json:"busy"`
	User       float64 `json:"user"`   // user and nice
	System     float64 `json:"system"` // the kernel on behalf of processes
	Interrupts float64 `json:"interrupts"`
	// IOWait is idle time with a disk request outstanding; Steal is time
	// the hypervisor gave the machine's virtual cores to others.
	IOWait float64 `json:"iowait"`
	Steal  float64 `json:"steal"`
	Idle   float64 `json:"idle"`
}

// cpuTicks are /proc/stat's aggregate cpu line, in clock ticks.
type cpuTicks struct {
	user, nice, system, idle, iowait, irq, softirq, steal uint64
	cores                                                 int
}

// readCPUTicks reads /proc/stat; false where it is missing or not as
// Linux writes it.
func readCPUTicks() (cpuTicks, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTicks{}, false
	}
	return parseCPUTicks(bytes.NewReader(b))
}

// parseCPUTicks reads the "cpu" line's first eight counters and counts
// the "cpuN" lines.
func parseCPUTicks(r io.Reader) (cpuTicks, bool) {
	var t cpuTicks
	found := false
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || !strings.HasPrefix(f[0], "cpu") {
			continue
		}
		if f[0] != "cpu" {
			t.cores++
			continue
		}
		if len(f) < 9 {
			return cpuTicks{}, false
		}
		var v [8]uint64
		for i := range v {
			n, err := strconv.ParseUint(f[i+1], 10, 64)
			if err != nil {
				return cpuTicks{}, false
			}
			v[i] = n
		}
		t.user, t.nice, t.system, t.idle, t.iowait, t.irq, t.softirq, t.steal = v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]
		found = true
	}
	return t, found && t.cores > 0
}

// minMachineTicks is the fewest clock ticks (10 ms of one core each, as
// Linux counts them) a window's shares are given for: the kernel charges
// each tick whole to what its core was doing when it came, so fewer say
// little.
const minMachineTicks = 50

// machineSince is the share of each use of the cores from a to b; nil
// if fewer than minMachineTicks passed between them or a counter went
// back.
func machineSince(a, b cpuTicks) *MachineCPU {
	d := func(x, y uint64) (float64, bool) { return float64(y - x), y >= x }
	user, ok1 := d(a.user+a.nice, b.user+b.nice)
	sys, ok2 := d(a.system, b.system)
	irq, ok3 := d(a.irq+a.softirq, b.irq+b.softirq)
	iow, ok4 := d(a.iowait, b.iowait)
	steal, ok5 := d(a.steal, b.steal)
	idle, ok6 := d(a.idle, b.idle)
	total := user + sys + irq + iow + steal + idle
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || total < minMachineTicks {
		return nil
	}
	m := &MachineCPU{
		Cores: b.cores, User: user / total, System: sys / total, Interrupts: irq / total,
		IOWait: iow / total, Steal: steal / total, Idle: idle / total,
	}
	m.Busy = m.User + m.System + m.Interrupts
	return m
}

// String says it in a line's words, in percent.
func (m *MachineCPU) String() string {
	pc := func(f float64) string { return strconv.FormatFloat(f*100, 'f', 0, 64) }
	return fmt.Sprintf("%s %% of %s busy (user %s, system %s, interrupts %s), iowait %s %%, steal %s %%, idle %s %%",
		pc(m.Busy), Count(m.Cores, "core"), pc(m.User), pc(m.System), pc(m.Interrupts), pc(m.IOWait), pc(m.Steal), pc(m.Idle))
}
