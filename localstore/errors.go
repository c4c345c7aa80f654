package localstore

import "errors"

// Sentinel errors.
var (
	ErrClosed            = errors.New("localstore: store closed")
	ErrFailed            = errors.New("localstore: store failed after a write error; restart the node")
	ErrTopicExists       = errors.New("localstore: topic exists")
	ErrTopicNotFound     = errors.New("localstore: topic not found")
	ErrPartitionNotFound = errors.New("localstore: partition not found")
	ErrCursorPastLog     = errors.New("localstore: cursor past the end of the log")
	ErrBadPartitions     = errors.New("localstore: invalid partition count")
	ErrCorrupt           = errors.New("localstore: corrupt record")
)
