package proxy

import "testing"

// TestEntryCacheBoundsBytes checks that the cache of decoded entries keeps
// at most entryCacheSize entries and the bytes it is given, dropping the
// oldest first, and that an entry larger than that is still kept, alone.
func TestEntryCacheBoundsBytes(t *testing.T) {
	var c entryCache
	c.init()
	const bound = 1 << 20
	put := func(base int64, size int) { c.put(&readEntry{base: base, count: 10, size: size}, bound) }
	check := func(what string, want ...int64) {
		t.Helper()
		if len(c.m) != len(want) || len(c.order) != len(want) {
			t.Fatalf("%s: %d entries in the map, %d in order; want %v", what, len(c.m), len(c.order), want)
		}
		total := 0
		for i, base := range want {
			e := c.find(base)
			if e == nil || e.base != base || c.order[i] != base {
				t.Fatalf("%s: entry %d missing or out of order (order %v)", what, base, c.order)
			}
			total += e.size
		}
		if c.bytes != total || total > bound && len(want) > 1 {
			t.Fatalf("%s: %d bytes counted, %d held; bound %d", what, c.bytes, total, bound)
		}
	}

	// Small entries: the count bounds the cache.
	for i := range int64(entryCacheSize + 5) {
		put(i*10, 100)
	}
	want := []int64{}
	for i := int64(5); i < entryCacheSize+5; i++ {
		want = append(want, i*10)
	}
	check("small entries", want...)

	// Batches of a quarter of the bound: four fit, the oldest go first.
	c.reset()
	for i := range int64(6) {
		put(i*10, bound/4)
	}
	check("large entries", 20, 30, 40, 50)
	put(40, bound/4) // there already: no change
	check("the same entry again", 20, 30, 40, 50)

	// One larger than the bound is kept alone.
	put(60, 2*bound)
	check("an entry over the bound", 60)
	put(70, 100)
	check("after the entry over the bound", 70)
}

// TestEntryCacheShares checks the subscriptions' shares of the node's
// entry cache bytes and of its read bytes.
func TestEntryCacheShares(t *testing.T) {
	r := &subRegistry{}
	s := &subscription{reg: r}
	for _, c := range []struct{ loaded, cache, read int }{
		{0, entryCacheBytes, fetchBytes},
		{1, entryCacheBytes, fetchBytes},
		{2, entryCacheBytes / 2, fetchBytes},
		{10, entryCacheBytes / 10, fetchBytes},
		{100, entryCacheBytes / 100, fetchNodeBytes / 100},
		{1000, entryCacheMinBytes, fetchMinBytes},
	} {
		r.loadedN.Store(int32(c.loaded))
		if got := s.cacheBytes(); got != c.cache {
			t.Errorf("%d subscriptions loaded: a cache of %d bytes, want %d", c.loaded, got, c.cache)
		}
		if got := s.readBytes(); got != c.read {
			t.Errorf("%d subscriptions loaded: reads of %d bytes, want %d", c.loaded, got, c.read)
		}
	}
}
