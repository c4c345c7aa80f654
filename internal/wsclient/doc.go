// Package wsclient is the client side of Pulsar's WebSocket API v2, as tern
// serves it: a producer session that sends messages with a context and
// matches each {"result","messageId","context"} answer to its send, and a
// consumer or reader session that receives pushed messages and
// acknowledges them by id.
//
// Two parts of tern speak it: the CLI (tern produce and tern consume with
// --protocol ws) and the load generator (tern bench --protocol
// websocket). It is its own package because cmd/tern may hold no logic
// another package needs, and the load generator must not copy it. It
// knows the wire only; dialling, URLs and the wording of errors for a
// person stay with the callers.
package wsclient
