package localstore

import (
	"strings"
	"testing"
)

func TestConfigErrorsSayWhatToChange(t *testing.T) {
	err := Config{SegmentSize: 4096, SegmentCache: -1, Durability: "fast"}.Validate()
	if err == nil {
		t.Fatal("an invalid config was accepted")
	}
	for _, want := range []string{
		"dir is empty: set the data directory",
		"segment size 4096 is outside 1 MiB to 2 GiB",
		"segment cache -1 is negative: give bytes, or 0 to keep every page",
		`durability "fast": want sync or async`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	if err := (Config{Dir: "d", SegmentCache: 256 << 20}).Validate(); err != nil {
		t.Errorf("a valid config: %v", err)
	}
}
