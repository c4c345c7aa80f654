// Package perf is the load generator behind `tern bench` and the bench
// module's comparison runner: the workloads (produce, consume, end to end),
// rate pacing, HDR latency histograms, the progress line each second, and
// the final table and JSON.
//
// It knows no wire protocol. A Driver (Kafka here, Pulsar, WebSocket and
// NATS JetStream in the bench module) turns Send and a consume callback
// into client calls, so every system is measured by the same loop with
// the same clocks and the same payloads; only the client library differs.
//
// It must not import the broker side (proxy, localstore, protocols): the
// tern binary links it as a client, and the comparison runner starts the
// systems it measures in processes of their own.
//
// How figures are taken: a message's payload starts with its send time
// (Unix nanoseconds, 8 bytes), so a consumer anywhere on the machine can
// measure end-to-end latency; the rest is random bytes, so compression and
// deduplication of payloads gain nothing. With a target rate, publish
// latency is measured from the time the pacer meant to send the message,
// not the time it was sent, so a stalled system is not flattered
// (coordinated omission); with no target rate it is measured from the
// Send call, and includes the time a message waits in the client's buffer.
// Counts and latencies cover the window after the warm-up only; end to
// end, the window waits (at most a second warm-up) until the consumers
// are less than 100 ms behind the producers: they have received what was
// acknowledged, and at a target rate what was due, 100 ms before. A timer
// of the load generator's own, set every 5 ms, reports how late it fired
// in the window: a stall of the machine shows there as well as in the
// latencies, a stall of the system under test only in the latencies.
package perf
