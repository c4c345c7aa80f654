package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// hugeTunable makes glibc's malloc ask the kernel for transparent huge
// pages (madvise MADV_HUGEPAGE) on the memory it maps. pebble, built with
// cgo, takes its memtables and block cache from that allocator.
const hugeTunable = "glibc.malloc.hugetlb=1"

// reexecMark is set in the environment of the image execWithHugePages
// starts, so that image never execs again whatever glibc made of the
// tunable.
const reexecMark = "TERN_HUGE_PAGES_EXEC"

// thpEnabled is where Linux says when it gives transparent huge pages.
const thpEnabled = "/sys/kernel/mm/transparent_hugepage/enabled"

// execWithHugePages replaces this process with itself, same arguments,
// with hugeTunable added to GLIBC_TUNABLES, which glibc reads only when a
// program starts. It does so only where it helps: on Linux, in a cgo build,
// when the kernel gives huge pages on request ("madvise"; "always" needs
// nothing, "never" gives nothing) and the environment does not already set
// the tunable, so the new image never execs again. It returns why it did
// not exec; on success it does not return.
func execWithHugePages() string {
	if !cgoBuild {
		return "not a cgo build: pebble's memory comes from Go's heap"
	}
	tun := os.Getenv("GLIBC_TUNABLES")
	if strings.Contains(tun, hugeTunable) {
		return "requested (GLIBC_TUNABLES=" + tun + ")"
	}
	if strings.Contains(tun, "glibc.malloc.hugetlb") {
		return "as the environment says (GLIBC_TUNABLES=" + tun + ")"
	}
	if os.Getenv(reexecMark) != "" {
		// The exec happened, yet the tunable is not what was set (a
		// secure-mode glibc filters it): never exec a second time.
		return "not requested: after one exec GLIBC_TUNABLES is " + strconv.Quote(tun)
	}
	mode, err := os.ReadFile(thpEnabled)
	if err != nil {
		return fmt.Sprintf("transparent huge pages unknown: %v", err)
	}
	if !strings.Contains(string(mode), "[madvise]") {
		return "transparent huge pages: " + strings.TrimSpace(string(mode))
	}
	if tun != "" {
		tun += ":"
	}
	// An environment may hold a variable twice (GLIBC_TUNABLES= and the
	// new one); glibc and Go would read different ones.
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GLIBC_TUNABLES=") })
	env = append(env, "GLIBC_TUNABLES="+tun+hugeTunable, reexecMark+"=1")
	err = syscall.Exec("/proc/self/exe", os.Args, env)
	return fmt.Sprintf("exec with %s failed: %v", hugeTunable, err)
}
