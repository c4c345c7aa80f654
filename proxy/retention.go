package proxy

import (
	"context"
	"time"

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

// enforceRetention runs one retention pass over every topic.
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
		for _, pid := range t.PIDs {
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
