package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/ternmq/tern/replicator"
)

// policyStatus is what `tern policy status --json` prints: the node's replication status cut
// down to a target and rolled up per destination region.
type policyStatus struct {
	Target  string                     `json:"target"`
	Node    string                     `json:"node"`
	Region  string                     `json:"region"`
	Healthy bool                       `json:"healthy"`
	Regions []regionStatus             `json:"regions"`
	Streams []replicator.StreamStatus  `json:"streams"`
	Inbound []replicator.InboundStatus `json:"inbound"`
}

// regionStatus is one destination region rolled up.
type regionStatus struct {
	Region string `json:"region"`
	// Link is the state of the links to the region's nodes: up if any is up.
	Link        string  `json:"link"`
	LinkError   string  `json:"link_error,omitempty"`
	Streams     int     `json:"streams"`
	Active      int     `json:"active"`
	Stalled     int     `json:"stalled"`
	Other       int     `json:"other"`
	LagMessages int64   `json:"lag_messages"`
	LagSeconds  float64 `json:"lag_seconds"`
	Healthy     bool    `json:"healthy"`
}

func newPolicyStatusCmd() *cobra.Command {
	var api apiFlags
	var check bool
	c := &cobra.Command{
		Use:   "status [TARGET]",
		Short: "Show replication per region: link state, lag in messages and seconds, stalled streams",
		Long: `Show how replication of a namespace or topic (or of everything) is doing, as
the node at --url sees it: per destination region the link state, the lag in
messages and in seconds (age of the oldest message not yet acknowledged) and
the streams that are stalled; then every stream, and what this node receives.
With --check the exit status is 1 when something is stalled, refused, or has a
backlog waiting for a link that is down.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var t *target
			if len(args) == 1 {
				tt, err := parseTarget(args[0])
				if err != nil {
					return err
				}
				t = &tt
			}
			var st replicator.Status
			if err := api.call(cmd.Context(), "GET", "/api/v1/replication", nil, &st); err != nil {
				return err
			}
			ps := rollUp(st, t)
			if api.asJSON {
				if err := printJSON(cmd.OutOrStdout(), ps); err != nil {
					return err
				}
			} else {
				printPolicyStatus(cmd.OutOrStdout(), ps, st.Transport)
			}
			if check && !ps.Healthy {
				return errors.New("replication is not healthy (see the STALLED and STATE columns)")
			}
			return nil
		},
	}
	c.Flags().BoolVar(&check, "check", false, "exit with status 1 when replication is not healthy")
	api.register(c)
	return c
}

// rollUp filters the status to a target (nil: everything but the node's system topics) and
// sums it per destination region.
func rollUp(st replicator.Status, t *target) policyStatus {
	ps := policyStatus{Target: "everything", Node: st.Node, Region: st.Region, Healthy: true,
		Regions: []regionStatus{}, Streams: []replicator.StreamStatus{}, Inbound: []replicator.InboundStatus{}}
	covers := func(topic string) bool { return !strings.HasPrefix(topic, "persistent://tern/system/") }
	if t != nil {
		ps.Target = t.String()
		covers = t.covers
	}
	byRegion := map[string]*regionStatus{}
	region := func(r string) *regionStatus {
		if rs, ok := byRegion[r]; ok {
			return rs
		}
		rs := &regionStatus{Region: r, Link: "-", Healthy: true}
		byRegion[r] = rs
		return rs
	}
	for _, l := range st.Links {
		rs := region(l.Region)
		switch {
		case rs.Link == "up":
		case l.State == "up" || rs.Link == "-":
			rs.Link, rs.LinkError = l.State, l.LastError
		}
	}
	for _, s := range st.Streams {
		if !covers(s.Topic) {
			continue
		}
		ps.Streams = append(ps.Streams, s)
		rs := region(s.Destination)
		rs.Streams++
		switch s.State {
		case replicator.StreamActive:
			rs.Active++
		case replicator.StreamStalled:
			rs.Stalled++
		default:
			rs.Other++
		}
		rs.LagMessages += s.LagMessages
		rs.LagSeconds = max(rs.LagSeconds, s.LagSeconds)
		if !streamHealthy(s) {
			rs.Healthy, ps.Healthy = false, false
		}
	}
	for _, in := range st.Inbound {
		if covers(in.Topic) {
			ps.Inbound = append(ps.Inbound, in)
		}
	}
	for _, rs := range byRegion {
		if rs.Streams > 0 || t == nil {
			ps.Regions = append(ps.Regions, *rs)
		}
	}
	slices.SortFunc(ps.Regions, func(a, b regionStatus) int { return cmp.Compare(a.Region, b.Region) })
	return ps
}

// streamHealthy mirrors the replicator's summary: stalled, refused or losing data is unhealthy,
// and so is a backlog waiting on a link that is down, a region with no node, or a node that
// cannot replicate.
func streamHealthy(s replicator.StreamStatus) bool {
	switch {
	case s.State == replicator.StreamStalled || s.State == replicator.StreamRefused || s.LostToRetention > 0:
		return false
	case s.LagMessages > 0 && (s.State == replicator.StreamDisconnected || s.State == replicator.StreamWaiting || s.State == replicator.StreamOff):
		return false
	}
	return true
}

func printPolicyStatus(w io.Writer, ps policyStatus, transport string) {
	health := "healthy"
	if !ps.Healthy {
		health = "NOT HEALTHY"
	}
	var lag int64
	var oldest float64
	for _, r := range ps.Regions {
		lag += r.LagMessages
		oldest = max(oldest, r.LagSeconds)
	}
	fmt.Fprintf(w, "replication of %s from %s (%s): %s; %s, lag %s, oldest %s\n", ps.Target, ps.Region, ps.Node, health,
		plural(int64(len(ps.Streams)), "stream"), plural(lag, "message"), seconds(oldest))
	if transport != "" && transport != "on" {
		fmt.Fprintf(w, "  %s\n", plainMessage(transport))
	}
	if len(ps.Regions) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TO REGION\tLINK\tSTREAMS\tACTIVE\tSTALLED\tLAG MSGS\tLAG\tHEALTH")
		for _, r := range ps.Regions {
			h := "ok"
			if !r.Healthy {
				h = "NOT OK"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", r.Region, r.Link, r.Streams, r.Active, r.Stalled, r.LagMessages, seconds(r.LagSeconds), h)
		}
		tw.Flush()
	}
	if len(ps.Streams) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tPART\tTO\tSTATE\tSTALLED\tLAG MSGS\tLAG\tSENT\tLAST TRANSFER\tLAST ERROR")
		for _, s := range ps.Streams {
			stalled := "-"
			if s.State == replicator.StreamStalled {
				stalled = "STALLED"
			}
			last := "never"
			if s.LastTransfer != nil {
				last = ago(*s.LastTransfer)
			}
			errText := dash(s.LastError)
			if len(errText) > 80 {
				errText = errText[:77] + "..."
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%d\t%s\t%s\n", short(s.Topic), partitionIndex(s.Partition), s.Destination, s.State, stalled,
				s.LagMessages, seconds(s.LagSeconds), s.SentMessages, last, errText)
		}
		tw.Flush()
	}
	if len(ps.Inbound) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "RECEIVING\tPART\tFROM\tOPEN\tMESSAGES\tDUPLICATES\tLAST APPLIED")
		for _, in := range ps.Inbound {
			last := "never"
			if in.LastApplied != nil {
				last = ago(*in.LastApplied)
			}
			open := "no"
			if in.Open {
				open = "yes"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\n", short(in.Topic), partitionIndex(in.Partition), in.FromRegion, open, in.Messages, in.Duplicates, last)
		}
		tw.Flush()
	}
	if len(ps.Streams) == 0 && len(ps.Inbound) == 0 {
		fmt.Fprintln(w, "\nno replication streams: no policy sends this data anywhere from here")
	}
}
