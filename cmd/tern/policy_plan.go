package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/ternmq/tern/proxy"
	"github.com/ternmq/tern/replicator"
)

// printPlan renders a policy change's plan as a diff an operator can check before applying:
//
//	namespace public/default: version 0 -> 1 (planned in us)
//	- regions   us (no policy: data stays where it is written)
//	+ regions   eu, us
//	  topology  mesh
//
//	   REGION  CHANGE  START     TOPICS TO CREATE  BACKLOG FROM US
//	+  eu      added   earliest  1                 5 messages, 420B
//
//	TOPIC                  PARTITIONS  MESSAGES  SIZE  IN EU
//	public/default/orders  3           5         420B  create
func printPlan(w io.Writer, t target, d proxy.PolicyDryRun) {
	p := d.Plan
	if p == nil {
		fmt.Fprintf(w, "%s: the node sent no plan (is it older than this tern?)\n", t)
		return
	}
	prev := int64(0)
	if d.Previous != nil {
		prev = d.Previous.Version
	}
	next := int64(0)
	if d.Policy != nil {
		next = d.Policy.Version
	}
	fmt.Fprintf(w, "%s: version %d -> %d (planned in %s)\n", t, prev, next, p.LocalRegion)
	before, after := effectiveText(t, p.Before, p.LocalRegion), effectiveText(t, p.After, p.LocalRegion)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if before != after {
		fmt.Fprintf(tw, "- regions\t%s\n", before)
		fmt.Fprintf(tw, "+ regions\t%s\n", after)
	} else {
		fmt.Fprintf(tw, "  regions\t%s\n", after)
	}
	bt, at := topologyOf(p.Before), topologyOf(p.After)
	switch {
	case p.After == nil:
	case p.Before != nil && bt != at:
		fmt.Fprintf(tw, "- topology\t%s\n", bt)
		fmt.Fprintf(tw, "+ topology\t%s\n", at)
	default:
		fmt.Fprintf(tw, "  topology\t%s\n", at)
	}
	tw.Flush()

	if len(p.Added) > 0 || len(p.Removed) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "\tREGION\tCHANGE\tSTART\tTOPICS TO CREATE\tBACKLOG FROM %s\n", strings.ToUpper(p.LocalRegion))
		for _, a := range p.Added {
			create := "?"
			if a.Checked {
				n := 0
				for _, rt := range a.Topics {
					if rt.Action == "create" {
						n++
					}
				}
				create = fmt.Sprint(n)
			}
			backlog := fmt.Sprintf("%s, %s", plural(a.BacklogMessages, "message"), bytesHuman(uint64(a.BacklogBytes)))
			if !a.Sends {
				backlog = "none (" + p.LocalRegion + " does not send to it)"
			} else if a.Start == replicator.StartLatest {
				backlog = "none (starts at latest)"
			}
			fmt.Fprintf(tw, "+\t%s\tadded\t%s\t%s\t%s\n", a.Region, a.Start, create, backlog)
		}
		for _, r := range p.Removed {
			fmt.Fprintf(tw, "-\t%s\tremoved\t-\t-\t-\n", r)
		}
		tw.Flush()
	}

	if len(p.Topics) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		hdr := "TOPIC\tPARTITIONS\tMESSAGES\tSIZE"
		for _, a := range p.Added {
			hdr += "\tIN " + strings.ToUpper(a.Region)
		}
		fmt.Fprintln(tw, hdr)
		for i, pt := range p.Topics {
			row := fmt.Sprintf("%s\t%s\t%d\t%s", short(pt.Name), partitionsCell(pt.Partitions), pt.Messages, bytesHuman(uint64(pt.Bytes)))
			for _, a := range p.Added {
				row += "\t" + actionText(a, i)
			}
			fmt.Fprintln(tw, row)
		}
		tw.Flush()
	} else {
		fmt.Fprintf(w, "\nno topics of %s in %s yet\n", targetScope(t), p.LocalRegion)
	}

	for _, a := range p.Added {
		if !a.Checked {
			fmt.Fprintf(w, "\n%s could not be asked what it holds: %s\n", a.Region, a.CheckError)
			continue
		}
		if len(a.Incoming) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s holds topics %s does not; replication would create them here:\n", a.Region, p.LocalRegion)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, in := range a.Incoming {
			fmt.Fprintf(tw, "  %s\t%s\t%s, %s\n", short(in.Name), partitionsText(in.Partitions), plural(in.Messages, "message"), bytesHuman(uint64(in.Bytes)))
		}
		tw.Flush()
	}
	if len(p.Overridden) > 0 {
		fmt.Fprintf(w, "\nunaffected (their own policy): %s\n", strings.Join(shortAll(p.Overridden), ", "))
	}
	if len(p.Conflicts) > 0 {
		fmt.Fprintln(w, "\nconflicts (replication would refuse these topics):")
		for _, c := range p.Conflicts {
			fmt.Fprintf(w, "  ! %s\n", c)
		}
	}
	if len(p.Notes) > 0 {
		fmt.Fprintln(w, "\nnotes:")
		for _, n := range p.Notes {
			fmt.Fprintf(w, "  - %s\n", n)
		}
	}
}

// actionText is what added region a has of the i-th planned topic.
func actionText(a proxy.RegionPlan, i int) string {
	if i >= len(a.Topics) {
		return "?"
	}
	rt := a.Topics[i]
	switch rt.Action {
	case "create":
		return "create (" + partitionsCell(rt.Partitions) + ")"
	case "exists":
		return "exists"
	case "mismatch":
		return fmt.Sprintf("MISMATCH (%s there)", partitionsCell(*rt.TheirPartitions))
	}
	return "unknown"
}

// effectiveText is the regions of an effective policy, saying where a topic inherits them from.
func effectiveText(t target, p *proxy.EffectivePolicy, local string) string {
	if p == nil {
		return local + " (no policy: the data stays where it is written)"
	}
	s := strings.Join(p.Regions, ", ")
	if !t.isNS && p.Kind == replicator.KindNamespace {
		s += " (namespace " + p.Name + "'s policy)"
	}
	return s
}

func topologyOf(p *proxy.EffectivePolicy) string {
	if p == nil {
		return "mesh"
	}
	return topologyText(p.Hub, string(p.Topology))
}

func targetScope(t target) string {
	if t.isNS {
		return "namespace " + t.ns.String()
	}
	return short(t.topic.String())
}

func shortAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = short(n)
	}
	return out
}
