package kafka

import "golang.org/x/sys/unix"

// mapFrame maps n bytes of anonymous memory, in huge pages where the
// kernel gives them on request: on the virtual machines we measure on,
// each fresh 4 KiB page cost microseconds to fault in.
func mapFrame(n int) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, err
	}
	if n >= 2<<20 {
		_ = unix.Madvise(b, unix.MADV_HUGEPAGE) // advice only
	}
	return b, nil
}

func unmapFrame(b []byte) { _ = unix.Munmap(b) }
