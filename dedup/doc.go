// Package dedup holds the deduplication state machines of DESIGN §5: Pulsar
// producer names (layer 1), Kafka idempotent producers (layer 2) and
// replication origins (layer 3).
//
// Each state machine is pure: it decides whether an entry about to be
// appended is new or a resend, and says what state to persist with it. It
// does no I/O and keeps no clock of its own; package proxy loads the state
// from localstore, calls the machine under the partition's append lock, and
// writes the encoded state in the same pebble batch as the entry, so that the
// log and the state always agree after a crash.
//
// Persisted state lives under localstore.ProducerKey(partition, kind, name)
// with one kind byte per layer, so the layers never collide:
//
//	'p'  Pulsar producer name -> PulsarState (this package's pulsar.go)
//
// The package must not import storage or the node, and must not speak a wire
// protocol.
package dedup
