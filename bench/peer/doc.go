// Package peer starts the systems the comparison runner measures, one per
// process: a tern node (the same proxy.New that `tern serve` runs),
// franz-go's kfake (an in-memory Kafka) and an embedded NATS server with
// JetStream file storage.
//
// Each runs in a process of its own (tern-bench peer KIND), so every
// system's RSS and CPU time can be read from /proc and none shares a Go
// runtime, heap or garbage collector with the load generator or with
// another system. It must not generate load or judge results.
package peer
