// Package replicator links regions: it carries log entries between nodes of different regions
// over QUIC and, above that transport, will hold the replication cursors, policies and lag.
//
// This part is the transport. It owns:
//   - one QUIC endpoint per node (one UDP socket that listens and dials), mutual TLS 1.3 with
//     ALPN tern-repl/1 against the mesh CA, or a dev mode deriving the CA from a shared secret;
//   - one link per remote node, at most one connection per link (a deterministic rule settles
//     the race when both nodes dial each other), keep-alive, heartbeats on a control stream,
//     reconnect with jittered exponential backoff, and a stats snapshot per link;
//   - the link protocol: a versioned HELLO exchange, then one stream per replicated partition
//     carrying OPEN, ENTRIES, ACK, CREDIT and ERROR frames, with credit-based flow control.
//
// It must not decide membership (peers and their addresses come from the regions package
// through AddPeer/RemovePeer), look inside entries (values are opaque storage entries that
// carry their own origin and visited regions), or touch storage: durability, dedup and cursors
// belong to the replication logic that calls OpenPartitionStream on the sending side and
// implements Handler on the receiving side.
//
// Invariants: a malformed frame on a partition stream closes that stream only (the control
// stream is the liveness channel, so a malformed control frame closes the connection, which is
// then redialed); a frame's declared length is checked before anything is allocated for it; a
// sender never has more entry bytes or entries outstanding than the receiver credited, and the
// receiver fails a stream that overruns its credit; Close returns only after every goroutine
// the transport started, including Handler calls, has returned.
//
// SeverableConn is exported, not test-only, because the in-process test cluster used by other
// packages' tests needs to partition nodes on loopback the same way this package's tests do.
package replicator
