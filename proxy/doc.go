// Package proxy is the node: it opens storage, implements protocols.Broker
// for every front end, owns the topic and namespace registry, routing
// (which node serves a partition), retention, subscriptions and dispatch,
// and serves the HTTP side (health, metrics, admin REST).
//
// proxy wires the other packages together and adapts their plain metric
// snapshots to Prometheus. It must not speak a wire protocol itself: the
// Kafka, Pulsar and WebSocket front ends do that and reach the node only
// through the protocols.Broker contract.
package proxy
