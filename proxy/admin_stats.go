package proxy

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/ternmq/tern/protocols"
)

// Admin REST: topic statistics in Pulsar's JSON shapes. tern reports the
// counters and states it keeps; it does not compute rates, so the rate
// fields of Pulsar's shapes are left out.

type topicStats struct {
	MsgInCounter           int64                        `json:"msgInCounter"`
	StorageSize            int64                        `json:"storageSize"`
	Publishers             []publisherStats             `json:"publishers"`
	Subscriptions          map[string]subscriptionStats `json:"subscriptions"`
	Replication            map[string]any               `json:"replication"`
	DeduplicationStatus    string                       `json:"deduplicationStatus"`
	TopicCreationTimeStamp int64                        `json:"topicCreationTimeStamp,omitempty"`
	LastPublishTimestamp   int64                        `json:"lastPublishTimestamp,omitempty"`
}

type publisherStats struct {
	ProducerName string `json:"producerName"`
	AccessMode   string `json:"accessMode"`
}

type subscriptionStats struct {
	MsgBacklog          int64           `json:"msgBacklog"`
	MsgBacklogNoDelayed int64           `json:"msgBacklogNoDelayed"`
	MsgDelayed          int64           `json:"msgDelayed"`
	UnackedMessages     int64           `json:"unackedMessages"`
	Type                string          `json:"type"`
	ActiveConsumerName  string          `json:"activeConsumerName,omitempty"`
	IsDurable           bool            `json:"isDurable"`
	Consumers           []consumerStats `json:"consumers"`
}

type consumerStats struct {
	ConsumerName     string            `json:"consumerName"`
	AvailablePermits int64             `json:"availablePermits"`
	UnackedMessages  int64             `json:"unackedMessages"`
	Address          string            `json:"address"`
	Metadata         map[string]string `json:"metadata"`
}

type partitionedStats struct {
	topicStats
	Metadata   map[string]int        `json:"metadata"`
	Partitions map[string]topicStats `json:"partitions,omitempty"`
}

type internalStats struct {
	EntriesAddedCounter int64                  `json:"entriesAddedCounter"`
	NumberOfEntries     int64                  `json:"numberOfEntries"`
	TotalSize           int64                  `json:"totalSize"`
	LastConfirmedEntry  string                 `json:"lastConfirmedEntry"`
	State               string                 `json:"state"`
	Ledgers             []ledgerInfo           `json:"ledgers"`
	Cursors             map[string]cursorStats `json:"cursors"`
}

type ledgerInfo struct {
	LedgerID  int64 `json:"ledgerId"`
	Entries   int64 `json:"entries"`
	Size      int64 `json:"size"`
	Offloaded bool  `json:"offloaded"`
}

type cursorStats struct {
	MarkDeletePosition          string `json:"markDeletePosition"`
	ReadPosition                string `json:"readPosition"`
	IndividuallyDeletedMessages string `json:"individuallyDeletedMessages"`
	State                       string `json:"state"`
}

func (n *Node) statsRoutes(h routeFunc) {
	const base = "/admin/v2/persistent/{tenant}/{ns}/{topic}"
	h("GET "+base+"/stats", func(w http.ResponseWriter, r *http.Request) error {
		name, err := pathTopic(r)
		if err != nil {
			return err
		}
		p, err := n.adminPartition(r.Context(), name)
		if err != nil {
			return err
		}
		st, err := n.logStats(r.Context(), p)
		if err != nil {
			return err
		}
		return okJSON(w, st)
	})
	h("GET "+base+"/partitioned-stats", func(w http.ResponseWriter, r *http.Request) error {
		name, err := pathTopic(r)
		if err != nil {
			return err
		}
		t, err := n.Topic(r.Context(), name)
		if err != nil {
			return err
		}
		if t.Partitions == 0 {
			return errNotPartitioned(name)
		}
		per := r.URL.Query().Get("perPartition") != "false"
		out := partitionedStats{Metadata: map[string]int{"partitions": t.Partitions}}
		out.Subscriptions = map[string]subscriptionStats{}
		out.Replication = map[string]any{}
		if per {
			out.Partitions = map[string]topicStats{}
		}
		for _, p := range t.Logs() {
			st, err := n.logStats(r.Context(), p)
			if err != nil {
				return err
			}
			out.MsgInCounter += st.MsgInCounter
			out.StorageSize += st.StorageSize
			out.Publishers = append(out.Publishers, st.Publishers...)
			out.DeduplicationStatus = st.DeduplicationStatus
			out.TopicCreationTimeStamp = st.TopicCreationTimeStamp
			out.LastPublishTimestamp = max(out.LastPublishTimestamp, st.LastPublishTimestamp)
			for name, s := range st.Subscriptions {
				agg := out.Subscriptions[name]
				agg.Type, agg.IsDurable = s.Type, s.IsDurable
				agg.MsgBacklog += s.MsgBacklog
				agg.MsgBacklogNoDelayed += s.MsgBacklogNoDelayed
				agg.MsgDelayed += s.MsgDelayed
				agg.UnackedMessages += s.UnackedMessages
				agg.Consumers = append(agg.Consumers, s.Consumers...)
				out.Subscriptions[name] = agg
			}
			if per {
				out.Partitions[p.Name().String()] = st
			}
		}
		out.Publishers = nonNil(out.Publishers)
		return okJSON(w, out)
	})
	h("GET "+base+"/internalStats", func(w http.ResponseWriter, r *http.Request) error {
		name, err := pathTopic(r)
		if err != nil {
			return err
		}
		p, err := n.adminPartition(r.Context(), name)
		if err != nil {
			return err
		}
		st, err := n.logInternalStats(r.Context(), p)
		if err != nil {
			return err
		}
		return okJSON(w, st)
	})
}

// logStats describes one log.
func (n *Node) logStats(ctx context.Context, p protocols.Partition) (topicStats, error) {
	pid, err := n.pid(p)
	if err != nil {
		return topicStats{}, err
	}
	ps, err := n.store.PartitionStats(pid)
	if err != nil {
		return topicStats{}, mapStoreErr(err)
	}
	t, err := n.Topic(ctx, p.Topic)
	if err != nil {
		return topicStats{}, err
	}
	lim, err := n.limits(ctx, p.Topic)
	if err != nil {
		return topicStats{}, err
	}
	st := topicStats{
		MsgInCounter: ps.HighWatermark, StorageSize: ps.Bytes,
		Publishers: []publisherStats{}, Subscriptions: map[string]subscriptionStats{}, Replication: n.pulsarReplicationStats(p),
		DeduplicationStatus:    "Disabled",
		TopicCreationTimeStamp: t.Created.UnixMilli(), LastPublishTimestamp: ps.LastAppend,
	}
	if lim.dedup {
		st.DeduplicationStatus = "Enabled"
	}
	modes := []string{"Shared", "Exclusive", "WaitForExclusive", "ExclusiveWithFencing"}
	for _, l := range n.messaging().producers.list(pid) {
		st.Publishers = append(st.Publishers, publisherStats{ProducerName: l.name, AccessMode: modes[l.mode]})
	}
	subs, err := n.subscriptionSnapshots(ctx, pid)
	if err != nil {
		return topicStats{}, err
	}
	for _, s := range subs {
		ss := subscriptionStats{
			MsgBacklog: s.backlog, MsgBacklogNoDelayed: s.backlog - s.delayed, MsgDelayed: s.delayed,
			UnackedMessages: s.unacked, Type: s.typ, ActiveConsumerName: s.active, IsDurable: s.durable,
			Consumers: []consumerStats{},
		}
		for _, c := range s.consumers {
			ss.Consumers = append(ss.Consumers, consumerStats{
				ConsumerName: c.name, AvailablePermits: c.permits, UnackedMessages: c.unacked, Address: c.address, Metadata: c.metadata,
			})
		}
		st.Subscriptions[s.name] = ss
	}
	return st, nil
}

// logInternalStats describes one log as Pulsar's managed-ledger stats do:
// the log is one ledger (its incarnation) and positions are ledger:offset.
func (n *Node) logInternalStats(ctx context.Context, p protocols.Partition) (internalStats, error) {
	pid, err := n.pid(p)
	if err != nil {
		return internalStats{}, err
	}
	ps, err := n.store.PartitionStats(pid)
	if err != nil {
		return internalStats{}, mapStoreErr(err)
	}
	pos := func(off int64) string { return fmt.Sprintf("%d:%d", pid, off) }
	st := internalStats{
		EntriesAddedCounter: ps.Entries, NumberOfEntries: ps.Entries, TotalSize: ps.Bytes,
		LastConfirmedEntry: pos(ps.HighWatermark - 1), State: "LedgerOpened",
		Ledgers: []ledgerInfo{{LedgerID: int64(pid), Entries: ps.Entries, Size: ps.Bytes}},
		Cursors: map[string]cursorStats{},
	}
	subs, err := n.subscriptionSnapshots(ctx, pid)
	if err != nil {
		return internalStats{}, err
	}
	for _, s := range subs {
		var ranges []string
		for _, r := range s.acked {
			ranges = append(ranges, fmt.Sprintf("(%s..%s]", pos(r.From-1), pos(r.To-1)))
		}
		st.Cursors[s.name] = cursorStats{
			MarkDeletePosition:          pos(s.markDelete - 1),
			ReadPosition:                pos(s.readPos),
			IndividuallyDeletedMessages: "[" + strings.Join(ranges, ",") + "]",
			State:                       "Open",
		}
	}
	return st, nil
}
