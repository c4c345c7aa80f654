package perf

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Result is one run's figures. MB are 10^6 bytes; latencies are in
// milliseconds.
type Result struct {
	Label       string    `json:"system"`
	Mode        Mode      `json:"mode"`
	Topic       string    `json:"topic"`
	MessageSize int       `json:"message_size"`
	Partitions  int       `json:"partitions"`
	Producers   int       `json:"producers"`
	Consumers   int       `json:"consumers"`
	Rate        int       `json:"target_rate"` // msgs/s; 0 = as fast as possible
	Start       time.Time `json:"start"`
	// LoadStart and LoadEnd are the machine's 1, 5 and 15 minute load
	// averages when the run started and ended.
	LoadStart [3]float64 `json:"load_start"`
	LoadEnd   [3]float64 `json:"load_end"`
	// SpeedStart and SpeedEnd are the machine's speed (SpeedProbe, GB/s)
	// before the run and after it.
	SpeedStart float64 `json:"speed_start_gbps,omitempty"`
	SpeedEnd   float64 `json:"speed_end_gbps,omitempty"`
	// KernelStart and KernelEnd are what a kernel entry cost (KernelProbe,
	// ns) before the run and after it.
	KernelStart   float64 `json:"kernel_entry_start_ns,omitempty"`
	KernelEnd     float64 `json:"kernel_entry_end_ns,omitempty"`
	WarmupSeconds float64 `json:"warmup_s"`
	Seconds       float64 `json:"measured_s"`
	// CatchUpSeconds (e2e) is how long after the warm-up the window
	// waited for the consumers to be less than 100 ms behind the
	// producers; BehindAtWindow is how many messages acknowledged (or, at
	// a --rate, due) 100 ms before it opened they still lacked (0: they
	// had caught up).
	CatchUpSeconds float64 `json:"catch_up_s,omitempty"`
	BehindAtWindow int64   `json:"behind_at_window,omitempty"`

	// Publish is acknowledged publishes (latency: send to ack).
	Publish *Figures `json:"publish,omitempty"`
	// Consume is consumed messages (latency, e2e mode only: send to
	// consumer callback).
	Consume *Figures `json:"consume,omitempty"`
	// Fill is the backlog fill of consume mode.
	Fill *Figures `json:"fill,omitempty"`
	// Server is what the run cost the server process, when probed.
	Server *ServerFigures `json:"server,omitempty"`

	// ClientCPUPerMsg is the CPU time this process (the load generator and
	// the client library) used in the measured window per message, in
	// microseconds: on a machine whose cores the clients share with the
	// server, a heavier client leaves the server less.
	ClientCPUPerMsg float64 `json:"client_cpu_us_per_msg"`
	// ClientGOGC is the load generator's Go GC target during the run.
	ClientGOGC int `json:"client_gogc"`
	// ClientTimerLate is how late (ms) a timer of the load generator's,
	// set every 5 ms, fired in the window: a stall of the machine or of
	// the load generator shows in it as well as in the latencies, one of
	// the system under test only in the latencies.
	ClientTimerLate *Latency `json:"client_timer_late,omitempty"`
	// Machine is how the machine's cores were spent in the window, where
	// /proc/stat tells.
	Machine *MachineCPU `json:"machine_cpu,omitempty"`

	Errors int64 `json:"errors"`
}

// Figures are counts, rates and latencies of one side.
type Figures struct {
	Messages   int64    `json:"messages"`
	Bytes      int64    `json:"bytes"`
	Seconds    float64  `json:"seconds"`
	MsgsPerSec float64  `json:"msgs_per_s"`
	MBPerSec   float64  `json:"mb_per_s"`
	Latency    *Latency `json:"latency,omitempty"`
}

// ServerFigures is the server process's memory and CPU over the run.
type ServerFigures struct {
	// RSSPeak is the highest resident set sampled during the run, and
	// AnonPeak the highest of its anonymous part (ProcSample.Anon), where
	// the probe can tell.
	RSSPeak  int64 `json:"rss_peak_bytes"`
	AnonPeak int64 `json:"anon_peak_bytes,omitempty"`
	// CPUSeconds is the CPU time the server used in the measured window,
	// and CPUPerMsg that divided by the messages of the window (published
	// plus consumed), in microseconds.
	CPUSeconds float64 `json:"cpu_s"`
	CPUPerMsg  float64 `json:"cpu_us_per_msg"`
	// DiskReadBytes is what the server had the storage read for it in the
	// window (reads the page cache did not serve), where the probe can
	// tell (a local process's /proc/pid/io): a consumer reading from the
	// disk what it could have read from memory shows here.
	DiskReadBytes *int64 `json:"disk_read_bytes,omitempty"`
}

// startTicker prints a progress line each interval until the returned
// function is called.
func (r *run) startTicker(ctx context.Context) func() {
	r.phase.Store("start")
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(r.cfg.Interval)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case now := <-t.C:
				secs := now.Sub(last).Seconds()
				last = now
				rss := r.sampleRSS(ctx)
				if r.cfg.Progress != nil {
					r.progressLine(now, secs, rss)
				}
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}

func (r *run) progressLine(now time.Time, secs float64, rss int64) {
	var b strings.Builder
	fmt.Fprintf(&b, "%6.1fs %-7s %s", now.Sub(r.start).Seconds(), r.phase.Load(), r.cfg.Label)
	side := func(name string, rec *recorder, lat bool) {
		n, bytes, h := rec.tick()
		fmt.Fprintf(&b, " | %s %9.0f msg/s %7.1f MB/s", name, float64(n)/secs, float64(bytes)/secs/1e6)
		if lat && h.TotalCount() > 0 {
			l := latencyOf(h)
			fmt.Fprintf(&b, " p50 %.2f p99 %.2f max %.1f ms", l.P50, l.P99, l.Max)
		}
	}
	if r.cfg.Mode != ModeConsume || r.phase.Load() == "fill" {
		side("pub", r.pub, true)
	}
	if r.cfg.Mode != ModeProduce && r.phase.Load() != "fill" {
		side("con", r.con, r.cfg.Mode == ModeE2E)
	}
	if rss > 0 {
		fmt.Fprintf(&b, " | rss %d MiB", rss>>20)
	}
	b.WriteByte('\n')
	_, _ = io.WriteString(r.cfg.Progress, b.String())
}

// sampleRSS probes the server and keeps the peak; 0 without a probe.
func (r *run) sampleRSS(ctx context.Context) int64 {
	if r.cfg.Probe == nil {
		return 0
	}
	s, err := r.cfg.Probe(ctx)
	if err != nil {
		return 0
	}
	r.probe.mu.Lock()
	r.probe.rssPeak = max(r.probe.rssPeak, s.RSS)
	r.probe.anonPeak = max(r.probe.anonPeak, s.Anon)
	r.probe.mu.Unlock()
	return s.RSS
}

// sampleServer takes the CPU time at the window's start and end.
func (r *run) sampleServer(ctx context.Context, start bool) {
	if r.cfg.Probe == nil {
		return
	}
	s, err := r.cfg.Probe(ctx)
	r.probe.mu.Lock()
	defer r.probe.mu.Unlock()
	if err != nil {
		r.probe.have = false
		return
	}
	r.probe.rssPeak = max(r.probe.rssPeak, s.RSS)
	r.probe.anonPeak = max(r.probe.anonPeak, s.Anon)
	if start {
		r.probe.cpuStart, r.probe.diskStart, r.probe.have = s.CPUSeconds, s.DiskRead, true
		return
	}
	if !r.probe.have {
		return
	}
	sf := &ServerFigures{RSSPeak: r.probe.rssPeak, AnonPeak: r.probe.anonPeak, CPUSeconds: s.CPUSeconds - r.probe.cpuStart}
	if r.probe.diskStart >= 0 && s.DiskRead >= 0 {
		d := s.DiskRead - r.probe.diskStart
		sf.DiskReadBytes = &d
	}
	r.res.Server = sf
}

// finishServer completes the server figures once the counts are known.
func (res *Result) finishServer() {
	if res.Server == nil {
		return
	}
	if n := res.messages(); n > 0 {
		res.Server.CPUPerMsg = res.Server.CPUSeconds * 1e6 / float64(n)
	}
}

// messages is the messages of the window, published plus consumed.
func (res *Result) messages() int64 {
	var n int64
	for _, f := range []*Figures{res.Publish, res.Consume} {
		if f != nil {
			n += f.Messages
		}
	}
	return n
}

// WriteJSON writes the result as indented JSON.
func (res *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// Count says n of a thing in words: Count(1, "thread") is "1 thread",
// Count(2, "thread") "2 threads".
func Count(n int, one string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + one + "s"
}

// WriteTable writes the result as the final table.
func (res *Result) WriteTable(w io.Writer) error {
	rate := "max"
	if res.Rate > 0 {
		rate = fmt.Sprintf("%d msg/s", res.Rate)
	}
	fmt.Fprintf(w, "\n%s %s: %d B messages, %s, %s, %s, rate %s, warm-up %.0fs, measured %.1fs\n",
		res.Label, res.Mode, res.MessageSize, Count(res.Partitions, "partition"), Count(res.Producers, "producer"),
		Count(res.Consumers, "consumer"), rate, res.WarmupSeconds, res.Seconds)
	fmt.Fprintf(w, "load average: start %.2f %.2f %.2f, end %.2f %.2f %.2f\n",
		res.LoadStart[0], res.LoadStart[1], res.LoadStart[2], res.LoadEnd[0], res.LoadEnd[1], res.LoadEnd[2])
	WriteSpeed(w, res.SpeedStart, res.SpeedEnd)
	WriteKernel(w, res.KernelStart, res.KernelEnd)
	if res.Mode == ModeE2E && res.WarmupSeconds > 0 {
		if res.BehindAtWindow > 0 {
			fmt.Fprintf(w, "the consumers were still more than 100 ms (%d messages) behind when the window opened, %.1fs after the warm-up\n", res.BehindAtWindow, res.CatchUpSeconds)
		} else {
			fmt.Fprintf(w, "the consumers were less than 100 ms behind %.2fs after the warm-up; then the window opened\n", res.CatchUpSeconds)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tmessages\tmsgs/s\tMB/s\tp50 ms\tp95 ms\tp99 ms\tp99.9 ms\tmax ms\t")
	row := func(name string, f *Figures) {
		if f == nil {
			return
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.1f\t", name, f.Messages, f.MsgsPerSec, f.MBPerSec)
		if l := f.Latency; l != nil && l.Count > 0 {
			fmt.Fprintf(tw, "%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", l.P50, l.P95, l.P99, l.P999, l.Max)
		} else {
			fmt.Fprint(tw, "-\t-\t-\t-\t-\t\n")
		}
	}
	row("fill", res.Fill)
	row("publish", res.Publish)
	name := "consume"
	if res.Mode == ModeE2E {
		name = "end-to-end"
	}
	row(name, res.Consume)
	if err := tw.Flush(); err != nil {
		return err
	}
	if s := res.Server; s != nil {
		fmt.Fprintf(w, "server: RSS peak %.1f MiB", float64(s.RSSPeak)/(1<<20))
		if s.AnonPeak > 0 {
			fmt.Fprintf(w, " (anonymous %.1f MiB)", float64(s.AnonPeak)/(1<<20))
		}
		fmt.Fprintf(w, ", CPU %.2f s in the window (%.1f us/msg)", s.CPUSeconds, s.CPUPerMsg)
		if d := s.DiskReadBytes; d != nil {
			fmt.Fprintf(w, ", read %.1f MB from the disk", float64(*d)/1e6)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "client: CPU %.1f us/msg, GOGC %d\n", res.ClientCPUPerMsg, res.ClientGOGC)
	if m := res.Machine; m != nil {
		fmt.Fprintf(w, "machine in the window: %s\n", m)
	}
	if l := res.ClientTimerLate; l != nil {
		fmt.Fprintf(w, "client timer (every %v) late by p50 %.2f, p99 %.2f, max %.2f ms: stalls of the machine or the client show here too, the server's do not\n",
			TimerPeriod, l.P50, l.P99, l.Max)
	}
	if res.Errors > 0 {
		fmt.Fprintf(w, "errors: %d\n", res.Errors)
	}
	return nil
}

// WriteSpeed writes the machine's speed before and after a run (or runs),
// and a warning when it changed enough to make the figures doubtful.
func WriteSpeed(w io.Writer, start, end float64) {
	if start <= 0 || end <= 0 {
		return
	}
	fmt.Fprintf(w, "machine speed (CRC-32C of a cached MiB): start %.1f GB/s, end %.1f GB/s\n", start, end)
	if d, changed := SpeedChanged(start, end); changed {
		fmt.Fprintf(w, "WARNING: the machine's speed changed by %.0f %% during the run: its figures are not comparable with each other or with other runs\n", 100*d)
	}
}
