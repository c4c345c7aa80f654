package perf

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Probe samples the server process under test.
type Probe func(ctx context.Context) (ProcSample, error)

// ProcSample is a server process's resident memory and CPU time so far.
type ProcSample struct {
	RSS int64 // bytes
	// Anon is the part of RSS that is the process's own memory (RssAnon:
	// heap, stacks, and what the C allocator gave pebble), not pages of
	// files it maps, chiefly its own binary, which count as much as the
	// page cache holds of it: two builds of the same code showed 30 and 38
	// MiB of those. 0 where unknown.
	Anon       int64
	CPUSeconds float64 // user + system since the process started
	// DiskRead is the bytes the process has had the storage layer read
	// for it since it started (/proc/pid/io read_bytes: reads the page
	// cache did not serve); -1 where unknown.
	DiskRead int64
}

// PIDProbe reads a local process's RSS, CPU time and disk reads from /proc
// (Linux; disk reads need the right to read the process's io file).
func PIDProbe(pid int) Probe {
	return func(context.Context) (ProcSample, error) { return readProc(pid) }
}

// clockTicks is USER_HZ, the unit of /proc/pid/stat times; 100 on every
// Linux architecture Go supports.
const clockTicks = 100

func readProc(pid int) (ProcSample, error) {
	var s ProcSample
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		for _, f := range []struct {
			name string
			to   *int64
		}{{"VmRSS:", &s.RSS}, {"RssAnon:", &s.Anon}} {
			if v, ok := strings.CutPrefix(line, f.name); ok {
				kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				if err != nil {
					return s, fmt.Errorf("perf: /proc/%d/status %s %q: %w", pid, f.name, v, err)
				}
				*f.to = kb << 10
			}
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	// The command name (field 2) may hold spaces; fields after it are
	// counted from the closing parenthesis. utime and stime are fields 14
	// and 15.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return s, fmt.Errorf("perf: /proc/%d/stat has no command name", pid)
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return s, fmt.Errorf("perf: /proc/%d/stat has %d fields", pid, len(f)+2)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return s, fmt.Errorf("perf: /proc/%d/stat times %q %q", pid, f[11], f[12])
	}
	s.CPUSeconds = float64(ut+st) / clockTicks
	s.DiskRead = procReadBytes(pid)
	return s, nil
}

// procReadBytes is read_bytes of /proc/pid/io, or -1 where it cannot be
// read (another user's process, a kernel without task I/O accounting).
func procReadBytes(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "read_bytes:"); ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}

// MetricsProbe scrapes a Prometheus endpoint (a tern node's /metrics) for
// the standard process_resident_memory_bytes and process_cpu_seconds_total.
func MetricsProbe(url string) Probe {
	client := &http.Client{Timeout: 5 * time.Second}
	return func(ctx context.Context) (ProcSample, error) {
		var s ProcSample
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return s, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return s, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return s, fmt.Errorf("perf: %s answered HTTP %d", url, resp.StatusCode)
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(resp.Body)
		if err != nil {
			return s, fmt.Errorf("perf: %s: %w", url, err)
		}
		first := func(name string) (float64, bool) {
			f, ok := fams[name]
			if !ok || len(f.GetMetric()) == 0 {
				return 0, false
			}
			m := f.GetMetric()[0]
			if g := m.GetGauge(); g != nil {
				return g.GetValue(), true
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue(), true
			}
			return 0, false
		}
		rss, ok1 := first("process_resident_memory_bytes")
		cpu, ok2 := first("process_cpu_seconds_total")
		if !ok1 || !ok2 {
			return s, fmt.Errorf("perf: %s has no process_resident_memory_bytes or process_cpu_seconds_total", url)
		}
		return ProcSample{RSS: int64(rss), CPUSeconds: cpu, DiskRead: -1}, nil
	}
}

// SpeedProbe measures how fast this machine runs now: CRC-32C over a MiB
// the CPU's caches hold, in GB/s, the best of three tries of 20 ms. On a
// shared host the speed can change under a benchmark (a neighbour's load,
// throttling): on the machine we measure on it once fell from 30 to 20
// GB/s between two comparisons, and end-to-end latency at the same rate
// went from 7 ms to seconds for every build. Runs at different speeds are
// not comparable.
func SpeedProbe() float64 {
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	best := 0.0
	for range 3 {
		n, start := 0, time.Now()
		for time.Since(start) < 20*time.Millisecond {
			crc32.Checksum(buf, castagnoli)
			n++
		}
		best = max(best, float64(n*len(buf))/time.Since(start).Seconds()/1e9)
	}
	return best
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// KernelProbe measures what entering the kernel costs on this machine now:
// the mean time of a getppid system call, in nanoseconds, the best of three
// tries of 10 ms. SpeedProbe does not see it. A node spends much of its
// time in the kernel (socket reads and writes, segment writes, fdatasync),
// and machines differ there more than in user code: on one 2-core KVM
// guest a call took 550-600 ns, with mitigations for speculative execution
// at each kernel entry and exit, while CRC-32C ran at 17-19 GB/s against
// 30 on the machine before, and every system's figures were 3-4 times
// lower. Runs on machines whose kernel entries differ are not comparable.
func KernelProbe() float64 {
	best := 0.0
	for range 3 {
		n, start := 0, time.Now()
		for time.Since(start) < 10*time.Millisecond {
			for range 100 {
				_ = os.Getppid()
			}
			n += 100
		}
		ns := float64(time.Since(start).Nanoseconds()) / float64(n)
		if best == 0 || ns < best {
			best = ns
		}
	}
	return best
}

// WriteKernel writes the kernel probe's figures (KernelProbe, ns) taken
// before and after a run; nothing when either is missing.
func WriteKernel(w io.Writer, start, end float64) {
	if start <= 0 || end <= 0 {
		return
	}
	fmt.Fprintf(w, "kernel entry (a getppid system call): start %.0f ns, end %.0f ns\n", start, end)
}

// SpeedChanged says whether two SpeedProbe figures differ by 15 % or
// more, and by how much (a fraction of the higher).
func SpeedChanged(a, b float64) (float64, bool) {
	if a <= 0 || b <= 0 {
		return 0, false
	}
	d := 1 - min(a, b)/max(a, b)
	return d, d >= 0.15
}

// LoadAvg is the 1, 5 and 15 minute load average, or zeros where /proc is
// missing.
func LoadAvg() [3]float64 {
	var l [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l
	}
	f := strings.Fields(string(b))
	for i := 0; i < 3 && i < len(f); i++ {
		l[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return l
}
