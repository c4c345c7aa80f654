package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/proxy"
)

// Namespaces go through Pulsar's admin v2 endpoints (PUT|GET|DELETE /admin/v2/namespaces/t/ns
// and its retention, messageTTL, deduplication and backlogQuota policies) with Pulsar's JSON
// shapes, so what this command does, pulsar-admin can do and undo; durability is tern's own
// endpoint in the same style.

func newNamespacesCmd() *cobra.Command {
	c := &cobra.Command{
		Use:     "namespaces",
		Aliases: []string{"ns"},
		Short:   "Create, list, describe, change and delete namespaces and their policies",
	}
	c.AddCommand(newNamespacesCreateCmd(), newNamespacesListCmd(), newNamespacesDescribeCmd(), newNamespacesSetCmd(), newNamespacesDeleteCmd())
	return c
}

// nsPolicyFlags are the namespace policy flags create and set share.
type nsPolicyFlags struct {
	retention, retentionSize, ttl, dedup, durability string
	backlogSize, backlogAge, backlogPolicy           string
}

func (f *nsPolicyFlags) register(c *cobra.Command) {
	fl := c.Flags()
	fl.StringVar(&f.retention, "retention", "", "how long topics keep messages, in whole minutes or more: 7d, 12h, 90m, or -1 for no limit")
	fl.StringVar(&f.retentionSize, "retention-size", "", "how much each partition log keeps, in whole MiB or more: 10GiB, 512MiB, or -1 for no limit")
	fl.StringVar(&f.ttl, "ttl", "", "message TTL: unacknowledged messages older than this expire (1h, 7d; 0 for never)")
	fl.StringVar(&f.dedup, "dedup", "", "producer deduplication: on or off")
	fl.StringVar(&f.durability, "durability", "", "sync (fsync before each acknowledgement) or async (fsync on an interval)")
	fl.StringVar(&f.backlogSize, "backlog-size", "", "backlog quota by size: 10GiB (Pulsar destination_storage)")
	fl.StringVar(&f.backlogAge, "backlog-age", "", "backlog quota by age of the oldest unacknowledged message: 24h (Pulsar message_age)")
	fl.StringVar(&f.backlogPolicy, "backlog-policy", "producer_request_hold", "what a full backlog does: producer_request_hold, producer_exception or consumer_backlog_eviction")
}

// nsChanges are parsed policy flags: each non-nil field is to be set.
type nsChanges struct {
	retentionMinutes, retentionMB *int64
	ttlSeconds                    *int64
	dedup                         *bool
	durability                    *string
	quotas                        map[string]proxy.BacklogQuota
}

// parse checks every flag before anything is sent, so a bad value changes nothing.
func (f *nsPolicyFlags) parse(c *cobra.Command) (nsChanges, error) {
	var ch nsChanges
	var errs []error
	changed := c.Flags().Changed
	if changed("retention") {
		d, err := parseDuration(f.retention)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("--retention: %v", err))
		case d >= 0 && d%time.Minute != 0:
			errs = append(errs, fmt.Errorf("--retention %s: namespace retention is counted in whole minutes (Pulsar's shape); use %s", f.retention, formatDuration((d+time.Minute-1)/time.Minute*time.Minute)))
		default:
			m := int64(-1)
			if d >= 0 {
				m = int64(d / time.Minute)
			}
			ch.retentionMinutes = &m
		}
	}
	if changed("retention-size") {
		n, err := parseSize(f.retentionSize)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("--retention-size: %v", err))
		case n >= 0 && n%(1<<20) != 0:
			errs = append(errs, fmt.Errorf("--retention-size %s: namespace retention size is counted in whole MiB (Pulsar's shape); use %dMiB", f.retentionSize, (n+(1<<20)-1)>>20))
		default:
			mb := int64(-1)
			if n >= 0 {
				mb = n >> 20
			}
			ch.retentionMB = &mb
		}
	}
	if changed("ttl") {
		d, err := parseDuration(f.ttl)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("--ttl: %v", err))
		case d < 0:
			zero := int64(0) // no TTL
			ch.ttlSeconds = &zero
		case d%time.Second != 0:
			errs = append(errs, fmt.Errorf("--ttl %s: the TTL is counted in whole seconds", f.ttl))
		default:
			s := int64(d / time.Second)
			ch.ttlSeconds = &s
		}
	}
	if changed("dedup") {
		v, err := parseOnOff("dedup", f.dedup)
		if err != nil {
			errs = append(errs, err)
		} else {
			ch.dedup = &v
		}
	}
	if changed("durability") {
		if f.durability != "sync" && f.durability != "async" {
			errs = append(errs, fmt.Errorf("--durability %q: want sync or async", f.durability))
		} else {
			ch.durability = &f.durability
		}
	}
	switch f.backlogPolicy {
	case "producer_request_hold", "producer_exception", "consumer_backlog_eviction":
	default:
		errs = append(errs, fmt.Errorf("--backlog-policy %q: want producer_request_hold, producer_exception or consumer_backlog_eviction", f.backlogPolicy))
	}
	if changed("backlog-policy") && !changed("backlog-size") && !changed("backlog-age") {
		errs = append(errs, errors.New("--backlog-policy needs --backlog-size or --backlog-age"))
	}
	if changed("backlog-size") {
		n, err := parseSize(f.backlogSize)
		if err != nil || n <= 0 {
			errs = append(errs, fmt.Errorf("--backlog-size %q: want a positive size such as 10GiB", f.backlogSize))
		} else {
			ch.quota("destination_storage", proxy.BacklogQuota{LimitSize: n, LimitTime: -1, Policy: f.backlogPolicy})
		}
	}
	if changed("backlog-age") {
		d, err := parseDuration(f.backlogAge)
		if err != nil || d < time.Second {
			errs = append(errs, fmt.Errorf("--backlog-age %q: want a duration of a second or more, such as 24h", f.backlogAge))
		} else {
			ch.quota("message_age", proxy.BacklogQuota{LimitSize: -1, LimitTime: int64(d / time.Second), Policy: f.backlogPolicy})
		}
	}
	if len(errs) > 0 {
		return ch, usageError{errors.Join(errs...)}
	}
	return ch, nil
}

func (ch *nsChanges) quota(typ string, q proxy.BacklogQuota) {
	if ch.quotas == nil {
		ch.quotas = map[string]proxy.BacklogQuota{}
	}
	ch.quotas[typ] = q
}

func (ch nsChanges) empty() bool {
	return ch.retentionMinutes == nil && ch.retentionMB == nil && ch.ttlSeconds == nil && ch.dedup == nil &&
		ch.durability == nil && len(ch.quotas) == 0
}

// apply folds the changes into policies (retention keeps the half not given).
func (ch nsChanges) apply(p *proxy.Policies) {
	if ch.retentionMinutes != nil || ch.retentionMB != nil {
		r := proxy.RetentionPolicy{RetentionTimeInMinutes: -1, RetentionSizeInMB: -1}
		if p.Retention != nil {
			r = *p.Retention
		}
		if ch.retentionMinutes != nil {
			r.RetentionTimeInMinutes = *ch.retentionMinutes
		}
		if ch.retentionMB != nil {
			r.RetentionSizeInMB = *ch.retentionMB
		}
		p.Retention = &r
	}
	if ch.ttlSeconds != nil {
		p.MessageTTLSeconds = ch.ttlSeconds
	}
	if ch.dedup != nil {
		p.Deduplication = ch.dedup
	}
	if ch.durability != nil {
		p.Durability = *ch.durability
	}
	for typ, q := range ch.quotas {
		if p.BacklogQuotas == nil {
			p.BacklogQuotas = map[string]proxy.BacklogQuota{}
		}
		p.BacklogQuotas[typ] = q
	}
}

// nsNotFound rewrites a 404 on a namespace path into what to do.
func nsNotFound(ns protocols.NamespaceName, err error) error {
	if isStatus(err, http.StatusNotFound) {
		return fmt.Errorf("namespace %s does not exist (tern namespaces list shows them; tern namespaces create %s makes it)", ns, ns)
	}
	return err
}

func newNamespacesCreateCmd() *cobra.Command {
	var api apiFlags
	var pf nsPolicyFlags
	c := &cobra.Command{
		Use:   "create TENANT/NAMESPACE",
		Short: "Create a namespace (and its tenant if new) with its policies",
		Example: `  tern namespaces create acme/orders --retention 7d --retention-size 10GiB --ttl 1d --dedup on
  tern namespaces create acme/telemetry --durability async --backlog-size 5GiB --backlog-policy producer_exception`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, err := parseNamespace(args[0])
			if err != nil {
				return err
			}
			ch, err := pf.parse(cmd)
			if err != nil {
				return err
			}
			var p proxy.Policies
			ch.apply(&p)
			ctx := cmd.Context()
			createdTenant := false
			tenantPath := "/admin/v2/tenants/" + url.PathEscape(ns.Tenant)
			if err := api.call(ctx, "GET", tenantPath, nil, nil); isStatus(err, http.StatusNotFound) {
				if err := api.call(ctx, "PUT", tenantPath, map[string]any{"adminRoles": []string{}}, nil); err != nil && !isStatus(err, http.StatusConflict) {
					return fmt.Errorf("creating tenant %s: %w", ns.Tenant, err)
				}
				createdTenant = true
			} else if err != nil {
				return err
			}
			if err := api.call(ctx, "PUT", nsPath(ns), p, nil); err != nil {
				if isStatus(err, http.StatusConflict) {
					return fmt.Errorf("namespace %s already exists (change its policies with tern namespaces set %s)", ns, ns)
				}
				return err
			}
			if api.asJSON {
				return printJSON(cmd.OutOrStdout(), map[string]any{"namespace": ns.String(), "created_tenant": createdTenant, "policies": p})
			}
			if createdTenant {
				fmt.Fprintf(cmd.OutOrStdout(), "created tenant %s\n", ns.Tenant)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created namespace %s%s\n", ns, policiesText(p))
			return nil
		},
	}
	pf.register(c)
	api.register(c)
	return c
}

// policiesText lists the policies that are set: " (retention 7d/10GiB, ttl 1d, dedup on)".
func policiesText(p proxy.Policies) string {
	rows := policyRows(p, false)
	if len(rows) == 0 {
		return ""
	}
	parts := make([]string, len(rows))
	for i, r := range rows {
		parts[i] = r[0] + " " + r[1]
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// policyRows renders policies as (name, value) rows; with all, unset ones say so.
func policyRows(p proxy.Policies, all bool) [][2]string {
	var rows [][2]string
	add := func(name, v string, set bool) {
		if set || all {
			if !set {
				v = "node default"
			}
			rows = append(rows, [2]string{name, v})
		}
	}
	ret := ""
	if r := p.Retention; r != nil {
		t, s := "unlimited", "unlimited"
		if r.RetentionTimeInMinutes >= 0 {
			t = formatDuration(time.Duration(r.RetentionTimeInMinutes) * time.Minute)
		}
		if r.RetentionSizeInMB >= 0 {
			s = formatSize(r.RetentionSizeInMB << 20)
		}
		ret = t + " / " + s
	}
	add("retention (time / size)", ret, p.Retention != nil)
	ttl := ""
	if p.MessageTTLSeconds != nil {
		ttl = "never"
		if *p.MessageTTLSeconds > 0 {
			ttl = formatDuration(time.Duration(*p.MessageTTLSeconds) * time.Second)
		}
	}
	add("message TTL", ttl, p.MessageTTLSeconds != nil)
	dd := ""
	if p.Deduplication != nil {
		dd = "off"
		if *p.Deduplication {
			dd = "on"
		}
	}
	add("deduplication", dd, p.Deduplication != nil)
	add("durability", p.Durability, p.Durability != "")
	for _, typ := range []string{"destination_storage", "message_age"} {
		q, ok := p.BacklogQuotas[typ]
		v := ""
		if ok && typ == "destination_storage" {
			v = formatSize(q.LimitSize) + " (" + q.Policy + ")"
		} else if ok {
			v = formatDuration(time.Duration(q.LimitTime)*time.Second) + " (" + q.Policy + ")"
		}
		name := "backlog quota size"
		if typ == "message_age" {
			name = "backlog quota age"
		}
		add(name, v, ok)
	}
	return rows
}

func newNamespacesListCmd() *cobra.Command {
	var api apiFlags
	var tenant string
	c := &cobra.Command{
		Use:   "list",
		Short: "List namespaces with their topic counts and replication regions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			tenants := []string{tenant}
			if tenant == "" {
				if err := api.call(ctx, "GET", "/admin/v2/tenants", nil, &tenants); err != nil {
					return err
				}
			}
			rows, err := listNamespaces(ctx, &api, tenants)
			if err != nil {
				return err
			}
			if api.asJSON {
				return printJSON(cmd.OutOrStdout(), nonNil(rows))
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAMESPACE\tTOPICS\tMESSAGES\tSIZE\tREGIONS")
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", r.Namespace, r.Topics, r.Messages, bytesHuman(uint64(r.Bytes)), regionsCell(r.Regions))
			}
			return tw.Flush()
		},
	}
	c.Flags().StringVar(&tenant, "tenant", "", "only this tenant's namespaces")
	api.register(c)
	return c
}

// nsRow is one namespace in a listing.
type nsRow struct {
	Namespace string   `json:"namespace"`
	Topics    int      `json:"topics"`
	Messages  int64    `json:"messages"`
	Bytes     int64    `json:"bytes"`
	Regions   []string `json:"regions,omitempty"`
}

func listNamespaces(ctx context.Context, api *apiFlags, tenants []string) ([]nsRow, error) {
	var topics []proxy.TopicSummary
	if err := api.call(ctx, "GET", "/api/v1/topics", nil, &topics); err != nil {
		return nil, err
	}
	var pols struct {
		Policies []struct {
			Kind    string   `json:"kind"`
			Name    string   `json:"name"`
			Regions []string `json:"regions"`
		} `json:"policies"`
	}
	if err := api.call(ctx, "GET", "/api/v1/policies", nil, &pols); err != nil && !isStatus(err, http.StatusNotFound) {
		return nil, err
	}
	var rows []nsRow
	for _, t := range tenants {
		var names []string
		if err := api.call(ctx, "GET", "/admin/v2/namespaces/"+url.PathEscape(t), nil, &names); err != nil {
			if isStatus(err, http.StatusNotFound) {
				return nil, fmt.Errorf("tenant %s does not exist", t)
			}
			return nil, err
		}
		for _, name := range names {
			if name == "tern/system" && len(tenants) > 1 {
				continue // the node's own
			}
			r := nsRow{Namespace: name}
			for _, tp := range topics {
				if strings.HasPrefix(tp.Name, protocols.DomainPersistent+"://"+name+"/") {
					r.Topics++
					r.Messages += tp.Messages
					r.Bytes += tp.Bytes
				}
			}
			for _, p := range pols.Policies {
				if p.Kind == "namespace" && p.Name == name {
					r.Regions = p.Regions
				}
			}
			rows = append(rows, r)
		}
	}
	slices.SortFunc(rows, func(a, b nsRow) int { return strings.Compare(a.Namespace, b.Namespace) })
	return rows, nil
}

// nsDescription is what `tern namespaces describe --json` prints.
type nsDescription struct {
	Namespace string                 `json:"namespace"`
	Policies  proxy.Policies         `json:"policies"`
	Topics    []proxy.TopicSummary   `json:"topics"`
	Policy    *proxy.EffectivePolicy `json:"replication,omitempty"`
}

func newNamespacesDescribeCmd() *cobra.Command {
	var api apiFlags
	c := &cobra.Command{
		Use:   "describe TENANT/NAMESPACE",
		Short: "Show a namespace's policies, topics and replication",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, err := parseNamespace(args[0])
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			d := nsDescription{Namespace: ns.String()}
			if err := api.call(ctx, "GET", nsPath(ns), nil, &d.Policies); err != nil {
				return nsNotFound(ns, err)
			}
			if err := api.call(ctx, "GET", "/api/v1/topics?namespace="+url.QueryEscape(ns.String()), nil, &d.Topics); err != nil {
				return err
			}
			var ep proxy.EffectivePolicy
			if err := api.call(ctx, "GET", "/api/v1/policies/effective?namespace="+url.QueryEscape(ns.String()), nil, &ep); err == nil {
				d.Policy = &ep
			} else if !isStatus(err, http.StatusNotFound) {
				return err
			}
			d.Topics = nonNil(d.Topics)
			if api.asJSON {
				return printJSON(cmd.OutOrStdout(), d)
			}
			printNamespace(cmd.OutOrStdout(), d)
			return nil
		},
	}
	api.register(c)
	return c
}

func printNamespace(w io.Writer, d nsDescription) {
	var msgs, bytes int64
	for _, t := range d.Topics {
		msgs += t.Messages
		bytes += t.Bytes
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "namespace\t%s\n", d.Namespace)
	fmt.Fprintf(tw, "topics\t%d (%s, %s)\n", len(d.Topics), plural(msgs, "message"), bytesHuman(uint64(bytes)))
	fmt.Fprintf(tw, "replication\t%s\n", policyLine(d.Policy))
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POLICY\tVALUE")
	for _, r := range policyRows(d.Policies, true) {
		fmt.Fprintf(tw, "%s\t%s\n", r[0], r[1])
	}
	tw.Flush()
	if len(d.Topics) > 0 {
		fmt.Fprintln(w)
		printTopics(w, d.Topics)
	}
}

// clearable are the policies `namespaces set --clear` resets, with their Pulsar endpoint.
var clearable = map[string]string{
	"retention":    "retention",
	"ttl":          "messageTTL",
	"dedup":        "deduplication",
	"durability":   "durability",
	"backlog-size": "backlogQuota?backlogQuotaType=destination_storage",
	"backlog-age":  "backlogQuota?backlogQuotaType=message_age",
}

func newNamespacesSetCmd() *cobra.Command {
	var api apiFlags
	var pf nsPolicyFlags
	var clear []string
	c := &cobra.Command{
		Use:   "set TENANT/NAMESPACE",
		Short: "Change a namespace's policies (retention, TTL, dedup, durability, backlog quota)",
		Example: `  tern namespaces set acme/orders --retention 30d --ttl 2d
  tern namespaces set acme/orders --dedup off --durability async
  tern namespaces set acme/orders --clear ttl --clear backlog-size`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, err := parseNamespace(args[0])
			if err != nil {
				return err
			}
			ch, err := pf.parse(cmd)
			if err != nil {
				return err
			}
			for _, c := range clear {
				if _, ok := clearable[c]; !ok {
					return usagef("--clear %q: want one of retention, ttl, dedup, durability, backlog-size, backlog-age", c)
				}
			}
			if ch.empty() && len(clear) == 0 {
				return usagef("nothing to change: give --retention, --retention-size, --ttl, --dedup, --durability, --backlog-size, --backlog-age or --clear")
			}
			ctx := cmd.Context()
			var cur proxy.Policies
			if err := api.call(ctx, "GET", nsPath(ns), nil, &cur); err != nil {
				return nsNotFound(ns, err)
			}
			next := cur
			ch.apply(&next)
			base := nsPath(ns) + "/"
			// One Pulsar call per policy; every value was checked above, so the calls fail only
			// if the node does.
			var calls []func() error
			post := func(path string, body any) {
				calls = append(calls, func() error { return api.call(ctx, "POST", base+path, body, nil) })
			}
			if ch.retentionMinutes != nil || ch.retentionMB != nil {
				post("retention", next.Retention)
			}
			if ch.ttlSeconds != nil {
				post("messageTTL", *ch.ttlSeconds)
			}
			if ch.dedup != nil {
				post("deduplication", *ch.dedup)
			}
			if ch.durability != nil {
				post("durability", *ch.durability)
			}
			for _, typ := range []string{"destination_storage", "message_age"} {
				if q, ok := ch.quotas[typ]; ok {
					post("backlogQuota?backlogQuotaType="+typ, q)
				}
			}
			for _, c := range clear {
				path := clearable[c]
				calls = append(calls, func() error { return api.call(ctx, "DELETE", base+path, nil, nil) })
			}
			for i, call := range calls {
				if err := call(); err != nil {
					if i > 0 {
						return fmt.Errorf("%w (%d of %d changes were applied before this one; run tern namespaces describe %s)", err, i, len(calls), ns)
					}
					return nsNotFound(ns, err)
				}
			}
			var after proxy.Policies
			if err := api.call(ctx, "GET", nsPath(ns), nil, &after); err != nil {
				return err
			}
			if api.asJSON {
				return printJSON(cmd.OutOrStdout(), map[string]any{"namespace": ns.String(), "policies": after})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "namespace %s%s\n", ns, policiesText(after))
			return nil
		},
	}
	c.Flags().StringArrayVar(&clear, "clear", nil, "reset a policy to the node default: retention, ttl, dedup, durability, backlog-size, backlog-age; repeatable")
	pf.register(c)
	api.register(c)
	return c
}

func newNamespacesDeleteCmd() *cobra.Command {
	var api apiFlags
	c := &cobra.Command{
		Use:   "delete TENANT/NAMESPACE",
		Short: "Delete an empty namespace",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, err := parseNamespace(args[0])
			if err != nil {
				return err
			}
			if err := api.call(cmd.Context(), "DELETE", nsPath(ns), nil, nil); err != nil {
				if isStatus(err, http.StatusConflict) {
					return fmt.Errorf("namespace %s still has topics: delete them first (tern topics list -n %s)", ns, ns)
				}
				return nsNotFound(ns, err)
			}
			if api.asJSON {
				return printJSON(cmd.OutOrStdout(), map[string]any{"deleted": ns.String()})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted namespace %s\n", ns)
			return nil
		},
	}
	api.register(c)
	return c
}
