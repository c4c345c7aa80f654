package dedup

import "errors"

// ErrCorruptState reports persisted state that does not decode.
var ErrCorruptState = errors.New("dedup: corrupt producer state")
