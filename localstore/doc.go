// Package localstore is tern's storage: one pebble database per node holding
// every partition log, cursor, committed offset, producer state, replication
// cursor and metadata record.
//
// A partition log is a sequence of entries keyed by (partition id, base
// offset); an entry larger than 192 KiB continues in part keys right after
// its own, which a read joins (pebble reuses its flush buffers only for
// values up to 256 KiB). Appends assign offsets under the partition's append lock and
// submit the pebble batch in offset order, then wait for the WAL fsync
// outside the lock, so concurrent appenders to one partition share fsyncs
// through pebble's group commit. State that must agree with the log
// (producer sequences, replication high-water marks, cursor moves) rides in
// the same pebble batch as the entry, so a crash keeps both or neither.
//
// Invariants:
//   - offsets in a partition are dense and never reused: a new entry's base
//     offset is the previous entry's end, across crashes and retention;
//   - the high watermark only covers durable entries (under sync
//     durability), and readers never see past it;
//   - the log start offset only moves forward; retention deletes whole
//     entries as key ranges;
//   - a cursor never points past the log.
//
// localstore knows the entry format (protocols.Entry) but not Kafka or Pulsar
// semantics; it must not speak a wire protocol, and it does not decide
// policy (retention limits and durability come from its callers).
package localstore
