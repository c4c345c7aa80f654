package proxy

import (
	"errors"
	"math"
	"net/http"
	"slices"
	"strconv"

	"github.com/ternmq/tern/protocols"
)

// Admin REST: subscriptions. On a partitioned topic every call applies to
// each partition.

func (n *Node) subscriptionRoutes(h routeFunc) {
	const base = "/admin/v2/persistent/{tenant}/{ns}/{topic}"
	h("GET "+base+"/subscriptions", func(w http.ResponseWriter, r *http.Request) error {
		logs, err := n.pathLogs(r)
		if err != nil {
			return err
		}
		var all []string
		for _, p := range logs {
			pid, err := n.pid(p)
			if err != nil {
				return err
			}
			names, err := n.subscriptionNames(pid)
			if err != nil {
				return err
			}
			for _, s := range names {
				if !slices.Contains(all, s) {
					all = append(all, s)
				}
			}
		}
		slices.Sort(all)
		return okJSON(w, nonNil(all))
	})
	h("PUT "+base+"/subscription/{sub}", func(w http.ResponseWriter, r *http.Request) error {
		logs, err := n.pathLogs(r)
		if err != nil {
			return err
		}
		id := messageID{LedgerID: math.MaxInt64, EntryID: math.MaxInt64}
		if err := readJSON(r, &id); err != nil {
			return err
		}
		for _, p := range logs {
			off, err := n.idOffset(p, id)
			if err != nil {
				return err
			}
			if err := n.createSubscription(p, r.PathValue("sub"), off); err != nil {
				return err
			}
		}
		return noContent(w)
	})
	h("DELETE "+base+"/subscription/{sub}", func(w http.ResponseWriter, r *http.Request) error {
		force := queryBool(r, "force")
		return n.eachSubscription(w, r, func(s *subscription) error { return s.unsubscribe(nil, force) })
	})
	h("POST "+base+"/subscription/{sub}/skip/{count}", func(w http.ResponseWriter, r *http.Request) error {
		count, err := strconv.ParseInt(r.PathValue("count"), 10, 64)
		if err != nil || count < 0 {
			return badRequest("skip count %q: want a non-negative number", r.PathValue("count"))
		}
		return n.eachSubscription(w, r, func(s *subscription) error { return s.skip(count) })
	})
	h("POST "+base+"/subscription/{sub}/skip_all", func(w http.ResponseWriter, r *http.Request) error {
		return n.eachSubscription(w, r, func(s *subscription) error { return s.skip(-1) })
	})
	h("POST "+base+"/subscription/{sub}/resetcursor/{timestamp}", func(w http.ResponseWriter, r *http.Request) error {
		ts, err := strconv.ParseInt(r.PathValue("timestamp"), 10, 64)
		if err != nil {
			return badRequest("timestamp %q: want Unix milliseconds", r.PathValue("timestamp"))
		}
		return n.eachSubscription(w, r, func(s *subscription) error {
			return s.seek(protocols.SeekTarget{ByTime: true, Time: ts})
		})
	})
	h("POST "+base+"/subscription/{sub}/resetcursor", func(w http.ResponseWriter, r *http.Request) error {
		id := messageID{LedgerID: -1, EntryID: -1}
		if err := readJSON(r, &id); err != nil {
			return err
		}
		return n.eachSubscription(w, r, func(s *subscription) error {
			off, err := n.idOffset(s.part, id)
			if err != nil {
				return err
			}
			return s.seek(protocols.SeekTarget{Offset: off})
		})
	})
}

// pathLogs resolves the topic of an admin path to its logs.
func (n *Node) pathLogs(r *http.Request) ([]protocols.Partition, error) {
	name, err := pathTopic(r)
	if err != nil {
		return nil, err
	}
	return n.adminLogs(r.Context(), name)
}

// eachSubscription runs f on the path's subscription on every log of the
// path's topic; it is not found only if no log has it.
func (n *Node) eachSubscription(w http.ResponseWriter, r *http.Request, f func(s *subscription) error) error {
	logs, err := n.pathLogs(r)
	if err != nil {
		return err
	}
	found := false
	for _, p := range logs {
		err := n.withSubscription(r.Context(), p, r.PathValue("sub"), f)
		if errors.Is(err, protocols.ErrSubscriptionNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		found = true
	}
	if !found {
		return protocols.ErrSubscriptionNotFound
	}
	return noContent(w)
}

// idOffset maps an admin message id to an offset of p: the latest and
// earliest sentinels to the log's ends, an id of this log to its entry,
// an id of another log to the end.
func (n *Node) idOffset(p protocols.Partition, id messageID) (int64, error) {
	pid, err := n.pid(p)
	if err != nil {
		return 0, err
	}
	start, hw, err := n.store.Offsets(pid)
	if err != nil {
		return 0, mapStoreErr(err)
	}
	switch {
	case id.LedgerID == -1 && id.EntryID == -1:
		return start, nil
	case id.LedgerID == int64(pid) && id.EntryID >= 0:
		return min(max(id.EntryID, start), hw), nil
	}
	return hw, nil
}
