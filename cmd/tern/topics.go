package main

import (
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/ternmq/tern/proxy"
)

func newTopicsCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "topics",
		Short: "Create, list, describe, alter and delete topics",
		Long: `Manage topics through a node's admin API (--url, or TERN_URL).

A topic is named persistent://tenant/namespace/name, tenant/namespace/name, or
just name (in public/default, where Kafka topics live).`,
	}
	c.AddCommand(newTopicsCreateCmd(), newTopicsListCmd(), newTopicsDescribeCmd(), newTopicsAlterCmd(), newTopicsDeleteCmd())
	return c
}

// topicConfigFlags are the config flags create and alter share.
type topicConfigFlags struct {
	retention, retentionSize, maxMessageSize string
	config                                   []string
}

func (f *topicConfigFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.retention, "retention", "", "how long the log keeps messages: 7d, 12h, 90m, or -1 for no limit (retention.ms)")
	c.Flags().StringVar(&f.retentionSize, "retention-size", "", "how much each partition log keeps: 10GiB, 512MiB, or -1 for no limit (retention.bytes)")
	c.Flags().StringVar(&f.maxMessageSize, "max-message-size", "", "largest batch a producer may send: 1MiB, 512KiB (max.message.bytes)")
	c.Flags().StringArrayVar(&f.config, "config", nil, "a topic config as key=value (retention.ms, retention.bytes, max.message.bytes, cleanup.policy); repeatable")
}

// values turns the flags into Kafka config names and values.
func (f *topicConfigFlags) values(c *cobra.Command) (map[string]string, error) {
	out := map[string]string{}
	if c.Flags().Changed("retention") {
		d, err := parseDuration(f.retention)
		if err != nil {
			return nil, usagef("--retention: %v", err)
		}
		out[proxy.ConfRetentionMs] = strconv.FormatInt(max(d.Milliseconds(), -1), 10)
	}
	if c.Flags().Changed("retention-size") {
		n, err := parseSize(f.retentionSize)
		if err != nil {
			return nil, usagef("--retention-size: %v", err)
		}
		out[proxy.ConfRetentionBytes] = strconv.FormatInt(n, 10)
	}
	if c.Flags().Changed("max-message-size") {
		n, err := parseSize(f.maxMessageSize)
		if err != nil || n < 1 {
			return nil, usagef("--max-message-size %q: want a positive size such as 1MiB", f.maxMessageSize)
		}
		out[proxy.ConfMaxMessageBytes] = strconv.FormatInt(n, 10)
	}
	for _, kv := range f.config {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef("--config %q: want key=value, such as retention.ms=604800000", kv)
		}
		if _, dup := out[k]; dup {
			return nil, usagef("%s is given twice (--config and its own flag): keep one", k)
		}
		out[k] = v
	}
	return out, nil
}

func newTopicsCreateCmd() *cobra.Command {
	var api apiFlags
	var cf topicConfigFlags
	var partitions int
	c := &cobra.Command{
		Use:   "create TOPIC",
		Short: "Create a topic with its partition count and limits",
		Example: `  tern topics create orders --partitions 3 --retention 7d
  tern topics create acme/billing/invoices --partitions 6 --retention-size 10GiB --max-message-size 1MiB
  tern topics create persistent://public/default/events --partitions 0   # non-partitioned`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := parseTopic(args[0])
			if err != nil {
				return err
			}
			if partitions < 0 {
				return usagef("--partitions %d: use a positive count, or 0 for a non-partitioned topic", partitions)
			}
			conf, err := cf.values(cmd)
			if err != nil {
				return err
			}
			var out proxy.TopicSummary
			body := proxy.TopicCreate{Topic: name.String(), Partitions: partitions, Config: conf}
			if err := api.call(cmd.Context(), "POST", "/api/v1/topics", body, &out); err != nil {
				return err
			}
			if api.asJSON {
				return printJSON(cmd.OutOrStdout(), out)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created topic %s with %s%s\n", out.Name, partitionsText(out.Partitions), configText(out.Config))
			return nil
		},
	}
	c.Flags().IntVar(&partitions, "partitions", 1, "partition count (0: a non-partitioned topic); it can grow later, never shrink")
	cf.register(c)
	api.register(c)
	return c
}

func partitionsText(n int) string {
	switch n {
	case 0:
		return "no partitions (non-partitioned)"
	case 1:
		return "1 partition"
	}
	return strconv.Itoa(n) + " partitions"
}

// configText renders overrides in their human units: " (retention 7d, max message size 1MiB)".
func configText(conf map[string]string) string {
	if len(conf) == 0 {
		return ""
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(conf)) {
		parts = append(parts, configLabel(k)+" "+configMeaning(k, conf[k]))
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func configLabel(k string) string {
	switch k {
	case proxy.ConfRetentionMs:
		return "retention"
	case proxy.ConfRetentionBytes:
		return "retention size"
	case proxy.ConfMaxMessageBytes:
		return "max message size"
	}
	return k
}

// configMeaning renders a config value in human units where it has some.
func configMeaning(k, v string) string {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return v
	}
	switch k {
	case proxy.ConfRetentionMs:
		if n < 0 {
			return "unlimited"
		}
		return formatDuration(time.Duration(n) * time.Millisecond)
	case proxy.ConfRetentionBytes, proxy.ConfMaxMessageBytes:
		return formatSize(n)
	}
	return v
}

func newTopicsListCmd() *cobra.Command {
	var api apiFlags
	var ns string
	c := &cobra.Command{
		Use:   "list",
		Short: "List topics with their partitions, size and replication regions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := "/api/v1/topics"
			if ns != "" {
				n, err := parseNamespace(ns)
				if err != nil {
					return err
				}
				path += "?namespace=" + url.QueryEscape(n.String())
			}
			var topics []proxy.TopicSummary
			if err := api.call(cmd.Context(), "GET", path, nil, &topics); err != nil {
				return err
			}
			if api.asJSON {
				return printJSON(cmd.OutOrStdout(), nonNil(topics))
			}
			printTopics(cmd.OutOrStdout(), topics)
			return nil
		},
	}
	c.Flags().StringVarP(&ns, "namespace", "n", "", "only the topics of this tenant/namespace")
	api.register(c)
	return c
}

func printTopics(w io.Writer, topics []proxy.TopicSummary) {
	if len(topics) == 0 {
		fmt.Fprintln(w, "no topics")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITIONS\tMESSAGES\tSIZE\tREGIONS")
	for _, t := range topics {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", short(t.Name), partitionsCell(t.Partitions), t.Messages, bytesHuman(uint64(t.Bytes)), regionsCell(t.Regions))
	}
	tw.Flush()
}

func partitionsCell(n int) string {
	if n == 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

func regionsCell(r []string) string {
	if len(r) == 0 {
		return "local"
	}
	return strings.Join(r, ",")
}

func newTopicsDescribeCmd() *cobra.Command {
	var api apiFlags
	c := &cobra.Command{
		Use:   "describe TOPIC",
		Short: "Show a topic: effective config and where each value comes from, partitions, subscriptions, replication",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := parseTopic(args[0])
			if err != nil {
				return err
			}
			var d proxy.TopicDetail
			if err := api.call(cmd.Context(), "GET", topicPath(name), nil, &d); err != nil {
				return err
			}
			if api.asJSON {
				return printJSON(cmd.OutOrStdout(), d)
			}
			printTopicDetail(cmd.OutOrStdout(), d)
			return nil
		},
	}
	api.register(c)
	return c
}

func printTopicDetail(w io.Writer, d proxy.TopicDetail) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "topic\t%s\n", d.Name)
	fmt.Fprintf(tw, "partitions\t%s\n", partitionsText(d.Partitions))
	fmt.Fprintf(tw, "created\t%s\n", d.Created.UTC().Format(time.RFC3339))
	fmt.Fprintf(tw, "retained\t%s, %s\n", plural(d.Messages, "message"), bytesHuman(uint64(d.Bytes)))
	fmt.Fprintf(tw, "replication\t%s\n", policyLine(d.Policy))
	subs := "none"
	if len(d.Subscriptions) > 0 {
		subs = strings.Join(d.Subscriptions, ", ")
	}
	fmt.Fprintf(tw, "subscriptions\t%s\n", subs)
	tw.Flush()

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CONFIG\tVALUE\tMEANING\tSOURCE")
	for _, c := range d.Effective {
		src := c.Source
		if c.ReadOnly {
			src += " (read-only)"
		}
		meaning := configMeaning(c.Name, c.Value)
		if meaning == c.Value {
			meaning = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Name, c.Value, meaning, src)
	}
	tw.Flush()

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tSTART\tEND\tMESSAGES\tSIZE\tLAST APPEND")
	for _, l := range d.Logs {
		last := "-"
		if l.LastAt != nil {
			last = l.LastAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\n", partitionIndex(l.Partition), l.Start, l.End, l.Messages, bytesHuman(uint64(l.Bytes)), last)
	}
	tw.Flush()
}

func partitionIndex(i int) string {
	if i < 0 {
		return "-"
	}
	return strconv.Itoa(i)
}

// policyLine says in one line which replication policy governs something.
func policyLine(p *proxy.EffectivePolicy) string {
	if p == nil {
		return "none: the data stays in the region it is written in"
	}
	from := "its own policy"
	if p.Kind == "namespace" {
		from = "namespace " + p.Name + "'s policy"
	}
	return fmt.Sprintf("%s (%s, %s v%d)", strings.Join(p.Regions, ", "), topologyText(p.Hub, string(p.Topology)), from, p.Version)
}

func topologyText(hub, topology string) string {
	if topology == "hub" {
		return "hub " + hub
	}
	return "mesh"
}

// friendlyConfig maps the names --unset accepts to config keys.
var friendlyConfig = map[string]string{
	"retention":        proxy.ConfRetentionMs,
	"retention-size":   proxy.ConfRetentionBytes,
	"max-message-size": proxy.ConfMaxMessageBytes,
}

func newTopicsAlterCmd() *cobra.Command {
	var api apiFlags
	var cf topicConfigFlags
	var partitions int
	var unset []string
	c := &cobra.Command{
		Use:   "alter TOPIC",
		Short: "Grow a topic's partitions or change its limits",
		Example: `  tern topics alter orders --partitions 6
  tern topics alter orders --retention 30d --max-message-size 2MiB
  tern topics alter orders --unset retention     # back to the namespace's or node's value`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := parseTopic(args[0])
			if err != nil {
				return err
			}
			conf, err := cf.values(cmd)
			if err != nil {
				return err
			}
			var body proxy.TopicAlter
			if cmd.Flags().Changed("partitions") {
				if partitions < 1 {
					return usagef("--partitions %d: want the new, larger partition count", partitions)
				}
				body.Partitions = &partitions
			}
			body.Set = conf
			for _, u := range unset {
				k := u
				if f, ok := friendlyConfig[u]; ok {
					k = f
				}
				if _, ok := conf[k]; ok {
					return usagef("--unset %s and a new value for it: choose one", u)
				}
				body.Remove = append(body.Remove, k)
			}
			if body.Partitions == nil && len(body.Set) == 0 && len(body.Remove) == 0 {
				return usagef("nothing to change: give --partitions, --retention, --retention-size, --max-message-size, --config or --unset")
			}
			var out proxy.TopicSummary
			if err := api.call(cmd.Context(), "PATCH", topicPath(name), body, &out); err != nil {
				return err
			}
			if api.asJSON {
				return printJSON(cmd.OutOrStdout(), out)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "altered topic %s: %s%s\n", out.Name, partitionsText(out.Partitions), configText(out.Config))
			return nil
		},
	}
	c.Flags().IntVar(&partitions, "partitions", 0, "grow to this many partitions (partitions are never removed)")
	c.Flags().StringArrayVar(&unset, "unset", nil, "drop an override: retention, retention-size, max-message-size or a config key; repeatable")
	cf.register(c)
	api.register(c)
	return c
}

func newTopicsDeleteCmd() *cobra.Command {
	var api apiFlags
	var force bool
	c := &cobra.Command{
		Use:   "delete TOPIC",
		Short: "Delete a topic and its data in this region",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := parseTopic(args[0])
			if err != nil {
				return err
			}
			path := topicPath(name)
			if force {
				path += "?force=true"
			}
			if err := api.call(cmd.Context(), "DELETE", path, nil, nil); err != nil {
				return err
			}
			if api.asJSON {
				return printJSON(cmd.OutOrStdout(), map[string]any{"deleted": name.String()})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted topic %s\n", name)
			return nil
		},
	}
	c.Flags().BoolVar(&force, "force", false, "delete even with producers or consumers attached")
	api.register(c)
	return c
}

// nonNil makes an empty list print as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
