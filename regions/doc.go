// Package regions owns mesh membership: which nodes exist, which region
// and rack each serves, whether each is alive, suspect, failed or gone,
// where its services listen, and how far apart the regions are. It wraps
// hashicorp/serf (one gossip pool for the whole mesh, WAN timings) and
// turns serf's events into a region directory other packages read and
// subscribe to.
//
// It must not carry data, decide what replicates where, or touch storage:
// the replicator and the proxy consume the directory and make those
// decisions. It exists so that exactly one component talks to serf, and
// every other one gets typed, ordered, exactly-once membership changes
// instead of serf's raw event channel.
//
// # Shape
//
// New validates a Config, binds the gossip port (UDP and TCP), starts serf
// and, when Seeds are configured, a join loop that retries with jittered
// exponential backoff until a seed answers or the mesh is closed. Close
// leaves gracefully (bounded by Config.LeaveTimeout), shuts serf down and
// waits for every goroutine the package started. Outgoing gossip TCP
// connections are cancelled at Close, so a hanging seed cannot hold Close
// for memberlist's TCP timeout.
//
// A node publishes its region, rack, identity, replication (QUIC) address,
// client addresses and version as serf tags (keys in tags.go), which must
// fit serf's 512-byte budget; Validate and UpdateAdvertise say which tags
// to shorten when they do not.
//
// # Identity
//
// Node names are unique in the mesh. With a DataDir the node keeps a random
// identity (DataDir/node-id, tag "id") and serf's snapshot
// (DataDir/serf.snapshot): restarted with the same name and directory it
// rejoins the peers it knew, without seeds, as the same identity. A join
// that finds the same name under another identity fails with ErrNameInUse
// (the merge delegate refuses it); serf's own name-conflict resolution,
// which shuts the losing node's serf down, is disabled. A node restarted at
// another gossip address is refused by memberlist until its old address is
// forgotten, about Timings.GossipToTheDead after it failed; keep BindAddr
// fixed across restarts.
//
// # The directory and its events
//
// serf delivers events on a channel it must never block on: it sends while
// holding its member lock, and its snapshotter silently drops events when
// the channel is full. A pump goroutine only moves events from that channel
// into an unbounded intake; one run goroutine owns the directory and
// applies them; each subscriber has its own queue and goroutine (see
// subscribe.go). The directory derives events from state differences, so
// an input that changes nothing emits nothing, and every event carries a
// gap-free sequence number. A periodic reconcile against serf's member list
// repairs the directory if serf ever dropped an event.
//
// # Suspect
//
// serf reports alive, failed and left but not suspect, and memberlist has
// no delegate for suspicion (its Members() leaves Node.State unset). The
// one signal memberlist gives is the line it logs right before marking a
// peer suspect after a failed direct and indirect probe:
// "Suspect <name> has failed, no acks received". serf's and memberlist's
// log output is routed through a bridge into slog, and the bridge turns
// that line into a suspicion. The suspicion ends when serf reports the
// peer failed or left, when a direct probe of the peer succeeds (serf
// replaces the peer's cached coordinate on every ack), or when memberlist's
// longest possible suspicion has passed without a failure, which memberlist
// only allows when the peer refuted it. So "suspect" is this node's own
// failure detector doubting a peer: suspicion this node only heard through
// gossip is not visible, and in a large mesh a peer can go from alive to
// failed here without a suspect in between. The log text is memberlist's
// (pinned version); a test kills a node and requires a suspect before the
// failure.
//
// # RTT
//
// serf's Vivaldi coordinates give node-to-node estimates. Between regions
// the package reports the median over pairs of up nodes (rtt.go says why
// not the minimum). Estimates exist only after probes have carried the
// coordinates around; on loopback they are microseconds.
//
// # Encryption
//
// With EncryptKey (or a keyring file) gossip is encrypted with AES-GCM.
// The keyring file, by default DataDir/keyring.json, holds the outcome of
// rotations and wins over EncryptKey at start. InstallKey, UseKey,
// RemoveKey and ListKeys rotate keys across the mesh through serf's key
// manager: install the new key, use it, then remove the old one.
//
// # Wiring it into a node
//
//	cfg := regions.DefaultConfig()          // then fill from the YAML below
//	cfg.DataDir = filepath.Join(dataDir, "mesh")
//	cfg.Advertise = regions.Advertise{QUIC: ..., Kafka: ..., Pulsar: ..., HTTP: ..., Version: ...}
//	cfg.Logger = logger
//	mesh, err := regions.New(cfg)           // on serve start
//	defer mesh.Close()                      // on serve stop
//	mesh.Snapshot()                         // GET /api/v1/mesh, tern status (JSON-ready)
//	dir, events := mesh.SubscribeWithDirectory(ctx) // replicator: start state + every change
//	mesh.UpdateAdvertise(ctx, adv)          // once listeners know their ports
//
// # Configuration (YAML)
//
// The node's YAML should expose these fields under a mesh section (names
// suggested; the configs package owns the schema):
//
//	node_name        NodeName          default: host name
//	region           Region            default: local
//	rack             Rack
//	gossip_bind      BindAddr          default: ":7946"
//	gossip_advertise AdvertiseAddr     an IP, optionally :port
//	seeds            Seeds             list of host:port
//	join_retry_min   JoinRetryMin      default: 1s
//	join_retry_max   JoinRetryMax      default: 60s
//	mesh_name        MeshName          default: tern
//	encrypt_key      EncryptKey        base64 of 16/24/32 bytes; better from a file or env
//	keyring_file     KeyringFile       default: <data>/mesh/keyring.json when a key is set
//	rejoin_after_leave RejoinAfterLeave default: true
//	leave_timeout    LeaveTimeout      default: 5s
//	timings          Timings           profile "wan" (default) or "lan", then overrides:
//	  probe_interval, probe_timeout, suspicion_mult, suspicion_max_timeout_mult,
//	  gossip_interval, gossip_nodes, gossip_to_the_dead, push_pull_interval,
//	  tcp_timeout, reap_interval, reconnect_interval, reconnect_timeout,
//	  tombstone_timeout, leave_propagate_delay
//
// DataDir, Advertise and Logger come from the rest of the node's
// configuration (its data directory, its listeners, its logger), not from
// this section.
package regions
