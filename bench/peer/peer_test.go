package peer

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A tern peer runs with the settings of the config file it is given, and
// a bad file stops it with the file's error.
func TestTernConfigFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tern.yaml")
	if err := os.WriteFile(file, []byte("storage: {segment_cache: 48MiB}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Start(Config{Kind: Tern, Dir: filepath.Join(dir, "data"), ConfigFile: file})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.Close(ctx); err != nil {
			t.Error(err)
		}
	}()
	resp, err := http.Get(r.Addrs.HTTP + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `tern_storage_segment_cache_bytes{node="bench",region="local"} 5.0331648e+07`; !strings.Contains(string(body), want) {
		t.Errorf("/metrics lacks %s", want)
	}

	if err := os.WriteFile(file, []byte("storage: {segment_size: 1KiB}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Start(Config{Kind: Tern, Dir: filepath.Join(dir, "data2"), ConfigFile: file}); err == nil || !strings.Contains(err.Error(), "storage.segment_size") {
		t.Errorf("a 1KiB segment size: %v", err)
	}
	if err := (Config{Kind: Kfake, ConfigFile: file}).Validate(); err == nil || !strings.Contains(err.Error(), "tern's") {
		t.Errorf("kfake with a config file: %v", err)
	}
}
