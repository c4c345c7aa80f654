package logbuf

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Writers on many goroutines lose no write and tear none (run with -race).
func TestBufferTakesConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 100 {
				fmt.Fprintf(&b, "w%d-%d\n", w, i)
				_ = b.String()
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("%d lines, want 800", len(lines))
	}
	seen := map[string]bool{}
	for _, l := range lines {
		seen[l] = true
	}
	for w := range 8 {
		for i := range 100 {
			if l := fmt.Sprintf("w%d-%d", w, i); !seen[l] {
				t.Fatalf("line %q lost or torn", l)
			}
		}
	}
}
