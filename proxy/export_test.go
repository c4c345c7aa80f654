package proxy

// CachedPartitionStates counts the partitions the node keeps dedup state
// for in memory: Kafka idempotence tables, Pulsar producer dedup states and
// replication dedup states.
func (n *Node) CachedPartitionStates() (kafka, pulsar, repl int) {
	n.kafka.mu.Lock()
	kafka = len(n.kafka.parts)
	n.kafka.mu.Unlock()
	d := &n.messaging().dedup
	d.mu.Lock()
	pulsar = len(d.parts)
	d.mu.Unlock()
	n.repl.dedup.Lock()
	repl = len(n.repl.dedup.m)
	n.repl.dedup.Unlock()
	return kafka, pulsar, repl
}

// LoadedSubscriptions is how many subscriptions the node counts loaded,
// which their shares of the entry caches' bytes follow.
func (n *Node) LoadedSubscriptions() int {
	return int(n.messaging().subs.loadedN.Load())
}

// SubscriptionReads counts the subscriptions' reads of new entries, and
// those into a buffer an earlier read had freed.
func (n *Node) SubscriptionReads() (reads, reused int64) {
	s := &n.messaging().subs
	return s.reads.Load(), s.bufReused.Load()
}
