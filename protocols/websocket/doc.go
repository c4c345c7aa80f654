// Package websocket serves Pulsar's WebSocket API v2 on the node's HTTP
// port: producer, consumer and reader sessions whose messages are JSON,
// for clients that have no Pulsar library (browsers, scripts, tern's own
// web console).
//
// It owns the API's wire: paths and query parameters, the JSON messages
// (payloads in base64, message ids as base64 of Pulsar's MessageIdData),
// flow control, close codes and the HTTP status of a refused upgrade. Every
// decision about messages is the node's: sessions reach it only through
// protocols.Messaging, the contract the Pulsar binary protocol uses, so a
// WebSocket producer has a name, sequence ids and deduplication as a
// binary-protocol producer has, and WebSocket consumers share
// subscriptions, cursors, dispatch and redelivery counts with Pulsar
// clients. The package must not touch storage and must not invent
// semantics of its own: where Pulsar's WebSocket service behaves in a
// particular way (what a reader acknowledges, the default subscription
// position, how a producer routes to partitions), this package does the
// same, and each file says where it departs and why.
//
// Departures from Pulsar, each forced or a fix of a known bug:
//
//   - Close codes: Pulsar's error numbers 1 to 8 are below 1000, which no
//     WebSocket endpoint may send; they go out as 4001 to 4008 (CloseCode).
//   - Flow control counts messages, not acks, so ack timeouts and
//     redeliveries cannot leak slots (flow.go; Pulsar #2731).
//   - Message ids name each message of a batch, so acks of batched
//     messages work without a cache (consumer.go; Pulsar #12530).
//
// Per session one goroutine reads and handles client messages in order,
// one writes (producers: answers in message order; consumers: the pump,
// which also talks to the node's consumers), and one pings. Server.Close
// ends every session and waits for its goroutines.
package websocket
