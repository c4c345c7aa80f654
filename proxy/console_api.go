package proxy

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ternmq/tern/protocols"
)

// The console's data: tern's own JSON API (beside /api/v1/mesh), shaped for
// a screen rather than for Pulsar tooling. The admin REST API has the same
// facts per topic; these calls gather them for every topic at once and add
// rates (rates.go). They live under /api/v1/console/ because /api/v1/topics
// is the operator CLI's resource (admin_topicinfo.go), shaped for changes
// made in one request rather than for a screen that refreshes.
//
//	GET /api/v1/node                                   this node, its listeners and totals
//	GET /api/v1/console/topics                         every topic with rates, backlog and counts
//	GET /api/v1/console/topics/{tenant}/{ns}/{topic}   one topic: logs, subscriptions, producers, groups

// consoleNode describes the node.
type consoleNode struct {
	Name      string `json:"name"`
	Region    string `json:"region"`
	Rack      string `json:"rack,omitempty"`
	Version   string `json:"version"`
	ClusterID string `json:"clusterId"`
	Ready     bool   `json:"ready"`
	Kafka     string `json:"kafka,omitempty"`
	Pulsar    string `json:"pulsar,omitempty"`
	HTTP      string `json:"http,omitempty"`
	// Time is the node's clock (Unix ms), for the console to show ages.
	Time       int64 `json:"time"`
	Topics     int   `json:"topics"`
	Partitions int   `json:"partitions"`
	// WebSocket sessions open, by endpoint.
	Sessions map[string]int64 `json:"sessions,omitempty"`
}

// consoleTopic is one row of the topic list.
type consoleTopic struct {
	Name       string `json:"name"`
	Tenant     string `json:"tenant"`
	Namespace  string `json:"namespace"`
	Local      string `json:"local"`
	Partitions int    `json:"partitions"`
	// Messages is the sum of the logs' high watermarks (messages ever
	// written); Retained and StorageSize what retention keeps.
	Messages    int64 `json:"messages"`
	Retained    int64 `json:"retained"`
	StorageSize int64 `json:"storageSize"`
	// Rates are per second; absent until two samples exist.
	MsgRateIn     *float64 `json:"msgRateIn,omitempty"`
	BytesRateIn   *float64 `json:"bytesRateIn,omitempty"`
	MsgRateOut    *float64 `json:"msgRateOut,omitempty"`
	Backlog       int64    `json:"backlog"`
	Subscriptions int      `json:"subscriptions"`
	Producers     int      `json:"producers"`
	Consumers     int      `json:"consumers"`
	LastPublish   int64    `json:"lastPublish,omitempty"`
	Created       int64    `json:"created"`
}

// consoleLog is one partition log of a topic.
type consoleLog struct {
	Partition   int      `json:"partition"`
	Name        string   `json:"name"`
	Start       int64    `json:"start"`
	End         int64    `json:"end"`
	Entries     int64    `json:"entries"`
	Bytes       int64    `json:"bytes"`
	MsgRateIn   *float64 `json:"msgRateIn,omitempty"`
	BytesRateIn *float64 `json:"bytesRateIn,omitempty"`
	LastPublish int64    `json:"lastPublish,omitempty"`
	Producers   []string `json:"producers"`
}

// consoleSub is a subscription summed over the topic's logs.
type consoleSub struct {
	Name       string            `json:"name"`
	Type       string            `json:"type"`
	Durable    bool              `json:"durable"`
	Backlog    int64             `json:"backlog"`
	Unacked    int64             `json:"unacked"`
	Delayed    int64             `json:"delayed"`
	MsgRateOut *float64          `json:"msgRateOut,omitempty"`
	Consumers  []consoleConsumer `json:"consumers"`
	// PerPartition is the backlog of each log, for partitioned topics.
	PerPartition []int64 `json:"perPartition,omitempty"`
}

type consoleConsumer struct {
	Name      string `json:"name"`
	Partition int    `json:"partition"`
	Address   string `json:"address,omitempty"`
	Transport string `json:"transport,omitempty"`
	Permits   int64  `json:"permits"`
	Unacked   int64  `json:"unacked"`
	Active    bool   `json:"active"`
}

// consoleGroup is a Kafka consumer group's position on the topic.
type consoleGroup struct {
	Name string `json:"name"`
	Lag  int64  `json:"lag"`
	// Committed is the committed offset of each log (-1: none).
	Committed []int64 `json:"committed"`
}

// consoleDetail is one topic.
type consoleDetail struct {
	consoleTopic
	Config        map[string]string `json:"config,omitempty"`
	Logs          []consoleLog      `json:"logs"`
	Subs          []consoleSub      `json:"subscriptionList"`
	Groups        []consoleGroup    `json:"groups"`
	Deduplication bool              `json:"deduplication"`
}

func (n *Node) consoleAPIRoutes() {
	n.mux.HandleFunc("GET /api/v1/node", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, n.consoleNode(r.Context()))
	})
	n.mux.HandleFunc("GET /api/v1/console/topics", func(w http.ResponseWriter, r *http.Request) {
		ts, err := n.ListTopics(r.Context(), protocols.NamespaceName{})
		if err != nil {
			writeAPIError(w, adminStatus(err), err.Error())
			return
		}
		now := n.now()
		out := make([]consoleTopic, 0, len(ts))
		for _, t := range ts {
			d, err := n.consoleTopic(r.Context(), t, now, false)
			if err != nil {
				continue // deleted meanwhile
			}
			out = append(out, d.consoleTopic)
		}
		slices.SortFunc(out, func(a, b consoleTopic) int { return strings.Compare(a.Name, b.Name) })
		writeJSON(w, http.StatusOK, map[string]any{"time": now.UnixMilli(), "topics": out})
	})
	n.mux.HandleFunc("GET /api/v1/console/topics/{tenant}/{ns}/{topic}", func(w http.ResponseWriter, r *http.Request) {
		name, err := pathTopic(r)
		if err != nil {
			writeAPIError(w, adminStatus(err), err.Error())
			return
		}
		t, err := n.Topic(r.Context(), name)
		if err != nil {
			writeAPIError(w, adminStatus(err), err.Error())
			return
		}
		d, err := n.consoleTopic(r.Context(), t, n.now(), true)
		if err != nil {
			writeAPIError(w, adminStatus(err), err.Error())
			return
		}
		writeJSON(w, http.StatusOK, d)
	})
}

func (n *Node) consoleNode(ctx context.Context) consoleNode {
	out := consoleNode{
		Name: n.cfg.Node.Name, Region: n.cfg.Node.Region, Rack: n.cfg.Node.Rack, Version: n.opts.Version,
		ClusterID: n.clusterID, Ready: n.Ready(), Kafka: n.local.KafkaAddr, Pulsar: n.local.PulsarAddr, HTTP: n.local.HTTPAddr,
		Time: n.now().UnixMilli(),
	}
	if ts, err := n.ListTopics(ctx, protocols.NamespaceName{}); err == nil {
		out.Topics = len(ts)
		for _, t := range ts {
			out.Partitions += len(t.Logs())
		}
	}
	if ws := n.WebSocket(); ws != nil {
		m := ws.Metrics()
		out.Sessions = map[string]int64{"producer": m.Producers, "consumer": m.Consumers, "reader": m.Readers}
	}
	return out
}

// rate turns an observation into JSON fields.
func rate(v float64, ok bool) *float64 {
	if !ok {
		return nil
	}
	v = max(v, 0)
	return &v
}

func addRate(sum **float64, v *float64) {
	if v == nil {
		return
	}
	if *sum == nil {
		z := 0.0
		*sum = &z
	}
	**sum += *v
}

// consoleTopic gathers one topic's figures; detail adds logs,
// subscriptions, producers and Kafka groups.
func (n *Node) consoleTopic(ctx context.Context, t protocols.TopicInfo, now time.Time, detail bool) (consoleDetail, error) {
	rb := n.rates()
	d := consoleDetail{consoleTopic: consoleTopic{
		Name: t.Name.String(), Tenant: t.Name.Tenant, Namespace: t.Name.Namespace, Local: t.Name.Local,
		Partitions: t.Partitions, Created: t.Created.UnixMilli(),
	}}
	subs := map[string]*consoleSub{}
	var order []string
	logs := t.Logs()
	for li, p := range logs {
		pid, err := n.pid(p)
		if err != nil {
			return d, err
		}
		ps, err := n.store.PartitionStats(pid)
		if err != nil {
			return d, mapStoreErr(err)
		}
		mr, br, ok := rb.observe("log/"+strconv.FormatUint(uint64(pid), 10), now, ps.HighWatermark, ps.Bytes)
		d.Messages += ps.HighWatermark
		d.Retained += ps.HighWatermark - ps.Start
		d.StorageSize += ps.Bytes
		d.LastPublish = max(d.LastPublish, ps.LastAppend)
		addRate(&d.MsgRateIn, rate(mr, ok))
		addRate(&d.BytesRateIn, rate(br, ok))
		leases := n.messaging().producers.list(pid)
		d.Producers += len(leases)
		snaps, err := n.subscriptionSnapshots(ctx, pid)
		if err != nil {
			return d, err
		}
		for _, s := range snaps {
			cs := subs[s.name]
			if cs == nil {
				cs = &consoleSub{Name: s.name, Type: s.typ, Durable: s.durable, Consumers: []consoleConsumer{}}
				if t.Partitions > 0 {
					cs.PerPartition = make([]int64, len(logs))
				}
				subs[s.name] = cs
				order = append(order, s.name)
			}
			cs.Backlog += s.backlog
			cs.Unacked += s.unacked
			cs.Delayed += s.delayed
			if cs.PerPartition != nil {
				cs.PerPartition[li] = s.backlog
			}
			or, _, ok := rb.observe("sub/"+strconv.FormatUint(uint64(pid), 10)+"/"+s.name, now, max(ps.HighWatermark-s.backlog, 0), 0)
			addRate(&cs.MsgRateOut, rate(or, ok))
			for _, c := range s.consumers {
				cs.Consumers = append(cs.Consumers, consoleConsumer{
					Name: c.name, Partition: p.Index, Address: c.address, Transport: transportOf(c.metadata),
					Permits: c.permits, Unacked: c.unacked, Active: s.active == "" || s.active == c.name,
				})
			}
		}
		if detail {
			l := consoleLog{
				Partition: p.Index, Name: p.Name().String(), Start: ps.Start, End: ps.HighWatermark, Entries: ps.Entries, Bytes: ps.Bytes,
				MsgRateIn: rate(mr, ok), BytesRateIn: rate(br, ok), LastPublish: ps.LastAppend, Producers: []string{},
			}
			for _, lease := range leases {
				l.Producers = append(l.Producers, lease.name)
			}
			slices.Sort(l.Producers)
			d.Logs = append(d.Logs, l)
		}
	}
	d.Subscriptions = len(subs)
	for _, name := range order {
		s := subs[name]
		d.Backlog += s.Backlog
		d.Consumers += len(s.Consumers)
		addRate(&d.MsgRateOut, s.MsgRateOut)
	}
	if !detail {
		return d, nil
	}
	slices.Sort(order)
	d.Subs = make([]consoleSub, 0, len(order))
	for _, name := range order {
		d.Subs = append(d.Subs, *subs[name])
	}
	d.Config = t.Config
	if lim, err := n.limits(ctx, t.Name); err == nil {
		d.Deduplication = lim.dedup
	}
	groups, err := n.topicGroups(ctx, logs)
	if err != nil {
		return d, err
	}
	d.Groups = groups
	return d, nil
}

// topicGroups lists the Kafka groups with offsets committed on the logs.
func (n *Node) topicGroups(ctx context.Context, logs []protocols.Partition) ([]consoleGroup, error) {
	out := []consoleGroup{}
	names, err := n.ListGroupsWithOffsets(ctx)
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	for _, g := range names {
		offs, err := n.FetchOffsets(ctx, g, logs)
		if err != nil {
			return nil, err
		}
		cg := consoleGroup{Name: g, Committed: make([]int64, len(logs))}
		any := false
		for i, o := range offs {
			cg.Committed[i] = -1
			if !o.Found || i >= len(logs) {
				continue
			}
			any = true
			cg.Committed[i] = o.Offset
			if pid, err := n.pid(logs[i]); err == nil {
				if _, hw, err := n.store.Offsets(pid); err == nil {
					cg.Lag += max(hw-o.Offset, 0)
				}
			}
		}
		if any {
			out = append(out, cg)
		}
	}
	return out, nil
}

// transportOf names how a consumer is connected, from its metadata.
func transportOf(md map[string]string) string {
	if t := md["transport"]; t != "" {
		return t
	}
	return "pulsar"
}
