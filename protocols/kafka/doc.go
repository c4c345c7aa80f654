// Package kafka serves the Kafka wire protocol over the node's log, so that
// unchanged Kafka clients (franz-go, librdkafka, sarama, kafka-go, kcat)
// produce, consume and run consumer groups against tern.
//
// It owns the framing (one reader and one writer goroutine per connection,
// responses written in request order, several produce requests in flight so
// that their fsyncs are shared), one file per API key (named after the key,
// as 00_produce.go, each opening with the versions served and where the
// behaviour differs from Apache Kafka), and the classic consumer group
// coordinator (group.go: one goroutine per group owns its state machine).
// Request and response bodies are decoded and encoded with franz-go's kmsg.
//
// A Kafka topic "orders" is the topic persistent://<namespace>/orders of the
// configured Kafka namespace. A partitioned topic's partitions are Kafka's
// partitions; a non-partitioned topic is shown as one partition, index 0.
//
// The package must not touch storage directly: everything goes through the
// protocols.Broker it is given (plus protocols.ProducerIDs for idempotent
// producer ids). Committed group offsets are stored through the broker; group
// membership lives in memory, as clients rejoin after a restart anyway.
//
// Server.Metrics is a plain snapshot of its counters; the node exports it.
//
// Invariants: a malformed or oversized frame, an unknown API key or an
// unsupported version closes that connection with a log line and never
// reaches the log; every goroutine the server starts ends before Close
// returns.
package kafka
