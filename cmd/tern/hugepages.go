package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
)

// hugeTunable makes glibc's malloc ask the kernel for transparent huge
// pages (madvise MADV_HUGEPAGE) on the memory it maps. pebble, built with
// cgo, takes its memtables and block cache from that allocator.
const hugeTunable = "glibc.malloc.hugetlb=1"

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
	if runtime.GOOS != "linux" || !cgoBuild {
		return "not a Linux cgo build: pebble's memory comes from Go's heap"
	}
	tun := os.Getenv("GLIBC_TUNABLES")
	if strings.Contains(tun, hugeTunable) {
		return "requested (GLIBC_TUNABLES=" + tun + ")"
	}
	if strings.Contains(tun, "glibc.malloc.hugetlb") {
		return "as the environment says (GLIBC_TUNABLES=" + tun + ")"
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
	env := append(os.Environ(), "GLIBC_TUNABLES="+tun+hugeTunable)
	err = syscall.Exec("/proc/self/exe", os.Args, env)
	return fmt.Sprintf("exec with %s failed: %v", hugeTunable, err)
}
