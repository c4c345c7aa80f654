package configs

import (
	"bytes"
	_ "embed"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Node is the whole configuration of one node.
type Node struct {
	// Node identifies this node in the mesh.
	Node Identity `yaml:"node"`
	// DataDir holds pebble's files and the mesh snapshot. Default ./data.
	DataDir string `yaml:"data_dir"`
	// Listeners are the client-facing addresses.
	Listeners Listeners `yaml:"listeners"`
	// Mesh configures membership and replication between regions.
	Mesh Mesh `yaml:"mesh"`
	// Storage configures the local log.
	Storage Storage `yaml:"storage"`
	// Limits bound what clients may send.
	Limits Limits `yaml:"limits"`
	// Retention is the default for topics without their own.
	Retention Retention `yaml:"retention"`
	// Kafka configures the Kafka front end.
	Kafka Kafka `yaml:"kafka"`
	// Log configures the node's own logging.
	Log Log `yaml:"log"`
	// Replication tunes cross-region replication (replication.go).
	Replication Replication `yaml:"replication"`
}

// Identity names a node and places it.
type Identity struct {
	// Name is unique in the mesh. Default: the host name.
	Name string `yaml:"name"`
	// Region is the region the node serves. Default "local".
	Region string `yaml:"region"`
	// Rack places the node for rack-aware isolation. Default empty.
	Rack string `yaml:"rack"`
}

// Listeners are client addresses; an empty address turns a listener off.
type Listeners struct {
	// Kafka is the Kafka protocol address. Default ":9092".
	Kafka string `yaml:"kafka"`
	// Pulsar is the Pulsar binary protocol address. Default ":6650".
	Pulsar string `yaml:"pulsar"`
	// HTTP serves admin REST, WebSocket, /metrics and the console.
	// Default ":8080".
	HTTP string `yaml:"http"`
	// AdvertisedHost is the host clients are told to connect to (Kafka
	// Metadata, Pulsar lookups). Default: the listener's host, or the
	// host name when the listener binds every interface.
	AdvertisedHost string `yaml:"advertised_host"`
}

// Mesh configures gossip and replication links.
type Mesh struct {
	// GossipAddr is serf's address (TCP and UDP). Default ":7946".
	GossipAddr string `yaml:"gossip_addr"`
	// GossipAdvertise is the address other nodes reach this node's gossip
	// at, ip or ip:port; default: chosen from GossipAddr and the host's
	// interfaces.
	GossipAdvertise string `yaml:"gossip_advertise"`
	// Timings is the failure-detection profile: "wan" (the default; slow
	// links, suspicion over tens of seconds) or "lan" (a local mesh).
	Timings string `yaml:"timings"`
	// MeshAddr is the QUIC replication address (UDP). Default ":7947".
	MeshAddr string `yaml:"mesh_addr"`
	// Join lists host:port seeds of other nodes' gossip addresses.
	Join []string `yaml:"join"`
	// GossipKey is the base64 gossip encryption key (16, 24 or 32 bytes).
	GossipKey string `yaml:"gossip_key"`
	// Secret derives dev-mode replication certificates when no TLS files
	// are given. Every node of a mesh needs the same secret.
	Secret string `yaml:"secret"`
	// TLS names certificate files for mutual TLS on replication links.
	TLS TLSFiles `yaml:"tls"`
}

// TLSFiles are PEM file paths.
type TLSFiles struct {
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
	CA   string `yaml:"ca"`
}

// Storage configures the log.
type Storage struct {
	// Durability is "sync" (fsync before acknowledging; the default) or
	// "async" (acknowledge after the write, before its fsync).
	Durability string `yaml:"durability"`
	// AsyncSyncInterval is how often pebble's WAL is fsynced while writes
	// not durable in it are pending: async appends kept in pebble
	// (segments off, or compression), and what a replay after a crash
	// applies from segments. Default 100ms.
	AsyncSyncInterval Duration `yaml:"async_sync_interval"`
	// AsyncBacklog bounds the bytes of async appends acknowledged before
	// they are durable; past it, an async append is acknowledged once
	// durable, as a sync one. Default 32MiB.
	AsyncBacklog Bytes `yaml:"async_backlog"`
	// GroupCommitInterval is the least time between the starts of two
	// fsyncs of the segments: appends that arrive sooner after one began
	// wait for the next and share it (BookKeeper's journal has a similar
	// wait, journalMaxGroupWaitMSec). 0, the default, starts each
	// fsync at once: the least latency, and at moderate rates about one
	// fsync per produce request. An interval of a few milliseconds bounds
	// the fsyncs, which cost CPU and wear flash storage, to one per
	// interval, for up to one interval of latency (none after the disk
	// was idle that long). Applies to appends written to segments.
	GroupCommitInterval Duration `yaml:"group_commit_interval"`
	// MemtableSize is pebble's memtable size. Default 64MiB.
	MemtableSize Bytes `yaml:"memtable_size"`
	// CacheSize is pebble's block cache. Default 64MiB.
	CacheSize Bytes `yaml:"cache_size"`
	// Compression is how the store compresses what it writes: "none"
	// (the default: entries are kept as clients sent them, compressed or
	// not, as Kafka and Pulsar brokers keep them), "snappy", "minlz" or
	// "zstd" for payloads clients send uncompressed to a small disk.
	Compression string `yaml:"compression"`
	// Segments has entries appended under sync durability written once,
	// to segment files beside pebble, instead of into pebble, which writes
	// every byte twice (its WAL, then its flush). Entries are then not
	// compressed by the store, so a compression other than "none" keeps
	// them in pebble. Default true.
	Segments bool `yaml:"segments"`
	// SegmentSize is the size of a segment file. Default 64MiB.
	SegmentSize Bytes `yaml:"segment_size"`
	// SegmentCache is how much of the newest segment data stays in the
	// page cache once durable; older pages are dropped from it, so writing
	// reuses the pages it frees (new pages cost the kernel more, and on a
	// virtual machine whose host reclaims free memory, a fault on the host
	// too) and tern's page-cache footprint stays bounded. A consumer
	// further behind keeps what it has yet to read cached while it reads,
	// up to four times this behind the newest; consumers further back read
	// from the disk. 0 keeps every page (the kernel decides). "auto", the
	// default, is a sixteenth of the memory the node may use (the machine's,
	// or its control group's limit if lower), at least 32MiB: 256MiB on a
	// 4GiB device, 1.5GiB on a 24GiB server. Where the memory is not known,
	// auto is 256MiB.
	SegmentCache BytesOrAuto `yaml:"segment_cache"`
	// HugePages has `tern serve` ask the C allocator, which holds pebble's
	// memtables and block cache, for transparent huge pages (on Linux
	// with glibc, where the kernel offers them on request). A fresh 4 KiB
	// page cost 12 us to fault in on the machine we measure on, so filling
	// the first memtables after a start cost most of a core for seconds.
	// Default true.
	HugePages bool `yaml:"huge_pages"`
}

// StorageCompressions are the values storage.compression takes.
var StorageCompressions = []string{"none", "snappy", "minlz", "zstd"}

// Limits bound client input.
type Limits struct {
	// MaxMessageBytes bounds one batch (Kafka) or message (Pulsar).
	// Default 5MiB, Pulsar's default; Kafka topics may lower it with
	// max.message.bytes.
	MaxMessageBytes Bytes `yaml:"max_message_bytes"`
	// MaxConnections bounds open client connections per listener.
	// Default 10000.
	MaxConnections int `yaml:"max_connections"`
	// MaxInflightBytes bounds request bytes a connection may have in
	// flight before the node stops reading from it. Default 64MiB.
	MaxInflightBytes Bytes `yaml:"max_inflight_bytes"`
	// DiskQuota bounds the log's size on disk; 0 means no quota.
	DiskQuota Bytes `yaml:"disk_quota"`
	// HeapLimit is the soft limit `tern serve` gives Go's memory (the
	// runtime's GOMEMLIMIT; the environment variable wins when set): near
	// it the collector runs more often instead of letting the heap grow.
	// pebble's memtables and block cache are outside it. 0 sets none.
	// Default 72MiB.
	HeapLimit Bytes `yaml:"heap_limit"`
}

// Retention is the default retention.
type Retention struct {
	// MaxAge removes entries older than this; 0 keeps them. Default 7d.
	MaxAge Duration `yaml:"max_age"`
	// MaxBytes bounds each partition; -1 or 0 means no bound. Default -1.
	MaxBytes Bytes `yaml:"max_bytes"`
	// CheckInterval is how often retention runs. Default 1m.
	CheckInterval Duration `yaml:"check_interval"`
}

// Kafka configures the Kafka front end.
type Kafka struct {
	// Namespace holds Kafka topics, as tenant/namespace.
	// Default "public/default".
	Namespace string `yaml:"namespace"`
	// AutoCreateTopics creates unknown topics on produce and on metadata
	// requests that allow it. Default true.
	AutoCreateTopics bool `yaml:"auto_create_topics"`
	// DefaultPartitions is the partition count of auto-created topics.
	// Default 1.
	DefaultPartitions int `yaml:"default_partitions"`
	// FetchMaxBytes bounds the record bytes the node returns for one
	// fetch, whatever the consumer asks (Kafka's broker fetch.max.bytes);
	// a fetch still returns at least one whole batch. A consumer asking
	// for more (max.partition.fetch.bytes=10MiB, say) gets this much and
	// fetches again. Each fetch in flight holds a few times this in the
	// node's heap. Default 4MiB.
	FetchMaxBytes Bytes `yaml:"fetch_max_bytes"`
	// FetchSessionSlots bounds the fetch sessions (KIP-227) the node keeps
	// (Kafka's max.incremental.fetch.session.cache.slots). A consumer with
	// a session names only the partitions whose offset moved in its
	// fetches, and hears only of partitions with news. 0 keeps none, and
	// consumers send full fetches. Default 1000.
	FetchSessionSlots int `yaml:"fetch_session_slots"`
}

// Log configures the node's logging.
type Log struct {
	// Level is debug, info, warn or error. Default info.
	Level string `yaml:"level"`
	// Format is text or json. Default text.
	Format string `yaml:"format"`
}

//go:embed single.yaml
var singleYAML []byte

// SingleYAML is the embedded default configuration file.
func SingleYAML() []byte { return bytes.Clone(singleYAML) }

// DefaultConfig is the embedded default: one node of region "local" with
// data in ./data.
func DefaultConfig() Node {
	n, err := Parse(singleYAML)
	if err != nil {
		panic("configs: embedded single.yaml is invalid: " + err.Error())
	}
	return n
}

// Parse reads a YAML document over the built-in defaults. Unknown fields
// are errors, so a misspelt setting is reported rather than ignored.
func Parse(doc []byte) (Node, error) {
	n := builtin()
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	dec.KnownFields(true)
	if err := dec.Decode(&n); err != nil && !errors.Is(err, io.EOF) {
		return Node{}, fmt.Errorf("config: %w", err)
	}
	n.fill()
	return n, nil
}

// Load reads a config file over the built-in defaults.
func Load(path string) (Node, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Node{}, fmt.Errorf("config: %w", err)
	}
	n, err := Parse(b)
	if err != nil {
		return Node{}, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// builtin holds the defaults that apply when a file leaves a field out.
func builtin() Node {
	return Node{
		Node:      Identity{Region: "local"},
		DataDir:   "./data",
		Listeners: Listeners{Kafka: ":9092", Pulsar: ":6650", HTTP: ":8080"},
		Mesh:      Mesh{GossipAddr: ":7946", MeshAddr: ":7947", Timings: "wan"},
		Storage: Storage{
			Durability:        "sync",
			AsyncSyncInterval: Duration(100 * time.Millisecond),
			AsyncBacklog:      32 << 20,
			MemtableSize:      64 << 20,
			CacheSize:         64 << 20,
			Compression:       "none",
			Segments:          true,
			SegmentSize:       64 << 20,
			SegmentCache:      BytesOrAuto{Auto: true},
			HugePages:         true,
		},
		Limits:    Limits{MaxMessageBytes: 5 << 20, MaxConnections: 10000, MaxInflightBytes: 64 << 20, HeapLimit: 72 << 20},
		Retention: Retention{MaxAge: Duration(7 * 24 * time.Hour), MaxBytes: -1, CheckInterval: Duration(time.Minute)},
		Kafka:     Kafka{Namespace: "public/default", AutoCreateTopics: true, DefaultPartitions: 1, FetchMaxBytes: 4 << 20, FetchSessionSlots: 1000},
		Log:       Log{Level: "info", Format: "text"},

		Replication: defaultReplication(),
	}
}

// fill supplies values that depend on the machine.
func (n *Node) fill() {
	if n.Node.Name == "" {
		if h, err := os.Hostname(); err == nil && h != "" {
			n.Node.Name = h
		} else {
			n.Node.Name = "tern-1"
		}
	}
}

// Validate reports every problem at once; each line names the field and
// says what is accepted.
func (n Node) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	checkName := func(field, v string, required bool) {
		if v == "" {
			if required {
				bad(field, "is empty; set a name of letters, digits, '-', '_' or '.'")
			}
			return
		}
		if len(v) > 64 {
			bad(field, "%q is %d characters; at most 64", v, len(v))
		}
		for _, c := range v {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
				bad(field, "%q has %q; use letters, digits, '-', '_' or '.'", v, c)
				break
			}
		}
	}
	checkName("node.name", n.Node.Name, true)
	checkName("node.region", n.Node.Region, true)
	checkName("node.rack", n.Node.Rack, false)
	if n.DataDir == "" {
		bad("data_dir", "is empty; set a directory for the log")
	}
	checkAddr := func(field, v string, optional bool) {
		if v == "" {
			if !optional {
				bad(field, "is empty; set host:port such as :9092")
			}
			return
		}
		host, port, err := net.SplitHostPort(v)
		if err != nil {
			bad(field, "%q is not host:port (for example :9092 or 127.0.0.1:9092)", v)
			return
		}
		_ = host
		if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
			bad(field, "%q has port %q; want 0-65535", v, port)
		}
	}
	checkAddr("listeners.kafka", n.Listeners.Kafka, true)
	checkAddr("listeners.pulsar", n.Listeners.Pulsar, true)
	checkAddr("listeners.http", n.Listeners.HTTP, true)
	checkAddr("mesh.gossip_addr", n.Mesh.GossipAddr, true)
	checkAddr("mesh.mesh_addr", n.Mesh.MeshAddr, true)
	for i, j := range n.Mesh.Join {
		checkAddr(fmt.Sprintf("mesh.join[%d]", i), j, false)
	}
	switch n.Mesh.Timings {
	case "wan", "lan":
	default:
		bad("mesh.timings", "%q: want wan or lan", n.Mesh.Timings)
	}
	if n.Mesh.GossipKey != "" {
		if k, err := base64.StdEncoding.DecodeString(n.Mesh.GossipKey); err != nil || (len(k) != 16 && len(k) != 24 && len(k) != 32) {
			bad("mesh.gossip_key", "want the base64 of a 16, 24 or 32-byte key (for example: head -c32 /dev/urandom | base64)")
		}
	}
	if (n.Mesh.TLS.Cert == "") != (n.Mesh.TLS.Key == "") || (n.Mesh.TLS.Cert != "" && n.Mesh.TLS.CA == "") {
		bad("mesh.tls", "set cert, key and ca together (or none, with mesh.secret for dev mode)")
	}
	switch n.Storage.Durability {
	case "sync", "async":
	default:
		bad("storage.durability", "%q: want sync or async", n.Storage.Durability)
	}
	if n.Storage.AsyncSyncInterval <= 0 {
		bad("storage.async_sync_interval", "%v: want a positive duration like 100ms", time.Duration(n.Storage.AsyncSyncInterval))
	}
	if n.Storage.AsyncBacklog <= 0 {
		bad("storage.async_backlog", "%v: want a positive size like 32MiB", n.Storage.AsyncBacklog)
	}
	if iv := time.Duration(n.Storage.GroupCommitInterval); iv < 0 || iv > time.Second {
		bad("storage.group_commit_interval", "%v: want 0 (each fsync at once) up to 1s; a few ms is enough to share fsyncs", iv)
	}
	if n.Storage.MemtableSize < 1<<20 {
		bad("storage.memtable_size", "%v: want at least 1MiB (64MiB recommended)", n.Storage.MemtableSize)
	}
	if !slices.Contains(StorageCompressions, n.Storage.Compression) {
		bad("storage.compression", "%q: want one of %s", n.Storage.Compression, strings.Join(StorageCompressions, ", "))
	}
	if n.Storage.SegmentSize < 1<<20 || n.Storage.SegmentSize > 2<<30 {
		bad("storage.segment_size", "%v: want 1MiB to 2GiB (64MiB recommended)", n.Storage.SegmentSize)
	}
	if !n.Storage.SegmentCache.Auto && n.Storage.SegmentCache.Bytes < 0 {
		bad("storage.segment_cache", "%v: want auto (a sixteenth of the memory; recommended), 0 (keep every page) or a size like 256MiB", n.Storage.SegmentCache.Bytes)
	}
	if n.Storage.CacheSize < 0 {
		bad("storage.cache_size", "%v: want a size of 0 or more", n.Storage.CacheSize)
	}
	if n.Limits.MaxMessageBytes < 1024 || n.Limits.MaxMessageBytes > 256<<20 {
		bad("limits.max_message_bytes", "%v: want 1KiB to 256MiB", n.Limits.MaxMessageBytes)
	}
	if n.Limits.MaxConnections <= 0 {
		bad("limits.max_connections", "%d: want a positive number", n.Limits.MaxConnections)
	}
	if n.Limits.MaxInflightBytes < n.Limits.MaxMessageBytes {
		bad("limits.max_inflight_bytes", "%v is below limits.max_message_bytes %v; raise it", n.Limits.MaxInflightBytes, n.Limits.MaxMessageBytes)
	}
	if n.Limits.HeapLimit != 0 && n.Limits.HeapLimit < 16<<20 {
		bad("limits.heap_limit", "%v: want 0 (no limit) or at least 16MiB (72MiB recommended)", n.Limits.HeapLimit)
	}
	if q := n.Limits.DiskQuota; q > 0 && n.Storage.Segments && n.Storage.SegmentSize > q/4 {
		bad("storage.segment_size", "%v with limits.disk_quota %v: a segment's whole size is taken when it is made, so want at most a quarter of the quota", n.Storage.SegmentSize, q)
	}
	if n.Limits.DiskQuota < 0 {
		bad("limits.disk_quota", "%v: want 0 (no quota) or a size", n.Limits.DiskQuota)
	}
	if n.Retention.MaxAge < 0 {
		bad("retention.max_age", "%v: want 0 (keep forever) or a positive duration like 7d", time.Duration(n.Retention.MaxAge))
	}
	if n.Retention.MaxBytes < -1 {
		bad("retention.max_bytes", "%v: want -1 (no bound) or a size", n.Retention.MaxBytes)
	}
	if n.Retention.CheckInterval <= 0 {
		bad("retention.check_interval", "%v: want a positive duration like 1m", time.Duration(n.Retention.CheckInterval))
	}
	if parts := strings.Split(n.Kafka.Namespace, "/"); len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		bad("kafka.namespace", "%q: want tenant/namespace such as public/default", n.Kafka.Namespace)
	}
	if n.Kafka.DefaultPartitions < 1 || n.Kafka.DefaultPartitions > 10000 {
		bad("kafka.default_partitions", "%d: want 1 to 10000", n.Kafka.DefaultPartitions)
	}
	if n.Kafka.FetchMaxBytes < 1<<10 || n.Kafka.FetchMaxBytes > 1<<30 {
		bad("kafka.fetch_max_bytes", "%v: want 1KiB to 1GiB", n.Kafka.FetchMaxBytes)
	}
	if n.Kafka.FetchSessionSlots < 0 || n.Kafka.FetchSessionSlots > 1_000_000 {
		bad("kafka.fetch_session_slots", "%d: want 0 (none) to 1000000", n.Kafka.FetchSessionSlots)
	}
	switch n.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "%q: want debug, info, warn or error", n.Log.Level)
	}
	switch n.Log.Format {
	case "text", "json":
	default:
		bad("log.format", "%q: want text or json", n.Log.Format)
	}
	errs = append(errs, n.Replication.validate()...)
	errs = append(errs, validateMeshSecret(n.Mesh)...)
	return errors.Join(errs...)
}

// Marshal writes the configuration as YAML.
func (n Node) Marshal() ([]byte, error) { return yaml.Marshal(n) }
