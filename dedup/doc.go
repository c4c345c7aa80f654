// Package dedup holds tern's deduplication state machines (DESIGN §5): pure
// code that decides whether an append is new, a resend to answer with its
// original offsets, or out of order, and that encodes the state to persist
// with the entry.
//
// It exists so that the rules live in one place, testable without storage
// or sockets, and so that every protocol front end and the replicator get
// the same answers. It must not do I/O: the node (package proxy) reads the
// persisted state through localstore, runs the checks under the partition's
// append lock and writes the returned state in the same pebble batch as the
// entry, so a crash leaves both or neither. It must not know wire formats
// beyond the sequence fields a batch carries.
//
// Layer 2, Kafka idempotent producers (kafka.go): per (producer id,
// partition) the producer epoch and the last five batches' sequence ranges
// with their offsets. Its localstore.ProducerKey kind byte is KindKafka
// (0x4B, 'K'); the producer part of the key is the producer id as 8
// big-endian bytes (ProducerKey), and the value is EncodeState's format.
// Other layers use other kind bytes. A producer idle for DefaultExpiry (a
// day, as Kafka's producer.id.expiration.ms) is forgotten: a later append to
// the partition lists it in its Decision so the node deletes its state in
// that append's write.
//
// Layer 1, Pulsar producer names (pulsar.go): per (producer name,
// partition) the highest sequence id stored and the offsets of the entry
// that carried it. Its kind byte is PulsarKind ('p'); the producer part of
// the key is the name's bytes and the value is PulsarState's encoding.
//
// Layer 3, replication (repl.go): per (origin region, partition) the
// origin partition's incarnation and the origin offset just past the
// highest entry applied, kept under localstore.ReplHWMKey. Entries of one
// origin reach a region in origin order along every path (each sender
// reads its log in order and each log holds an origin's entries in origin
// order), so one high-water mark per origin is exact: an entry below it is
// a copy that arrived by another path or was resent after a reconnect or a
// restart, and is skipped without a write. The state is bounded by the
// number of origins, not by time or by message ids. Replicated entries skip
// layers 1 and 2: their producer state belongs to the origin region.
package dedup
