// Package dedup holds tern's deduplication state machines (DESIGN §5):
// pure code that decides whether an entry about to be appended is new or a
// copy the log already holds, and that encodes the state to persist with
// the entry.
//
// It exists so the rules live in one place, testable without storage or
// sockets, and so every path into the log gets the same answers. It must
// not do I/O and keeps no clock of its own: package proxy loads the state
// through localstore, runs the check under the partition's append lock and
// writes the returned state in the same pebble batch as the entry, so a
// crash leaves both or neither. It must not know wire formats.
//
// Layer 3, replication (repl.go): per (origin region, partition) the
// origin partition's incarnation and the origin offset just past the
// highest entry applied, kept under localstore.ReplHWMKey. Entries of one
// origin reach a region in origin order along every path (each sender
// reads its log in order and each log holds an origin's entries in origin
// order), so one high-water mark per origin is exact: an entry below it is
// a copy that arrived by another path or was resent after a reconnect or a
// restart, and is skipped without a write. The state is bounded by the
// number of origins, not by time or by message ids.
package dedup
