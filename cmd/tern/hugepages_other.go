//go:build !linux

package main

// execWithHugePages asks for huge pages only on Linux, where glibc's
// allocator takes the request from GLIBC_TUNABLES (see hugepages_linux.go).
func execWithHugePages() string {
	return "only on Linux"
}
