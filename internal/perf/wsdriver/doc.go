// Package wsdriver is the perf.Driver for Pulsar's WebSocket API, over the
// client the CLI uses (internal/wsclient): what `tern bench --protocol
// websocket` drives. Producers pipeline their sends up to a window and
// spread them over the partitions in turn; consumers read each partition
// of their share from the start through a reader session and acknowledge
// every message, as a WebSocket application must for the node to send more.
//
// The API carries each message as JSON with its payload in base64, so the
// client's cost per message is higher than a binary protocol's; the
// figures include it, as an application's would.
package wsdriver
