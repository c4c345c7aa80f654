// Package pulsardriver is the perf.Driver for the Pulsar binary protocol,
// over the Apache Pulsar Go client. It lives in the bench module because
// that client is far too heavy for the tern binary.
//
// Settings follow pulsar-perf where the client's defaults differ: batching
// with a 1 ms delay (the --linger flag). Batches keep the client's default
// limits, 1000 messages and 128 KiB, which the Java client shares: what an
// unchanged application sends. (They once matched kgo's 1 MiB batch limit
// so both paths carried the same batches; since the node stores large
// entries in parts, both shapes run at the same rate.) Topics are
// partitioned topics created through the admin REST
// API; consumer index of count subscribes exclusively to its share of the
// partitions and acknowledges every message.
package pulsardriver
