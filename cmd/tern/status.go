package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/ternmq/tern/regions"
	"github.com/ternmq/tern/replicator"
)

// statusReport is what `tern status --json` prints; sections are added as
// the node grows (replication links join the mesh view).
type statusReport struct {
	Mesh        regions.Snapshot   `json:"mesh"`
	Replication *replicator.Status `json:"replication,omitempty"`
}

func newStatusCmd() *cobra.Command {
	var api apiFlags
	c := &cobra.Command{
		Use:   "status",
		Short: "Show the mesh as a node sees it: regions, nodes, state, addresses and RTT",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var rep statusReport
			if err := api.call(cmd.Context(), "GET", "/api/v1/mesh", nil, &rep.Mesh); err != nil {
				return err
			}
			if err := fetchReplication(cmd.Context(), &api, &rep); err != nil {
				return err
			}
			if api.asJSON {
				return printJSON(cmd.OutOrStdout(), rep)
			}
			printMesh(cmd.OutOrStdout(), rep.Mesh)
			if rep.Replication != nil {
				printReplication(cmd.OutOrStdout(), *rep.Replication)
			}
			return nil
		},
	}
	api.register(c)
	return c
}

// printMesh renders the mesh as aligned tables.
func printMesh(w io.Writer, s regions.Snapshot) {
	enc := "off"
	if s.Encrypted {
		enc = "on"
	}
	fmt.Fprintf(w, "node %s in region %s (gossip encryption %s)\n\n", s.LocalNode, s.LocalRegion, enc)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "REGION\tNODES UP\tRTT")
	for _, r := range s.Regions {
		name := r.Name
		if r.Local {
			name += " (local)"
		}
		fmt.Fprintf(tw, "%s\t%d/%d\t%s\n", name, r.NodesUp, len(r.Nodes), rtt(r.RTTMs))
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "REGION\tNODE\tSTATE\tRACK\tRTT\tKAFKA\tPULSAR\tHTTP\tQUIC\tGOSSIP")
	for _, r := range s.Regions {
		for _, n := range r.Nodes {
			name := n.Name
			if n.Local {
				name += " *"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, name, n.State, dash(n.Rack), rtt(n.RTTMs),
				dash(n.KafkaAddr), dash(n.PulsarAddr), dash(n.HTTPAddr), dash(n.QUICAddr), n.GossipAddr)
		}
	}
	tw.Flush()
}

func rtt(ms *float64) string {
	if ms == nil {
		return "-"
	}
	if *ms < 1 {
		return fmt.Sprintf("%.2fms", *ms)
	}
	return fmt.Sprintf("%.1fms", *ms)
}

func dash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}
