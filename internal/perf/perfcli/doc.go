// Package perfcli is the command line of the load generator: the
// `produce`, `consume` and `e2e` commands with their flags, shared by
// `tern bench` and the bench module's tern-bench binary so that both take
// the same flags and print the same table.
//
// Each binary says which protocols it can drive itself (a Factory per
// protocol) and what to do with the others (Delegate): tern drives Kafka
// and hands Pulsar to tern-bench, which links the Pulsar client tern must
// not carry. It holds no workload logic; that is package perf.
package perfcli
