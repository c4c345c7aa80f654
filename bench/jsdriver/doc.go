// Package jsdriver is the perf.Driver for NATS JetStream, over nats.go's
// jetstream package: the peer tern is compared with.
//
// A topic partition is a stream of its own (stream TOPIC-P on subject
// TOPIC.P, file storage), the closest JetStream has to a Kafka partition: each
// stream has its own store and lock. Producers publish asynchronously
// (PublishAsync, at most 4000 unacknowledged, nats.go's default) and
// consumers are ordered consumers (no acknowledgements, like a Kafka
// consumer outside a group). It must stay a thin adapter.
package jsdriver
