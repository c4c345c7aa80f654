//go:build !linux

package kafka

import "errors"

// mapFrame maps nothing off Linux: frames are Go's.
func mapFrame(n int) ([]byte, error) { return nil, errors.ErrUnsupported }

func unmapFrame(b []byte) {}
