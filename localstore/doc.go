// Package localstore is tern's storage: one pebble database per node holding
// every partition log's index, cursor, committed offset, producer state,
// replication cursor and metadata record, and segment files beside it
// holding the bytes of the entries.
//
// A partition log is a sequence of entries keyed by (partition id, base
// offset). An entry is written once, as a record in the current segment
// file (one write stream for every partition, see segments.go), and pebble
// keeps a pointer to it under the entry's key. Other entries (stores that
// compress or set InlineEntries, and data written before segments) are
// kept in pebble itself; one larger
// than 192 KiB continues in part keys right after its own, which a read
// joins (pebble reuses its flush buffers only for values up to 256 KiB).
//
// Appends assign offsets under the partition's append lock, write their
// pebble batch into the segment stream behind their entry (a batch
// record), and hand the batches, in offset order, to one committer, which
// writes the small records gathered since its last group (a large record
// is written by its appender), fdatasyncs the segments (a group's fdatasync
// may start while the one before is in progress) and applies the
// batches: concurrent appenders, to one partition or many, share that one
// fdatasync. An async append is acknowledged once its records are in the
// segment stream; its pointer still waits for that fdatasync, and the
// committer moves its high watermark. Pebble's WAL is fsynced for other
// durable writes (truncation, topic deletion) and on an interval; after a crash, Open applies the
// batch records pebble lost (replay.go). A pointer is applied only after
// its record's fdatasync. State that must agree with the log (producer
// sequences, replication high-water marks, cursor moves) rides in the
// same pebble batch as the entry, so a crash keeps both or neither. (With
// InlineEntries the committer is not used: batches go to pebble under the
// append lock and share its group commit.)
//
// Invariants:
//   - offsets in a partition are dense and never reused: a new entry's base
//     offset is the previous entry's end, across crashes and retention;
//   - the high watermark only covers durable entries (under either
//     durability with segments; under sync inline), and readers never see
//     past it;
//   - a pointer in pebble refers to a record made durable before it;
//   - the log start offset only moves forward; retention deletes whole
//     entries as key ranges, and a segment goes once no partition's
//     retained entries are in it;
//   - a cursor never points past the log.
//
// localstore knows the entry format (protocols.Entry) but not Kafka or Pulsar
// semantics; it must not speak a wire protocol, and it does not decide
// policy (retention limits and durability come from its callers).
package localstore
