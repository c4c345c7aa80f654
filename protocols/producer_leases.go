package protocols

import (
	"context"
	"errors"
)

// Producers registers Pulsar-model producers on partitions. A Pulsar
// producer has a name unique on its partition (the broker picks one when the
// client does not), an access mode, and, when the namespace deduplicates, a
// last persisted sequence id the client resumes from. The node keeps the
// registry so that every front end (binary protocol, WebSocket) sees the
// same names and exclusivity.
type Producers interface {
	// OpenProducer registers a producer. Errors: ErrTopicNotFound,
	// ErrPartitionNotFound, ErrProducerBusy (the name is in use, or the
	// access mode conflicts with the producers already there),
	// ErrProducerFenced (an exclusive producer with fencing took over).
	// With WaitForExclusive the call returns at once; the lease's Ready
	// channel closes when the producer holds the partition alone.
	OpenProducer(ctx context.Context, p Partition, req ProducerRequest) (ProducerLease, error)
}

// ProducerAccessMode is how a producer shares its partition. The numbers
// are Pulsar's.
type ProducerAccessMode int8

// The access modes.
const (
	// AccessShared lets any number of producers write.
	AccessShared ProducerAccessMode = 0
	// AccessExclusive fails unless the producer is alone.
	AccessExclusive ProducerAccessMode = 1
	// AccessWaitForExclusive queues the producer until it can be alone.
	AccessWaitForExclusive ProducerAccessMode = 2
	// AccessExclusiveWithFencing evicts the producers already there.
	AccessExclusiveWithFencing ProducerAccessMode = 3
)

// ProducerRequest describes a producer.
type ProducerRequest struct {
	// Name is the producer's name; empty asks the node to assign one.
	Name string
	// Epoch grows each time the same producer reconnects. A request for a
	// name in use with a higher epoch replaces the holder (its client has
	// reconnected before the old connection was noticed gone); an equal or
	// lower one gets ErrProducerBusy.
	Epoch uint64
	// AccessMode defaults to AccessShared.
	AccessMode ProducerAccessMode
	// Address is the client's address, for stats.
	Address string
}

// ProducerLease is a registered producer.
type ProducerLease interface {
	// Name is the producer's (possibly assigned) name.
	Name() string
	// LastSequence is the highest sequence id persisted for this name on
	// the partition when deduplication is on, else -1.
	LastSequence() int64
	// Ready is closed once the producer may write: at once, or, with
	// AccessWaitForExclusive, when the others have gone.
	Ready() <-chan struct{}
	// Revoked is closed when the node takes the registration away (another
	// client took the name over, an exclusive producer fenced this one, the
	// topic was deleted); the front end then closes its producer.
	Revoked() <-chan struct{}
	// Close releases the name.
	Close()
}

// Errors of the producer registry.
var (
	ErrProducerBusy   = errors.New("protocols: producer busy")
	ErrProducerFenced = errors.New("protocols: producer fenced")
)
