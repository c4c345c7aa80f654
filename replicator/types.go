package replicator

import (
	"errors"
	"fmt"
	"math"
)

// Peer is a remote node as the membership layer knows it. The transport keeps one link per
// peer name and dials Addr (the node's advertised `quic` address).
type Peer struct {
	Name   string
	Region string
	// Addr is the peer's mesh UDP address, host:port. Empty means "do not dial": the link waits
	// for the peer to connect (a node behind NAT that can only dial out).
	Addr string
}

// Entry is one log entry in flight. The transport does not look inside Value: it is the storage
// entry (envelope plus record batch) that already carries its origin region, origin offset and
// the regions it visited.
type Entry struct {
	// Offset is the position of the entry's first message in the sender's log (the position
	// space OPEN's StartOffset and ACK use). Entries on a stream strictly increase and do not
	// overlap, which the receiver checks.
	Offset int64
	// Count is the number of messages the entry covers, [Offset, Offset+Count); at least 1.
	Count int32
	// Value is the opaque entry.
	Value []byte
}

// End is the offset just past the entry.
func (e Entry) End() int64 { return e.Offset + int64(e.Count) }

// OpenRequest is what a sender says when it opens a partition stream; the receiver decides from
// it whether it can take the stream.
type OpenRequest struct {
	// Topic is the full topic name (persistent://tenant/namespace/name).
	Topic string
	// Partition is the partition number, 0 <= Partition < PartitionCount (0 for a
	// non-partitioned topic).
	Partition int32
	// PartitionCount is the sender's partition count, which must equal the receiver's; 0 means a
	// non-partitioned topic.
	PartitionCount int32
	// DestRegion is the region the sender believes the receiving node serves.
	DestRegion string
	// StartOffset is the position of the first entry the sender will send (the sender's
	// replication cursor for this destination).
	StartOffset int64
	// Extra is opaque to the transport (at most 4 KiB), for the replication logic's own fields.
	Extra []byte
}

// Validate reports why a request cannot be sent (or was refused when received).
func (r OpenRequest) Validate() error {
	var errs []error
	if r.Topic == "" || len(r.Topic) > maxTopicLength {
		errs = append(errs, fmt.Errorf("topic must be 1 to %d bytes, got %d", maxTopicLength, len(r.Topic)))
	}
	switch {
	case r.PartitionCount < 0 || r.Partition < 0:
		errs = append(errs, fmt.Errorf("partition %d of %d is negative", r.Partition, r.PartitionCount))
	case r.PartitionCount == 0 && r.Partition != 0:
		errs = append(errs, fmt.Errorf("partition %d on a non-partitioned topic (partition count 0)", r.Partition))
	case r.PartitionCount > 0 && r.Partition >= r.PartitionCount:
		errs = append(errs, fmt.Errorf("partition %d is not below partition count %d", r.Partition, r.PartitionCount))
	}
	if r.DestRegion == "" || len(r.DestRegion) > maxNameLength {
		errs = append(errs, fmt.Errorf("destination region must be 1 to %d bytes, got %d", maxNameLength, len(r.DestRegion)))
	}
	if r.StartOffset < 0 {
		errs = append(errs, fmt.Errorf("start offset %d is negative", r.StartOffset))
	}
	if len(r.Extra) > maxExtraLength {
		errs = append(errs, fmt.Errorf("extra is %d bytes, at most %d", len(r.Extra), maxExtraLength))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidOpen, errors.Join(errs...))
	}
	return nil
}

// Credit is an allowance a receiver grants a sender: how many more entry value bytes and entries
// it may send. Grants add up; sending consumes them.
type Credit struct {
	Bytes   int64
	Entries int64
}

func (c Credit) add(o Credit) Credit {
	return Credit{Bytes: satAdd(c.Bytes, o.Bytes), Entries: satAdd(c.Entries, o.Entries)}
}

func satAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// Batch is one run of entries as received. Values alias a buffer the batch owns: the receiver
// may keep them.
type Batch struct {
	Entries []Entry
	// Bytes is the sum of the value lengths, the byte credit the batch consumed.
	Bytes int64
}

// Credit is the allowance the batch consumed, what a receiver grants back once it has made the
// batch durable to keep the sender's window constant.
func (b Batch) Credit() Credit { return Credit{Bytes: b.Bytes, Entries: int64(len(b.Entries))} }

// End is the offset just past the batch's last entry.
func (b Batch) End() int64 {
	if len(b.Entries) == 0 {
		return 0
	}
	return b.Entries[len(b.Entries)-1].End()
}
