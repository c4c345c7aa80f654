package proxy

import (
	"context"
	"fmt"
	"time"

	"github.com/ternmq/tern/localstore"
	"github.com/ternmq/tern/protocols"
)

// Backlog quotas are Pulsar's: a namespace bounds the backlog of its topics'
// slowest durable subscription by size (destination_storage) or by the age
// of its oldest unacknowledged message (message_age), and says what happens
// past the bound: producers are refused (producer_exception), held
// (producer_request_hold: Pulsar clients keep their messages and retry), or
// the slowest subscriptions lose their oldest backlog
// (consumer_backlog_eviction). As in Pulsar, the check runs on an interval
// (here the retention pass), so a log may run over a quota by what arrives
// between passes. The backlog's size is estimated from the log's average
// bytes per message, as Pulsar estimates it from ledger sizes.

// checkBacklogQuota returns the error that refuses producers of a log while
// it is over a quota that blocks them.
func (n *Node) checkBacklogQuota(pid localstore.PartitionID) error {
	if v, ok := n.quotaBlocked.Load(pid); ok {
		return v.(*protocols.BacklogQuotaError)
	}
	return nil
}

// enforceBacklogQuotas measures one log's backlog against the namespace's
// quotas: it evicts where the policy says so and sets or clears the block
// that refuses producers.
func (n *Node) enforceBacklogQuotas(ctx context.Context, p protocols.Partition, pid localstore.PartitionID, quotas map[string]BacklogQuota) {
	var block *protocols.BacklogQuotaError
	defer func() {
		if block == nil {
			if _, was := n.quotaBlocked.LoadAndDelete(pid); was {
				n.log.Info("backlog back under its quota: producers are accepted again", "topic", p.Name().String())
			}
			return
		}
		if _, was := n.quotaBlocked.Swap(pid, block); !was {
			n.log.Warn("backlog over its quota: producers are refused", "topic", p.Name().String(), "reason", block.Reason)
		}
	}()
	if len(quotas) == 0 {
		return
	}
	cursors, err := n.store.Cursors(pid)
	if err != nil || len(cursors) == 0 {
		return
	}
	st, err := n.store.PartitionStats(pid)
	if err != nil || st.HighWatermark <= st.Start {
		return
	}
	slowest := st.HighWatermark
	for _, c := range cursors {
		slowest = min(slowest, c.MarkDelete)
	}
	slowest = max(slowest, st.Start)
	backlog := st.HighWatermark - slowest
	if backlog == 0 {
		return
	}
	perMessage := float64(st.Bytes) / float64(st.HighWatermark-st.Start)

	for _, typ := range []string{"destination_storage", "message_age"} {
		q, ok := quotas[typ]
		if !ok {
			continue
		}
		// over is where the slowest subscription would have to be for the
		// log to be within this quota; the quota holds when it is there.
		var over int64
		var reason string
		switch typ {
		case "destination_storage":
			if q.LimitSize <= 0 {
				continue
			}
			size := int64(float64(backlog) * perMessage)
			if size <= q.LimitSize {
				continue
			}
			over = st.HighWatermark - int64(float64(q.LimitSize)/perMessage)
			reason = fmt.Sprintf("%s holds a backlog of about %d bytes (%d messages) for its slowest subscription; the namespace's destination_storage quota is %d bytes: acknowledge, raise the quota or choose consumer_backlog_eviction",
				p.Name(), size, backlog, q.LimitSize)
		case "message_age":
			if q.LimitTime <= 0 {
				continue
			}
			cutoff := n.now().Add(-time.Duration(q.LimitTime) * time.Second).UnixMilli()
			off, _, err := n.store.LookupTime(pid, cutoff, localstore.AppendTime)
			if err != nil || off <= slowest {
				continue
			}
			over = off
			reason = fmt.Sprintf("%s holds unacknowledged messages older than the namespace's message_age quota of %ds: acknowledge, raise the quota or choose consumer_backlog_eviction",
				p.Name(), q.LimitTime)
		}
		switch q.Policy {
		case "consumer_backlog_eviction":
			n.advanceSubscriptions(ctx, p, cursors, min(over, st.HighWatermark), "backlog quota eviction")
		case "producer_request_hold":
			if block == nil {
				block = &protocols.BacklogQuotaError{Hold: true, Reason: reason}
			}
		default: // producer_exception
			block = &protocols.BacklogQuotaError{Reason: reason}
		}
	}
}
