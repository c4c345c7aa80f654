package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ternmq/tern/replicator"
)

// fetchReplication adds the replication section; a node without replication (404) has none.
func fetchReplication(ctx context.Context, api *apiFlags, rep *statusReport) error {
	var st replicator.Status
	if err := api.call(ctx, "GET", "/api/v1/replication", nil, &st); err != nil {
		if isStatus(err, http.StatusNotFound) {
			return nil
		}
		return err
	}
	rep.Replication = &st
	return nil
}

// printReplication renders the links and every stream with its lag, worst first so trouble
// is on top.
func printReplication(w io.Writer, st replicator.Status) {
	health := "healthy"
	if !st.Summary.Healthy {
		health = "NOT HEALTHY"
	}
	fmt.Fprintf(w, "\nreplication: %s; %d streams", health, st.Summary.Streams)
	for _, s := range []replicator.StreamState{replicator.StreamActive, replicator.StreamStalled, replicator.StreamDisconnected,
		replicator.StreamRefused, replicator.StreamConnecting, replicator.StreamWaiting, replicator.StreamOff} {
		if n := st.Summary.ByState[s]; n > 0 {
			fmt.Fprintf(w, ", %d %s", n, s)
		}
	}
	fmt.Fprintf(w, "; lag %d messages, oldest %s\n", st.Summary.TotalLagMessages, seconds(st.Summary.MaxLagSeconds))
	if st.Transport != "on" {
		fmt.Fprintf(w, "  %s\n", st.Transport)
	}
	if len(st.Links) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "LINK\tREGION\tSTATE\tSINCE\tRTT\tSTREAMS\tSENT\tRECEIVED\tLAST ERROR")
		for _, l := range st.Links {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.2fms\t%d\t%s\t%s\t%s\n", l.Peer, l.Region, l.State, ago(l.Since), l.RTTMs, l.Streams,
				bytesHuman(l.BytesSent), bytesHuman(l.BytesReceived), dash(l.LastError))
		}
		tw.Flush()
	}
	if len(st.Streams) == 0 {
		return
	}
	streams := append([]replicator.StreamStatus(nil), st.Streams...)
	rank := func(s replicator.StreamStatus) int {
		switch s.State {
		case replicator.StreamStalled, replicator.StreamRefused:
			return 0
		case replicator.StreamDisconnected:
			return 1
		}
		return 2
	}
	slices.SortStableFunc(streams, func(a, b replicator.StreamStatus) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(b.LagMessages, a.LagMessages))
	})
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPART\tTO\tSTATE\tLAG MSGS\tLAG\tLAST TRANSFER\tLAST ERROR")
	for _, s := range streams {
		part := "-"
		if s.Partition >= 0 {
			part = fmt.Sprint(s.Partition)
		}
		last := "never"
		if s.LastTransfer != nil {
			last = ago(*s.LastTransfer)
		}
		errText := dash(s.LastError)
		if len(errText) > 100 {
			errText = errText[:97] + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", strings.TrimPrefix(s.Topic, "persistent://"), part, s.Destination, s.State,
			s.LagMessages, seconds(s.LagSeconds), last, errText)
	}
	tw.Flush()
}

func seconds(s float64) string {
	if s == 0 {
		return "0s"
	}
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}

func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Round(time.Second).String() + " ago"
}

func bytesHuman(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fGiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}
