//go:build !linux

package localstore

import "github.com/cockroachdb/pebble/v2/vfs"

// allocate does nothing here: the segment grows as it is written.
func allocate(vfs.File, int64) {}
