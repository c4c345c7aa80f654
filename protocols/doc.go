// Package protocols is the contract between tern's wire protocols and the node.
//
// It owns the protocol-neutral model every front end speaks in: topic names
// (TopicName), the stored entry format (an Envelope followed by a RecordBatch
// v2, see entry.go and batch.go), the decoded Message, and the Broker
// interface that package proxy implements and that protocols/kafka,
// protocols/pulsar and protocols/websocket call.
//
// RecordBatch v2 appears here not as Kafka's wire format but as the log's own
// byte format, chosen in the design so that Kafka fetches need no re-encoding
// and every other protocol reads the same bytes. The codecs a batch may carry
// (gzip, snappy, lz4, zstd) are decoded here for the same reason.
//
// This package must not know any wire protocol's framing or semantics, must
// not import storage (pebble, localstore) or the node (proxy), and must not
// start goroutines. Everything in it is pure and safe for concurrent use.
package protocols
