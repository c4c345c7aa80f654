package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/ternmq/tern/localstore"
	"github.com/ternmq/tern/protocols"
)

// Subscription operations for the admin API: they act on a loaded
// subscription through its goroutine, loading a durable one from storage
// when needed, or on the stored cursor of an idle one.

// subscriptionNames lists a partition's subscriptions: durable cursors and
// loaded non-durable ones.
func (n *Node) subscriptionNames(pid localstore.PartitionID) ([]string, error) {
	cursors, err := n.store.Cursors(pid)
	if err != nil {
		return nil, mapStoreErr(err)
	}
	names := make([]string, 0, len(cursors))
	for name := range cursors {
		names = append(names, name)
	}
	for _, s := range n.messaging().subs.loaded(pid) {
		if !slices.Contains(names, s.name) {
			names = append(names, s.name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// withSubscription runs f on the subscription's goroutine, loading a
// durable subscription from storage if it is not loaded.
func (n *Node) withSubscription(ctx context.Context, p protocols.Partition, name string, f func(s *subscription) error) error {
	pid, err := n.pid(p)
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		s, err := n.messaging().subs.get(n, pid, p, name, nil)
		if err != nil {
			return err
		}
		err = s.call(ctx, func() error { return f(s) })
		if errors.Is(err, errSubGone) && attempt < 100 {
			continue
		}
		return err
	}
}

// createSubscription creates a durable subscription at offset off.
func (n *Node) createSubscription(p protocols.Partition, name string, off int64) error {
	pid, err := n.pid(p)
	if err != nil {
		return err
	}
	if n.messaging().subs.lookup(pid, name) != nil {
		return errSubscriptionExists(name)
	}
	if _, ok, err := n.store.LoadCursor(pid, name); err != nil {
		return mapStoreErr(err)
	} else if ok {
		return errSubscriptionExists(name)
	}
	start, hw, err := n.store.Offsets(pid)
	if err != nil {
		return mapStoreErr(err)
	}
	off = min(max(off, start), hw)
	return mapStoreErr(n.store.SaveCursor(pid, name, localstore.Cursor{MarkDelete: off, Props: map[string]string{}}))
}

func errSubscriptionExists(name string) error {
	return &httpError{status: http.StatusConflict, msg: fmt.Sprintf("subscription %q already exists", name)}
}

// subSnapshot describes a subscription for stats.
type subSnapshot struct {
	name       string
	typ        string
	durable    bool
	backlog    int64
	unacked    int64
	delayed    int64
	active     string
	markDelete int64
	readPos    int64
	acked      []localstore.Range
	consumers  []consumerSnapshot
}

type consumerSnapshot struct {
	name     string
	permits  int64
	unacked  int64
	address  string
	metadata map[string]string
}

// snapshot is taken on the subscription's goroutine.
func (s *subscription) snapshot() subSnapshot {
	ss := subSnapshot{
		name: s.name, typ: s.typ.String(), durable: s.durable, backlog: s.backlog(),
		markDelete: s.cursor.MarkDelete, readPos: s.readPos, acked: slices.Clone(s.cursor.Acked),
	}
	for _, d := range s.delayed {
		ss.delayed += d.to - d.from
	}
	if s.active != nil {
		ss.active = s.active.req.ConsumerName
	}
	for _, c := range s.consumers {
		u := c.pending.count()
		ss.unacked += u
		ss.consumers = append(ss.consumers, consumerSnapshot{
			name: c.req.ConsumerName, permits: c.permits, unacked: u, address: c.req.Address, metadata: c.req.Metadata,
		})
	}
	return ss
}

// subscriptionSnapshots describes every subscription of a partition.
func (n *Node) subscriptionSnapshots(ctx context.Context, pid localstore.PartitionID) ([]subSnapshot, error) {
	names, err := n.subscriptionNames(pid)
	if err != nil {
		return nil, err
	}
	start, hw, err := n.store.Offsets(pid)
	if err != nil {
		return nil, mapStoreErr(err)
	}
	var out []subSnapshot
	for _, name := range names {
		if s := n.messaging().subs.lookup(pid, name); s != nil {
			var ss subSnapshot
			if err := s.call(ctx, func() error { ss = s.snapshot(); return nil }); err == nil {
				out = append(out, ss)
				continue
			}
		}
		c, ok, err := n.store.LoadCursor(pid, name)
		if err != nil {
			return nil, mapStoreErr(err)
		}
		if !ok {
			continue
		}
		typ := c.Props[propType]
		if typ == "" {
			typ = protocols.SubExclusive.String()
		}
		out = append(out, subSnapshot{
			name: name, typ: typ, durable: true, backlog: cursorBacklog(&c, start, hw),
			markDelete: c.MarkDelete, readPos: max(c.MarkDelete, start), acked: c.Acked,
		})
	}
	return out, nil
}
