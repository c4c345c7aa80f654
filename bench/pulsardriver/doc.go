// Package pulsardriver is the perf.Driver for the Pulsar binary protocol,
// over the Apache Pulsar Go client. It lives in the bench module because
// that client is far too heavy for the tern binary.
//
// Settings follow pulsar-perf where the client's defaults differ: batching
// with a 1 ms delay (the --linger flag), batches of at most 1000 messages
// and 1 MiB (kgo's batch limit, so the Kafka and Pulsar paths carry the same
// batches). Topics are partitioned topics created through the admin REST
// API; consumer index of count subscribes exclusively to its share of the
// partitions and acknowledges every message.
package pulsardriver
