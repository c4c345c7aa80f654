//go:build cgo

package main

// cgoBuild says pebble allocates its memtables and block cache with C's
// allocator (see execWithHugePages).
const cgoBuild = true
