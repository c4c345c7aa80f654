// Command tern-bench is tern's companion load generator, built from the
// bench module so that heavy clients stay out of the tern binary.
//
//	tern-bench produce|consume|e2e --protocol kafka|pulsar|jetstream ...
//	tern-bench compare [--systems tern/kafka,kfake,jetstream,...]
//	tern-bench peer tern|kfake|jetstream --dir DIR   (used by compare)
//
// `tern bench --protocol pulsar` runs it with the same arguments. It only
// parses flags and calls packages perf, compare and peer.
package main
