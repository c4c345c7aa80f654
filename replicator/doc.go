// Package replicator links regions: it carries log entries between nodes of different regions
// over QUIC and decides, from replication policies, what goes where, keeping durable cursors and
// a status that says the truth about lag.
//
// # Transport
//
// The lower half (Transport, New, Config) owns:
//   - one QUIC endpoint per node (one UDP socket that listens and dials), mutual TLS 1.3 with
//     ALPN tern-repl/1 against the mesh CA, or a dev mode deriving the CA from a shared secret;
//   - one link per remote node, at most one connection per link (a deterministic rule settles
//     the race when both nodes dial each other), keep-alive, heartbeats on a control stream,
//     reconnect with jittered exponential backoff, and a stats snapshot per link;
//   - the link protocol: a versioned HELLO exchange, then one stream per replicated partition
//     carrying OPEN, ENTRIES, ACK, CREDIT and ERROR frames, with credit-based flow control.
//
// The transport does not look inside entries and does not touch storage.
//
// # Replication
//
// The upper half (Engine, EngineConfig) runs in a node (its Host) and owns:
//   - policies (policy.go, policy_store.go): records in the system topic SystemTopic saying which
//     regions a namespace's or a topic's data lives in, where a region added later starts
//     (earliest or latest) and the topology (full mesh, or hub and spoke). Each record carries a
//     version for compare-and-set and a hybrid logical clock stamp; every node folds every
//     record it sees by last-writer-wins on (stamp, writing region), so all converge without
//     cross-region consensus. The system topic itself replicates to every region the mesh knows.
//   - senders (sender.go): one per (local partition, destination region) a policy calls for. A
//     sender reads its log from the durable replication cursor (localstore.ReplCursorKey), keeps
//     the entries the route admits, stamps their envelope (origin region, origin offset and
//     incarnation, origin append time, visited regions) and sends them on one stream to the
//     receiving node of the region, moving the cursor only on the receiver's ACK. Entries the
//     route leaves out move the cursor too, once everything sent before them is acknowledged.
//   - routing (route.go): an entry goes to region R only if R is not its origin and not among
//     the regions it visited, whatever the topology; the topology then narrows what is sent (a
//     full mesh sends only what was produced locally; a spoke sends to the hub only; the hub
//     forwards). A producer's replicate_to (protocols.AttrReplicateTo) narrows it further.
//   - receivers (receiver.go): the Handler for streams peers open. The topic is created with the
//     sender's partition count when missing (a different count refuses the stream with advice);
//     entries are appended through the Host's produce path, where replication dedup (layer 3,
//     package dedup) drops copies; a batch is acknowledged once all of it is durable here.
//   - status (status.go): per (partition, destination) the lag in messages and seconds computed
//     from the log and the cursor at snapshot time, the last transfer, the state (a stream with a
//     backlog and no acknowledgement for EngineConfig.StallAfter is "stalled", whatever its link
//     says) and the last error; per inbound stream the entries applied and the duplicates dropped.
//
// Membership comes from the regions package through the Membership interface: the engine tells
// the transport about every node of another region and picks each region's receiving node. The
// engine must not decide membership, speak a client protocol, or write a log other than through
// its Host.
//
// Invariants: a cursor never passes an entry the destination has not made durable or the route
// did not leave out; a malformed frame on a partition stream closes that stream only (a malformed
// control frame closes the connection, which is then redialed); a batch that does not decode is
// refused whole before anything of it is written; Close returns only after every goroutine the
// package started has returned.
//
// SeverableConn is exported, not test-only, because the in-process test cluster used by other
// packages' tests needs to partition nodes on loopback the same way this package's tests do.
package replicator
