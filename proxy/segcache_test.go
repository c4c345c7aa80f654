package proxy

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/ternmq/tern/configs"
)

func TestSegmentCacheBytes(t *testing.T) {
	auto := configs.BytesOrAuto{Auto: true}
	for _, c := range []struct {
		set  configs.BytesOrAuto
		mem  uint64
		want int64
	}{
		{auto, 4 << 30, 256 << 20},                              // a 4GiB device: the fixed default before auto
		{auto, 24 << 30, 1536 << 20},                            // a 24GiB server
		{auto, 256 << 20, 32 << 20},                             // the floor
		{auto, 0, 256 << 20},                                    // memory not known
		{configs.BytesOrAuto{Bytes: 1 << 30}, 4 << 30, 1 << 30}, // a size stands
		{configs.BytesOrAuto{}, 4 << 30, 0},                     // 0 keeps every page
	} {
		if got := segmentCacheBytes(c.set, c.mem); got != c.want {
			t.Errorf("segmentCacheBytes(%v, %d) = %d, want %d", c.set, c.mem, got, c.want)
		}
	}
}

// nodeMemory on this machine agrees with /proc/meminfo, or with the
// control group's limit where that is lower.
func TestNodeMemory(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/meminfo is Linux's")
	}
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var total uint64
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			total = kb << 10
		}
	}
	if total == 0 {
		t.Fatal("no MemTotal in /proc/meminfo")
	}
	mem, from := nodeMemory()
	if cg, err := memlimit.FromCgroup(); err == nil && cg < total {
		if mem != cg || !strings.Contains(from, "control group") {
			t.Fatalf("nodeMemory %d (%s), want the control group's limit %d", mem, from, cg)
		}
		return
	}
	if mem != total || !strings.Contains(from, "machine") {
		t.Fatalf("nodeMemory %d (%s), want MemTotal %d", mem, from, total)
	}
}
