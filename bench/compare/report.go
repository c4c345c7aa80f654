package compare

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/ternmq/tern/internal/perf"
)

// headline is the figure a workload is judged by: the publish side for
// produce and e2e, the consume side for consume.
func headline(r *perf.Result) *perf.Figures {
	if r.Mode == perf.ModeConsume {
		return r.Consume
	}
	return r.Publish
}

// latency is the latency a workload reports: publish latency for produce,
// end-to-end for e2e, none for consume.
func latency(r *perf.Result) *perf.Latency {
	switch r.Mode {
	case perf.ModeProduce:
		if r.Publish != nil {
			return r.Publish.Latency
		}
	case perf.ModeE2E:
		if r.Consume != nil {
			return r.Consume.Latency
		}
	}
	return nil
}

func runsOf(runs []*perf.Result, system string, m perf.Mode) []*perf.Result {
	var out []*perf.Result
	for _, r := range runs {
		if r.Label == system && r.Mode == m && headline(r) != nil {
			out = append(out, r)
		}
	}
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func collect(rs []*perf.Result, f func(*perf.Result) float64) []float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	return v
}

func medianRate(runs []*perf.Result, system string, m perf.Mode) float64 {
	return median(collect(runsOf(runs, system, m), func(r *perf.Result) float64 { return headline(r).MsgsPerSec }))
}

// WriteJSON writes the report as indented JSON.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// WriteTables writes one table per workload: medians over rounds with
// ranges, and the first system's ratio to each other system, of the
// medians and per round (rounds pair up in order, both systems having run
// in the same round).
func (rep *Report) WriteTables(w io.Writer) error {
	if len(rep.Runs) == 0 {
		_, err := fmt.Fprintln(w, "no runs")
		return err
	}
	first := rep.Runs[0]
	// A consume run's window is as long as its backlog takes to read, so
	// the measured time is a produce or e2e run's.
	measured := "until each backlog is read"
	for _, r := range rep.Runs {
		if r.Mode != perf.ModeConsume {
			measured = fmt.Sprintf("%.0fs", r.Seconds)
			break
		}
	}
	fmt.Fprintf(w, "\ntern-bench compare: %d B messages, %s, %s, %s, %s, warm-up %.0fs, measured %s\n",
		first.MessageSize, perf.Count(first.Partitions, "partition"), perf.Count(first.Producers, "producer"),
		perf.Count(max(first.Consumers, 1), "consumer"), perf.Count(rep.Rounds, "round"), first.WarmupSeconds, measured)
	fmt.Fprintf(w, "load average: start %.2f %.2f %.2f, end %.2f %.2f %.2f\n",
		rep.LoadStart[0], rep.LoadStart[1], rep.LoadStart[2], rep.LoadEnd[0], rep.LoadEnd[1], rep.LoadEnd[2])
	perf.WriteSpeed(w, rep.SpeedStart, rep.SpeedEnd)
	perf.WriteKernel(w, rep.KernelStart, rep.KernelEnd)
	base := rep.Systems[0]
	for _, m := range []perf.Mode{perf.ModeProduce, perf.ModeConsume, perf.ModeE2E} {
		if !slices.ContainsFunc(rep.Runs, func(r *perf.Result) bool { return r.Mode == m }) {
			continue
		}
		what := map[perf.Mode]string{
			perf.ModeProduce: "produce, as fast as possible (latency: send to acknowledgement, including time in the client's buffer)",
			perf.ModeConsume: "consume a backlog from the start",
			perf.ModeE2E:     "end-to-end at a fixed rate (latency: due time to consumer callback)",
		}[m]
		fmt.Fprintf(w, "\n%s\n", what)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "system\tmsgs/s\trange\tMB/s\tp50 ms\tp99 ms\tp99.9 ms\tmax ms\tRSS peak MiB\tCPU us/msg\tclient CPU\tload\tbusy %%\t%s / this\tper round\t\n", base)
		baseRuns := runsOf(rep.Runs, base, m)
		for _, s := range rep.Systems {
			rs := runsOf(rep.Runs, s, m)
			if len(rs) == 0 {
				continue
			}
			rates := collect(rs, func(r *perf.Result) float64 { return headline(r).MsgsPerSec })
			fmt.Fprintf(tw, "%s\t%.0f\t%.0f-%.0f\t%.1f\t", s, median(rates), slices.Min(rates), slices.Max(rates),
				median(collect(rs, func(r *perf.Result) float64 { return headline(r).MBPerSec })))
			if latency(rs[0]) != nil {
				for _, f := range []func(*perf.Latency) float64{
					func(l *perf.Latency) float64 { return l.P50 },
					func(l *perf.Latency) float64 { return l.P99 },
					func(l *perf.Latency) float64 { return l.P999 },
					func(l *perf.Latency) float64 { return l.Max },
				} {
					fmt.Fprintf(tw, "%.2f\t", median(collect(rs, func(r *perf.Result) float64 { return f(latency(r)) })))
				}
			} else {
				fmt.Fprint(tw, "-\t-\t-\t-\t")
			}
			rss := collect(rs, func(r *perf.Result) float64 {
				if r.Server == nil {
					return 0
				}
				return float64(r.Server.RSSPeak) / (1 << 20)
			})
			cpu := collect(rs, func(r *perf.Result) float64 {
				if r.Server == nil {
					return 0
				}
				return r.Server.CPUPerMsg
			})
			load := collect(rs, func(r *perf.Result) float64 { return (r.LoadStart[0] + r.LoadEnd[0]) / 2 })
			ccpu := collect(rs, func(r *perf.Result) float64 { return r.ClientCPUPerMsg })
			fmt.Fprintf(tw, "%.0f\t%.1f\t%.1f\t%.1f\t%s\t", slices.Max(rss), median(cpu), median(ccpu), median(load), busyCell(rs))
			if s == base || len(baseRuns) == 0 {
				fmt.Fprint(tw, "-\t-\t\n")
				continue
			}
			ratio := median(collect(baseRuns, func(r *perf.Result) float64 { return headline(r).MsgsPerSec })) / median(rates)
			var per []float64
			for i := 0; i < len(rs) && i < len(baseRuns); i++ {
				per = append(per, headline(baseRuns[i]).MsgsPerSec/headline(rs[i]).MsgsPerSec)
			}
			fmt.Fprintf(tw, "%.2fx\t%.2f-%.2f\t\n", ratio, slices.Min(per), slices.Max(per))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprint(w, timerLine(rep, m))
		fmt.Fprint(w, machineLine(rep, m))
		fmt.Fprint(w, diskReadLine(rep, m))
		fmt.Fprint(w, anonLine(rep, m))
		fmt.Fprint(w, speedLine(rep, m))
		if m == perf.ModeE2E {
			for _, s := range rep.Systems {
				if rs := runsOf(rep.Runs, s, m); len(rs) > 0 {
					fmt.Fprintf(w, "  %s e2e rate: %d msgs/s%s\n", s, rs[0].Rate, windowOpened(rs))
				}
			}
			fmt.Fprint(w, viewLines(rep.Views, m))
		}
	}
	if rep.Disk != nil {
		fmt.Fprintf(w, "\nthe disk at %s's e2e rate, no server running (tern bench disk; the floor under a durable latency)\n", rep.DiskSystem)
		if err := rep.Disk.WriteTable(w); err != nil {
			return err
		}
	}
	if rep.DiskBusy != nil {
		fmt.Fprintf(w, "\nthe same, with %s spinning on the CPU beside the probe's writer (the floor when the writer shares the cores with busy clients and servers)\n", perf.Count(rep.DiskBusy.Busy, "thread"))
		if err := rep.DiskBusy.WriteTable(w); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "\nRSS peak: the server process's highest resident set over the rounds; CPU: server CPU time per message in the window (us); client CPU: the load generator's and client library's, per message; load: mean 1-minute load average of the runs; busy %%: median share of all the machine's cores busy in the windows (user, system and interrupts; iowait, steal and idle are the rest); client timer: how late a %v timer of the load generator's fired, which a stall of the machine or the client delays and one of the server does not\n", perf.TimerPeriod)
	for _, n := range rep.Notes {
		fmt.Fprintln(w, "- "+n)
	}
	for _, s := range rep.Skipped {
		fmt.Fprintln(w, "- skipped: "+s)
	}
	return nil
}

// busyCell is the median share of the machine's cores busy in the runs'
// windows, in percent; "-" if no run says.
func busyCell(rs []*perf.Result) string {
	var busy []float64
	for _, r := range rs {
		if r.Machine != nil {
			busy = append(busy, r.Machine.Busy*100)
		}
	}
	if len(busy) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", median(busy))
}

// machineLine says, per system, how the machine's cores were spent in
// each round's window (busy/iowait/steal, percent of all cores' time):
// near 100 % busy, the clients and the server queue for a core; "" if no
// run says.
func machineLine(rep *Report, m perf.Mode) string {
	return roundsLine(rep, m, "machine busy/iowait/steal % in the window (per round)", func(r *perf.Result) (string, bool) {
		c := r.Machine
		if c == nil {
			return "", false
		}
		return fmt.Sprintf("%.0f/%.0f/%.0f", c.Busy*100, c.IOWait*100, c.Steal*100), true
	})
}

// timerLine says, per system, how late the load generator's own timer
// fired in each round's window (p99/max): where a system's latencies rose
// and the timer kept time, the stall was the server's; "" if no run says.
func timerLine(rep *Report, m perf.Mode) string {
	return roundsLine(rep, m, "client timer late (p99/max ms per round)", func(r *perf.Result) (string, bool) {
		l := r.ClientTimerLate
		if l == nil {
			return "", false
		}
		return fmt.Sprintf("%.1f/%.1f", l.P99, l.Max), true
	})
}

// anonLine says, per system, the anonymous part of the server's resident
// peak in each round (MiB): the RSS peak also counts the pages of the
// binary it maps, which vary from build to build; "" if no run says.
func anonLine(rep *Report, m perf.Mode) string {
	return roundsLine(rep, m, "server anonymous memory peak (MiB per round)", func(r *perf.Result) (string, bool) {
		if r.Server == nil || r.Server.AnonPeak <= 0 {
			return "", false
		}
		return fmt.Sprintf("%.0f", float64(r.Server.AnonPeak)/(1<<20)), true
	})
}

// diskReadLine says, per system, how much each round's server read from
// the disk in the window (MB): a consumer reading from the disk what it
// could have read from memory; "" if no run says.
func diskReadLine(rep *Report, m perf.Mode) string {
	return roundsLine(rep, m, "server disk reads in the window (MB per round)", func(r *perf.Result) (string, bool) {
		if r.Server == nil || r.Server.DiskReadBytes == nil {
			return "", false
		}
		return fmt.Sprintf("%.0f", float64(*r.Server.DiskReadBytes)/1e6), true
	})
}

// speedLine says, per system, the machine's speed before and after each
// round (perf.SpeedProbe, GB/s), marking with "!" a round whose speed at
// either end differs by 15 % or more from the speed before the first run:
// the host changed under it; "" if no run says.
func speedLine(rep *Report, m perf.Mode) string {
	return roundsLine(rep, m, "machine speed (GB/s before/after per round; ! changed since the start)", func(r *perf.Result) (string, bool) {
		if r.SpeedStart <= 0 || r.SpeedEnd <= 0 {
			return "", false
		}
		mark := ""
		_, a := perf.SpeedChanged(rep.SpeedStart, r.SpeedStart)
		_, b := perf.SpeedChanged(rep.SpeedStart, r.SpeedEnd)
		if a || b {
			mark = "!"
		}
		return fmt.Sprintf("%.0f/%.0f%s", r.SpeedStart, r.SpeedEnd, mark), true
	})
}

// roundsLine is a line of per-system, per-round figures under a mode's
// table: what says each round's figure, and whether it has one; "" if no
// run has.
func roundsLine(rep *Report, m perf.Mode, title string, what func(*perf.Result) (string, bool)) string {
	var parts []string
	for _, s := range rep.Systems {
		var rounds []string
		for _, r := range runsOf(rep.Runs, s, m) {
			if v, ok := what(r); ok {
				rounds = append(rounds, v)
			}
		}
		if len(rounds) > 0 {
			parts = append(parts, s+" "+strings.Join(rounds, ", "))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "  " + title + ": " + strings.Join(parts, "; ") + "\n"
}

// windowOpened says, for e2e runs with a warm-up, when each round's window
// opened after it: once the consumers were under 100 ms behind, or, if
// they never were, how far behind they still were.
func windowOpened(rs []*perf.Result) string {
	var rounds []string
	for _, r := range rs {
		if r.WarmupSeconds <= 0 {
			return ""
		}
		if r.BehindAtWindow > 0 {
			rounds = append(rounds, fmt.Sprintf("%.2fs (still %d messages behind)", r.CatchUpSeconds, r.BehindAtWindow))
		} else {
			rounds = append(rounds, fmt.Sprintf("%.2fs", r.CatchUpSeconds))
		}
	}
	return "; window opened " + strings.Join(rounds, ", ") + " after the warm-up, once the consumers were under 100 ms behind"
}
