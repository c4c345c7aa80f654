//go:build !linux

package localstore

import "github.com/cockroachdb/pebble/v2/vfs"

// allocate does nothing here: the segment grows as it is written.
func allocate(vfs.File, int64) {}

// writeRecord writes parts one after another at off.
func writeRecord(f vfs.File, off int64, parts ...[]byte) error {
	return writeRecordAt(f, off, parts...)
}

// dropPages does nothing here: the kernel decides what stays cached.
func dropPages(vfs.File, int64, int64) {}

// openDirect: reads go through the cache here.
func openDirect(string) int { return -1 }

func preadDirect(int, []byte, int64) (int, error) { return 0, nil }

func closeFd(int) {}
