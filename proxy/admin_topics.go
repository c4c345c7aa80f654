package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/ternmq/tern/localstore"
	"github.com/ternmq/tern/protocols"
)

// Admin REST: topics, partitions, lookup and last message id.

func (n *Node) topicRoutes(h routeFunc) {
	const base = "/admin/v2/persistent/{tenant}/{ns}"
	h("GET "+base, func(w http.ResponseWriter, r *http.Request) error {
		ns, err := n.existingNamespace(r)
		if err != nil {
			return err
		}
		names, err := n.topicNames(r, ns, false)
		if err != nil {
			return err
		}
		return okJSON(w, names)
	})
	h("GET "+base+"/partitioned", func(w http.ResponseWriter, r *http.Request) error {
		ns, err := n.existingNamespace(r)
		if err != nil {
			return err
		}
		names, err := n.topicNames(r, ns, true)
		if err != nil {
			return err
		}
		return okJSON(w, names)
	})
	// Every topic is persistent; listings of the other domain are empty.
	for _, suffix := range []string{"", "/partitioned"} {
		h("GET /admin/v2/non-persistent/{tenant}/{ns}"+suffix, func(w http.ResponseWriter, r *http.Request) error {
			if _, err := n.existingNamespace(r); err != nil {
				return err
			}
			return okJSON(w, []string{})
		})
	}
	h("PUT "+base+"/{topic}", func(w http.ResponseWriter, r *http.Request) error {
		name, err := pathTopic(r)
		if err != nil {
			return err
		}
		if _, err := n.CreateTopic(r.Context(), name, 0, nil); err != nil {
			return err
		}
		return noContent(w)
	})
	h("DELETE "+base+"/{topic}", func(w http.ResponseWriter, r *http.Request) error {
		name, err := pathTopic(r)
		if err != nil {
			return err
		}
		t, err := n.Topic(r.Context(), name)
		if err != nil {
			return err
		}
		if t.Partitions > 0 {
			return &httpError{status: http.StatusConflict, msg: fmt.Sprintf("%s is a partitioned topic; delete it through its /partitions path", name)}
		}
		return n.adminDeleteTopic(w, r, t)
	})
	h("PUT "+base+"/{topic}/partitions", func(w http.ResponseWriter, r *http.Request) error {
		name, err := pathTopic(r)
		if err != nil {
			return err
		}
		count, err := readPartitionCount(r)
		if err != nil {
			return err
		}
		if count < 1 {
			return badRequest("a partitioned topic needs at least one partition, not %d", count)
		}
		if _, err := n.CreateTopic(r.Context(), name, count, nil); err != nil {
			return err
		}
		return noContent(w)
	})
	h("POST "+base+"/{topic}/partitions", func(w http.ResponseWriter, r *http.Request) error {
		name, err := pathTopic(r)
		if err != nil {
			return err
		}
		count, err := readPartitionCount(r)
		if err != nil {
			return err
		}
		if err := n.SetPartitions(r.Context(), name, count); err != nil {
			return err
		}
		return noContent(w)
	})
	h("GET "+base+"/{topic}/partitions", func(w http.ResponseWriter, r *http.Request) error {
		name, err := pathTopic(r)
		if err != nil {
			return err
		}
		t, err := n.Topic(r.Context(), name)
		if errors.Is(err, protocols.ErrTopicNotFound) {
			// Pulsar answers 0 for a topic that auto-creation would create
			// non-partitioned.
			return okJSON(w, map[string]int{"partitions": 0})
		}
		if err != nil {
			return err
		}
		return okJSON(w, map[string]int{"partitions": t.Partitions})
	})
	h("DELETE "+base+"/{topic}/partitions", func(w http.ResponseWriter, r *http.Request) error {
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
		return n.adminDeleteTopic(w, r, t)
	})
	h("GET "+base+"/{topic}/lastMessageId", func(w http.ResponseWriter, r *http.Request) error {
		name, err := pathTopic(r)
		if err != nil {
			return err
		}
		p, err := n.adminPartition(r.Context(), name)
		if err != nil {
			return err
		}
		id, err := n.lastMessageID(r.Context(), p)
		if err != nil {
			return err
		}
		return okJSON(w, id)
	})
	h("GET /lookup/v2/topic/persistent/{tenant}/{ns}/{topic}", func(w http.ResponseWriter, r *http.Request) error {
		name, err := pathTopic(r)
		if err != nil {
			return err
		}
		owner := n.LocalNode()
		if p, err := n.adminPartition(r.Context(), name); err == nil {
			if owner, err = n.Owner(r.Context(), p); err != nil {
				return err
			}
		}
		return okJSON(w, map[string]string{
			"brokerUrl": "pulsar://" + owner.PulsarAddr, "brokerUrlTls": "",
			"httpUrl": "http://" + owner.HTTPAddr, "httpUrlTls": "",
		})
	})
	n.statsRoutes(h)
}

// existingNamespace reads the namespace from the path and checks it exists.
func (n *Node) existingNamespace(r *http.Request) (protocols.NamespaceName, error) {
	ns, err := pathNamespace(r)
	if err != nil {
		return ns, err
	}
	_, err = n.NamespacePolicies(r.Context(), ns)
	return ns, err
}

// readPartitionCount accepts a bare number (pulsar-admin) or an object with
// "partitions" (pulsaradmin).
func readPartitionCount(r *http.Request) (int, error) {
	var raw json.RawMessage
	if err := readJSON(r, &raw); err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(raw))
	if n, err := strconv.Atoi(s); err == nil {
		return n, nil
	}
	var obj struct {
		Partitions *int `json:"partitions"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Partitions == nil {
		return 0, badRequest("the body must be the partition count, as a number or {\"partitions\": N}")
	}
	return *obj.Partitions, nil
}

// adminDeleteTopic deletes a topic unless it has producers or consumers
// attached and force is not set.
func (n *Node) adminDeleteTopic(w http.ResponseWriter, r *http.Request, t protocols.TopicInfo) error {
	if !queryBool(r, "force") {
		for _, p := range t.Logs() {
			pid, err := n.pid(p)
			if err != nil {
				return err
			}
			if busy := n.attached(pid); busy != "" {
				return &httpError{status: http.StatusPreconditionFailed,
					msg: fmt.Sprintf("%s has %s attached; close them or delete with force=true", p.Name(), busy)}
			}
		}
	}
	if err := n.DeleteTopic(r.Context(), t.Name); err != nil {
		return err
	}
	return noContent(w)
}

// attached describes the producers and consumers on a partition, or "".
func (n *Node) attached(pid localstore.PartitionID) string {
	m := n.messaging()
	producers := len(m.producers.list(pid))
	consumers := 0
	for _, s := range m.subs.loaded(pid) {
		var c int
		if s.call(context.Background(), func() error { c = len(s.consumers); return nil }) == nil {
			consumers += c
		}
	}
	if producers == 0 && consumers == 0 {
		return ""
	}
	return fmt.Sprintf("%d producers and %d consumers", producers, consumers)
}

// adminPartition resolves a topic name from an admin path to one log: a
// non-partitioned topic or one partition of a partitioned topic.
func (n *Node) adminPartition(ctx context.Context, name protocols.TopicName) (protocols.Partition, error) {
	if base, i := name.PartitionIndex(); i >= 0 {
		if t, err := n.Topic(ctx, base); err == nil && t.Partitions > i {
			return protocols.Partition{Topic: base, Index: i}, nil
		}
	}
	t, err := n.Topic(ctx, name)
	if err != nil {
		return protocols.Partition{}, err
	}
	if t.Partitions > 0 {
		return protocols.Partition{}, &httpError{status: http.StatusMethodNotAllowed,
			msg: fmt.Sprintf("%s is partitioned; name one of its partitions (%s)", name, name.Partition(0))}
	}
	return protocols.Partition{Topic: name, Index: -1}, nil
}

// adminLogs resolves a topic name to every log it covers: all partitions
// of a partitioned topic, or the one log otherwise.
func (n *Node) adminLogs(ctx context.Context, name protocols.TopicName) ([]protocols.Partition, error) {
	if base, i := name.PartitionIndex(); i >= 0 {
		if t, err := n.Topic(ctx, base); err == nil && t.Partitions > i {
			return []protocols.Partition{{Topic: base, Index: i}}, nil
		}
	}
	t, err := n.Topic(ctx, name)
	if err != nil {
		return nil, err
	}
	return t.Logs(), nil
}

// messageID is Pulsar's admin JSON message id.
type messageID struct {
	LedgerID       int64 `json:"ledgerId"`
	EntryID        int64 `json:"entryId"`
	PartitionIndex int   `json:"partitionIndex"`
	BatchIndex     int   `json:"batchIndex"`
}

// lastMessageID is the id of a log's last message (entry id -1 when the
// log is empty).
func (n *Node) lastMessageID(ctx context.Context, p protocols.Partition) (messageID, error) {
	pid, err := n.pid(p)
	if err != nil {
		return messageID{}, err
	}
	id := messageID{LedgerID: int64(pid), EntryID: -1, PartitionIndex: p.Index, BatchIndex: -1}
	start, hw, err := n.store.Offsets(pid)
	if err != nil {
		return id, mapStoreErr(err)
	}
	if hw > start {
		if base, count, ok := n.entryAt(pid, hw-1); ok {
			id.EntryID, id.BatchIndex = base, int(count-1)
		}
	}
	return id, nil
}
