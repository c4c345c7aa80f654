package proxy

import (
	"fmt"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/ternmq/tern/configs"
)

// What storage.segment_cache "auto" keeps in the page cache: a share of
// the memory the node may use, with a floor, and a fixed size where that
// memory is not known.
//
// The bound exists for the write stream (it reuses the pages it frees)
// and to keep a small device's page cache for others; a consumer reading
// further back than it reads from the disk. A fixed 256MiB, the default
// before auto, suited a 4GiB device, but on a server with memory to spare
// it sent most of a modest backlog to the disk: a Kafka consumer of a
// 1M-message (1 GiB) backlog read 765 MB of it from the disk and ran at
// 420-513k messages/s, against 632-775k with the backlog cached
// (bench/results, the segment cache note of 7 December). Pulsar's
// BookKeeper and NATS JetStream size their caches from the machine's
// memory too.
const (
	autoSegmentCacheShare   = 16
	autoSegmentCacheMin     = 32 << 20
	autoSegmentCacheUnknown = 256 << 20
)

// segmentCacheBytes resolves storage.segment_cache for the store: its
// size, or for auto a sixteenth of mem, the bytes the node may use (0:
// not known).
func segmentCacheBytes(c configs.BytesOrAuto, mem uint64) int64 {
	switch {
	case !c.Auto:
		return int64(c.Bytes)
	case mem == 0:
		return autoSegmentCacheUnknown
	}
	return max(int64(mem/autoSegmentCacheShare), autoSegmentCacheMin)
}

// resolveSegmentCache is storage.segment_cache in bytes, auto worked out
// from the memory the node may use; from says how, for the log ("" for a
// size given).
func resolveSegmentCache(c configs.BytesOrAuto) (size int64, from string) {
	if !c.Auto {
		return segmentCacheBytes(c, 0), ""
	}
	mem, of := nodeMemory()
	if of == "" {
		return segmentCacheBytes(c, 0), "a fixed size: the memory the node may use is not known here"
	}
	return segmentCacheBytes(c, mem), fmt.Sprintf("1/%d of %s", autoSegmentCacheShare, of)
}

// nodeMemory is the memory the node may use: the machine's, or its
// control group's limit where that is lower (a container's, or a systemd
// unit's MemoryMax), since the page cache a process fills is charged to
// its control group. from says which, for the log; 0 and "" when neither
// is known.
func nodeMemory() (mem uint64, from string) {
	if sys, err := memlimit.FromSystem(); err == nil {
		mem, from = sys, fmt.Sprintf("the machine's %s of memory", gib(sys))
	}
	if cg, err := memlimit.FromCgroup(); err == nil && cg > 0 && (mem == 0 || cg < mem) {
		mem, from = cg, fmt.Sprintf("the control group's %s memory limit", gib(cg))
	}
	return mem, from
}

// gib writes n bytes in GiB with two decimals, for the log.
func gib(n uint64) string { return fmt.Sprintf("%.2fGiB", float64(n)/(1<<30)) }
