//go:build !cgo

package main

// cgoBuild says pebble allocates its memtables and block cache from Go's
// heap in this build.
const cgoBuild = false
