package proxy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ternmq/tern/localstore"
	"github.com/ternmq/tern/protocols"
)

// retentionLoop applies each topic's effective retention on an interval.
func (n *Node) retentionLoop() {
	defer n.wg.Done()
	t := time.NewTicker(time.Duration(n.cfg.Retention.CheckInterval))
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
			n.enforceRetention(context.Background())
		}
	}
}

// enforceRetention runs one retention pass over every topic: retention
// removes old entries, and the message TTL acknowledges for every durable
// subscription what it has left unacknowledged for longer than the TTL.
func (n *Node) enforceRetention(ctx context.Context) {
	for _, t := range n.store.Topics("") {
		name, err := protocols.ParseTopicName(t.Name, "")
		if err != nil {
			continue
		}
		lim, err := n.limits(ctx, name)
		if err != nil {
			continue
		}
		for i, pid := range t.PIDs {
			p := protocols.Partition{Topic: name, Index: -1}
			if t.Partitions > 0 {
				p.Index = i
			}
			if lim.messageTTL > 0 {
				n.expireMessages(ctx, p, pid, lim.messageTTL)
			}
			n.enforceBacklogQuotas(ctx, p, pid, lim.backlogQuotas)
			removed, err := n.store.EnforceRetention(pid, lim.retention)
			if err != nil {
				n.log.Warn("retention failed", "topic", t.Name, "partition_id", pid, "err", err)
				continue
			}
			if removed > 0 {
				n.log.Debug("retention removed entries", "topic", t.Name, "partition_id", pid, "entries", removed)
			}
		}
	}
}

// expireMessages moves every subscription of a log past the entries
// published more than ttl ago, as Pulsar's message TTL does: what a
// subscription has not acknowledged by then counts as acknowledged. The log
// itself keeps them until retention removes them.
func (n *Node) expireMessages(ctx context.Context, p protocols.Partition, pid localstore.PartitionID, ttl time.Duration) {
	cursors, err := n.store.Cursors(pid)
	if err != nil || len(cursors) == 0 {
		return
	}
	cutoff := n.now().Add(-ttl).UnixMilli()
	off, _, err := n.store.LookupTime(pid, cutoff, localstore.AppendTime)
	if err != nil {
		n.log.Warn("message TTL: time lookup failed", "topic", p.Name().String(), "err", err)
		return
	}
	n.advanceSubscriptions(ctx, p, cursors, off, "message TTL")
}

// advanceSubscriptions acknowledges everything below off for each of a
// log's durable subscriptions that is behind it; why names the rule for the
// log.
func (n *Node) advanceSubscriptions(ctx context.Context, p protocols.Partition, cursors map[string]localstore.Cursor, off int64, why string) {
	for name, c := range cursors {
		if c.MarkDelete >= off {
			continue
		}
		err := n.withSubscription(ctx, p, name, func(s *subscription) error {
			if s.cursor.MarkDelete < off {
				s.ackUpTo(off)
				s.touched()
			}
			return nil
		})
		if err != nil && !errors.Is(err, protocols.ErrSubscriptionNotFound) {
			n.log.Warn(why+": moving a subscription failed", "topic", p.Name().String(), "subscription", name, "err", err)
		}
	}
}

// diskQuotaInterval is how often the store's size on disk is sampled for
// limits.disk_quota. Between samples the bytes appended since the last one
// count on top, so a burst does not overshoot the quota by a second's
// worth of writes.
const diskQuotaInterval = time.Second

// diskQuotaLoop samples the store's size on disk for checkDiskQuota.
func (n *Node) diskQuotaLoop() {
	defer n.wg.Done()
	t := time.NewTicker(diskQuotaInterval)
	defer t.Stop()
	over := false
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		used := n.sampleDisk()
		if now := used >= int64(n.cfg.Limits.DiskQuota); now != over {
			over = now
			if over {
				n.log.Warn("disk quota reached: produce is refused until retention frees space", "used_bytes", used, "quota_bytes", int64(n.cfg.Limits.DiskQuota))
			} else {
				n.log.Info("disk usage back under the quota: produce is accepted again", "used_bytes", used, "quota_bytes", int64(n.cfg.Limits.DiskQuota))
			}
		}
	}
}

// sampleDisk records the store's size on disk and returns it. Removed
// segments kept for reuse count as free: new segments are written into
// them before the disk gives any more.
func (n *Node) sampleDisk() int64 {
	appended := n.store.AppendedBytes()
	m := n.store.Metrics()
	used := int64(m.DiskBytes - m.SegmentPoolBytes)
	n.diskUsed.Store(used)
	n.diskAppended.Store(appended)
	return used
}

// checkDiskQuota refuses a client's write while the store is at or over
// limits.disk_quota. The error wraps ErrStorage, which Kafka clients see as
// the retriable KAFKA_STORAGE_ERROR and Pulsar clients as a persistence
// error, so producers retry while retention frees space and nothing
// acknowledged is ever dropped to make room. Replicated entries take the
// same path, so a full edge node refuses them and the sender keeps them
// until there is room. Tern's own system topics (replication policies) are
// exempt: they are small, and an operator must be able to change a policy
// on a full node.
func (n *Node) checkDiskQuota(t protocols.TopicName) error {
	q := int64(n.cfg.Limits.DiskQuota)
	if q <= 0 || (t.Tenant == "tern" && t.Namespace == "system") {
		return nil
	}
	used := n.diskUsed.Load() + max(n.store.AppendedBytes()-n.diskAppended.Load(), 0)
	if used >= q {
		return fmt.Errorf("%w: the node's log uses about %d bytes on disk, at its quota of %d (limits.disk_quota): raise the quota or shorten retention",
			protocols.ErrStorage, used, q)
	}
	return nil
}
