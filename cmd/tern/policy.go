package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/ternmq/tern/proxy"
	"github.com/ternmq/tern/replicator"
)

// Replication policy: which regions a namespace's or a topic's data lives in.
//
// Every change is planned before it is made: the node answers a dry run with the change and
// its plan (regions added and removed, topics that would be created where, backlog that would be
// sent), which is printed; --dry-run stops there. The write then names the version the plan was
// made against (compare-and-set), so what was shown is what is applied, or nothing is.

func newPolicyCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "policy",
		Short: "Set, show and remove replication policies; see replication status",
		Long: `A replication policy says which regions the data of a namespace (tenant/ns)
or of a topic lives in. A topic's own policy overrides its namespace's.
Every change prints its plan first; --dry-run stops there.`,
	}
	c.AddCommand(newPolicySetCmd(), newPolicyGetCmd(), newPolicyListCmd(), newPolicyRmCmd(), newPolicyStatusCmd())
	return c
}

// policyRecord reads a target's own record; nil when it has none (or it was deleted).
func policyRecord(ctx context.Context, api *apiFlags, t target) (*replicator.Policy, error) {
	var p replicator.Policy
	err := api.call(ctx, "GET", "/api/v1/policies?"+t.query(), nil, &p)
	if isStatus(err, http.StatusNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// policyError turns the policy API's refusals into what to change; expected is the version the
// change was made against.
func policyError(t target, expected int64, err error) error {
	var ae *apiError
	if !errors.As(err, &ae) {
		return err
	}
	var body struct {
		Unknown []string `json:"unknown_regions"`
		Known   []string `json:"known_regions"`
		Current *int64   `json:"current_version"`
	}
	_ = json.Unmarshal(ae.Body, &body)
	switch {
	case len(body.Unknown) > 0:
		return usagef("unknown region %s: the mesh knows %s; nothing changed (check the spelling, or start a node of the region first)",
			strings.Join(body.Unknown, ", "), strings.Join(body.Known, ", "))
	case ae.Status == http.StatusConflict && body.Current != nil:
		return fmt.Errorf("the policy of %s is at version %d, not %d; nothing changed (review it with tern policy get, then retry with --if-version %d)",
			t, *body.Current, expected, *body.Current)
	}
	return err
}

type policySetFlags struct {
	api       apiFlags
	regions   []string
	start     string
	topology  string
	hub       string
	dryRun    bool
	ifVersion int64
	force     bool
}

func newPolicySetCmd() *cobra.Command {
	var f policySetFlags
	c := &cobra.Command{
		Use:   "set TARGET --regions R1,R2",
		Short: "Set which regions a namespace's or topic's data lives in",
		Long: `Set the replication policy of a namespace (tenant/ns) or a topic. The plan is
printed first: regions added and removed, where replication to each added
region starts, the topics that would be created there and the backlog this
region would send. --dry-run stops after the plan and changes nothing.

Flags not given keep their current value (start positions, topology, hub).
The write applies only if the policy is still at the version the plan saw;
--if-version N also requires that version to be N.`,
		Example: `  tern policy set public/default --regions us,eu --dry-run
  tern policy set public/default --regions us,eu --start latest
  tern policy set acme/telemetry --regions us,eu,edge --topology hub --hub us
  tern policy set orders --regions us,eu --start eu=earliest --if-version 3`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runPolicySet(cmd, args[0], &f) },
	}
	fl := c.Flags()
	fl.StringSliceVar(&f.regions, "regions", nil, "the regions the data lives in, comma separated (the whole list)")
	fl.StringVar(&f.start, "start", "", "where replication to an added region starts: earliest (everything retained) or latest (new messages only), for all regions or per region (eu=latest,edge=earliest)")
	fl.StringVar(&f.topology, "topology", "", "mesh (every region sends to every other) or hub (spokes send to the hub only)")
	fl.StringVar(&f.hub, "hub", "", "the hub region, with --topology hub")
	fl.BoolVar(&f.dryRun, "dry-run", false, "print the plan and change nothing")
	fl.Int64Var(&f.ifVersion, "if-version", -1, "apply only if the policy is at this version (0: it has never been set)")
	fl.BoolVar(&f.force, "force", false, "apply even if the plan finds conflicts (topics whose partition counts differ between regions)")
	f.api.register(c)
	return c
}

// policyOutcome is what `tern policy set|rm --json` prints.
type policyOutcome struct {
	Target  string                   `json:"target"`
	DryRun  bool                     `json:"dry_run"`
	Change  replicator.PolicyChange  `json:"change"`
	Plan    *proxy.PolicyPlan        `json:"plan"`
	Applied *replicator.PolicyChange `json:"applied,omitempty"`
	// Unchanged is set when the policy already says what was asked.
	Unchanged bool `json:"unchanged,omitempty"`
}

func runPolicySet(cmd *cobra.Command, arg string, f *policySetFlags) error {
	t, err := parseTarget(arg)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	cur, err := policyRecord(ctx, &f.api, t)
	if err != nil {
		return err
	}
	if cur != nil && cur.Deleted {
		cur = nil
	}
	spec, err := f.spec(cmd, cur)
	if err != nil {
		return err
	}
	// The version the change is planned against: the one asked for, or the one just read.
	version := int64(0)
	if cur != nil {
		version = cur.Version
	}
	if f.ifVersion >= 0 {
		version = f.ifVersion
	}
	body := t.body(map[string]any{"regions": spec.Regions, "start": spec.Start, "topology": spec.Topology, "hub": spec.Hub,
		"if_version": version, "dry_run": true})
	var plan proxy.PolicyDryRun
	if err := f.api.call(ctx, "PUT", "/api/v1/policies", body, &plan); err != nil {
		return policyError(t, version, err)
	}
	out := policyOutcome{Target: t.String(), DryRun: f.dryRun, Change: plan.PolicyChange, Plan: plan.Plan}
	w := cmd.OutOrStdout()
	if cur != nil && samePolicy(cur, plan.Policy) {
		out.Unchanged = true
		if f.api.asJSON {
			return printJSON(w, out)
		}
		fmt.Fprintf(w, "%s already has this policy (version %d): nothing to change\n", t, cur.Version)
		return nil
	}
	if !f.api.asJSON {
		printPlan(w, t, plan)
	}
	if f.dryRun {
		if f.api.asJSON {
			return printJSON(w, out)
		}
		fmt.Fprintf(w, "\ndry run: nothing changed (apply with the same command without --dry-run)\n")
		return nil
	}
	if len(plan.Plan.Conflicts) > 0 && !f.force {
		return fmt.Errorf("%s: the plan has %s; nothing changed (fix them, or apply anyway with --force)", t, plural(int64(len(plan.Plan.Conflicts)), "conflict"))
	}
	body["dry_run"] = false
	var applied replicator.PolicyChange
	if err := f.api.call(ctx, "PUT", "/api/v1/policies", body, &applied); err != nil {
		return policyError(t, version, err)
	}
	out.Applied = &applied
	if f.api.asJSON {
		return printJSON(w, out)
	}
	fmt.Fprintf(w, "\napplied: %s is at version %d (%s)\n", t, applied.Policy.Version, strings.Join(applied.Policy.Regions, ", "))
	return nil
}

// spec builds the requested policy from the flags, keeping what they do not name.
func (f *policySetFlags) spec(cmd *cobra.Command, cur *replicator.Policy) (replicator.PolicySpec, error) {
	var s replicator.PolicySpec
	if cur != nil {
		s = replicator.PolicySpec{Regions: slices.Clone(cur.Regions), Start: maps.Clone(cur.Start), Topology: cur.Topology, Hub: cur.Hub}
	}
	changed := cmd.Flags().Changed
	if changed("regions") {
		s.Regions = nil
		for _, r := range f.regions {
			if r = strings.TrimSpace(r); r != "" {
				s.Regions = append(s.Regions, r)
			}
		}
		if len(s.Regions) == 0 {
			return s, usagef("--regions is empty: name at least one region, such as --regions us,eu")
		}
		for r := range s.Start {
			if !slices.Contains(s.Regions, r) {
				delete(s.Start, r)
			}
		}
	} else if cur == nil {
		return s, usagef("the policy is new: name its regions with --regions, such as --regions us,eu")
	}
	if changed("start") {
		start, err := parseStart(f.start, s.Regions)
		if err != nil {
			return s, err
		}
		if s.Start == nil {
			s.Start = map[string]replicator.Start{}
		}
		maps.Copy(s.Start, start)
	}
	for r, st := range s.Start {
		if st == replicator.StartEarliest {
			delete(s.Start, r) // the default
		}
	}
	if len(s.Start) == 0 {
		s.Start = nil
	}
	if changed("topology") {
		switch f.topology {
		case "mesh":
			s.Topology, s.Hub = "", ""
		case "hub":
			s.Topology = replicator.TopologyHub
		default:
			return s, usagef("--topology %q: want mesh or hub", f.topology)
		}
	}
	if changed("hub") {
		if s.Topology != replicator.TopologyHub {
			return s, usagef("--hub needs --topology hub")
		}
		s.Hub = f.hub
	}
	if s.Topology == replicator.TopologyHub && s.Hub == "" {
		return s, usagef("--topology hub needs --hub, one of the regions (%s)", strings.Join(s.Regions, ", "))
	}
	return s, nil
}

// parseStart reads --start: earliest or latest for every region, or region=position pairs.
func parseStart(v string, regions []string) (map[string]replicator.Start, error) {
	out := map[string]replicator.Start{}
	pos := func(s string) (replicator.Start, error) {
		switch replicator.Start(s) {
		case replicator.StartEarliest, replicator.StartLatest:
			return replicator.Start(s), nil
		}
		return "", usagef("--start %q: want earliest or latest (for every region) or region=earliest|latest pairs", v)
	}
	if !strings.Contains(v, "=") {
		st, err := pos(strings.TrimSpace(v))
		if err != nil {
			return nil, err
		}
		for _, r := range regions {
			out[r] = st
		}
		return out, nil
	}
	for _, kv := range strings.Split(v, ",") {
		r, s, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return nil, usagef("--start %q: write every pair as region=earliest|latest", v)
		}
		st, err := pos(s)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(regions, r) {
			return nil, usagef("--start names %s, which is not in the policy's regions (%s)", r, strings.Join(regions, ", "))
		}
		out[r] = st
	}
	return out, nil
}

// samePolicy reports whether next asks for what cur already says.
func samePolicy(cur, next *replicator.Policy) bool {
	if cur == nil || next == nil || cur.Deleted != next.Deleted || !slices.Equal(cur.Regions, next.Regions) ||
		cur.EffectiveTopology() != next.EffectiveTopology() || cur.Hub != next.Hub {
		return false
	}
	for _, r := range next.Regions {
		if cur.StartFor(r) != next.StartFor(r) {
			return false
		}
	}
	return true
}

func newPolicyRmCmd() *cobra.Command {
	var api apiFlags
	var dryRun bool
	var ifVersion int64
	c := &cobra.Command{
		Use:     "rm TARGET",
		Aliases: []string{"delete"},
		Short:   "Remove a policy: a topic falls back to its namespace's, a namespace to staying local",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := parseTarget(args[0])
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			cur, err := policyRecord(ctx, &api, t)
			if err != nil {
				return err
			}
			if cur == nil || cur.Deleted {
				return fmt.Errorf("%s has no policy of its own: nothing to remove (tern policy get shows what governs it)", t)
			}
			version := cur.Version
			if ifVersion >= 0 {
				version = ifVersion
			}
			q := "/api/v1/policies?" + t.query() + "&if_version=" + strconv.FormatInt(version, 10)
			var plan proxy.PolicyDryRun
			if err := api.call(ctx, "DELETE", q+"&dry_run=true", nil, &plan); err != nil {
				return policyError(t, version, err)
			}
			out := policyOutcome{Target: t.String(), DryRun: dryRun, Change: plan.PolicyChange, Plan: plan.Plan}
			w := cmd.OutOrStdout()
			if !api.asJSON {
				printPlan(w, t, plan)
			}
			if dryRun {
				if api.asJSON {
					return printJSON(w, out)
				}
				fmt.Fprintf(w, "\ndry run: nothing changed (remove it with the same command without --dry-run)\n")
				return nil
			}
			var applied replicator.PolicyChange
			if err := api.call(ctx, "DELETE", q, nil, &applied); err != nil {
				return policyError(t, version, err)
			}
			out.Applied = &applied
			if api.asJSON {
				return printJSON(w, out)
			}
			fmt.Fprintf(w, "\nremoved: the policy of %s is deleted at version %d\n", t, applied.Policy.Version)
			return nil
		},
	}
	c.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan and change nothing")
	c.Flags().Int64Var(&ifVersion, "if-version", -1, "remove only if the policy is at this version")
	api.register(c)
	return c
}

// policyView is what `tern policy get --json` prints.
type policyView struct {
	Target string `json:"target"`
	// Record is the target's own policy; Effective what governs it with inheritance resolved.
	Record    *replicator.Policy     `json:"record"`
	Effective *proxy.EffectivePolicy `json:"effective"`
}

func newPolicyGetCmd() *cobra.Command {
	var api apiFlags
	c := &cobra.Command{
		Use:   "get TARGET",
		Short: "Show the policy of a namespace or topic, and what governs it with inheritance resolved",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := parseTarget(args[0])
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			v := policyView{Target: t.String()}
			if v.Record, err = policyRecord(ctx, &api, t); err != nil {
				return err
			}
			if v.Record != nil && v.Record.Deleted {
				v.Record = nil
			}
			var ep proxy.EffectivePolicy
			if err := api.call(ctx, "GET", "/api/v1/policies/effective?"+t.query(), nil, &ep); err == nil {
				v.Effective = &ep
			} else if !isStatus(err, http.StatusNotFound) {
				return err
			}
			if api.asJSON {
				return printJSON(cmd.OutOrStdout(), v)
			}
			printPolicyView(cmd.OutOrStdout(), t, v)
			return nil
		},
	}
	api.register(c)
	return c
}

func printPolicyView(w io.Writer, t target, v policyView) {
	switch {
	case v.Effective == nil:
		fmt.Fprintf(w, "%s has no policy: its data stays in the region it is written in\n", t)
		return
	case v.Record == nil:
		fmt.Fprintf(w, "%s has no policy of its own; it follows namespace %s's\n", t, v.Effective.Name)
	default:
		fmt.Fprintln(w, t)
	}
	p := v.Effective.Policy
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  regions\t%s\n", strings.Join(p.Regions, ", "))
	fmt.Fprintf(tw, "  start\t%s\n", startText(&p))
	fmt.Fprintf(tw, "  topology\t%s\n", topologyText(p.Hub, string(p.Topology)))
	fmt.Fprintf(tw, "  version\t%d (written in %s)\n", p.Version, p.Writer)
	tw.Flush()
}

// startText lists per-region start positions compactly.
func startText(p *replicator.Policy) string {
	var latest []string
	for _, r := range p.Regions {
		if p.StartFor(r) == replicator.StartLatest {
			latest = append(latest, r)
		}
	}
	switch {
	case len(latest) == 0:
		return "earliest (every region)"
	case len(latest) == len(p.Regions):
		return "latest (every region)"
	}
	return "latest for " + strings.Join(latest, ", ") + "; earliest for the others"
}

func newPolicyListCmd() *cobra.Command {
	var api apiFlags
	var all bool
	c := &cobra.Command{
		Use:   "list",
		Short: "List every replication policy and the regions the mesh knows",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var res struct {
				Regions  []string            `json:"regions"`
				Policies []replicator.Policy `json:"policies"`
			}
			path := "/api/v1/policies"
			if all {
				path += "?deleted=true"
			}
			if err := api.call(cmd.Context(), "GET", path, nil, &res); err != nil {
				return err
			}
			res.Policies = nonNil(res.Policies)
			if api.asJSON {
				return printJSON(cmd.OutOrStdout(), res)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "regions the mesh knows: %s\n\n", strings.Join(res.Regions, ", "))
			if len(res.Policies) == 0 {
				fmt.Fprintln(w, "no policies: all data stays in the region it is written in")
				return nil
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "KIND\tTARGET\tREGIONS\tSTART\tTOPOLOGY\tVERSION\tWRITER")
			for _, p := range res.Policies {
				regs := strings.Join(p.Regions, ",")
				if p.Deleted {
					regs = "(deleted)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", p.Kind, short(p.Name), regs, startCell(&p), topologyText(p.Hub, string(p.Topology)), p.Version, p.Writer)
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&all, "all", false, "include deleted policies")
	api.register(c)
	return c
}

func startCell(p *replicator.Policy) string {
	var parts []string
	for _, r := range p.Regions {
		if p.StartFor(r) == replicator.StartLatest {
			parts = append(parts, r+"=latest")
		}
	}
	if len(parts) == 0 {
		return "earliest"
	}
	return strings.Join(parts, ",")
}
