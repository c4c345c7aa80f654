// Package compare runs one workload against tern and its peers in one run
// and prints their figures side by side with ratios.
//
// Every measurement gets a fresh server process (tern-bench peer KIND)
// with an empty data directory, so no run inherits another's data,
// compactions or memory, and each server's RSS and CPU time are read from
// /proc. Rounds interleave the systems, rotating their order each round, so
// a change in the machine's other load touches every system alike; the
// tables report medians and ranges over rounds, and ratios both of the
// medians and per round. The load average is recorded at the start and
// end of every run.
//
// It holds no load-generation logic (package perf does that) and no
// server code (package peer starts the servers).
package compare
