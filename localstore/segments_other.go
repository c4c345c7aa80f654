//go:build !linux

package localstore

import "github.com/cockroachdb/pebble/v2/vfs"

// allocate does nothing here: the segment grows as it is written.
func allocate(vfs.File, int64) {}

// writeRecord writes a record's header, entry and padding at off.
func writeRecord(f vfs.File, off int64, h, entry, pad []byte) error {
	return writeRecordAt(f, off, h, entry, pad)
}

// dropPages does nothing here: the kernel decides what stays cached.
func dropPages(vfs.File, int64, int64) {}
