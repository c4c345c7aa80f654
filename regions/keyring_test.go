package regions

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestKeyringRotation(t *testing.T) {
	eu, us, ap := threeRegions(t, func(c *Config) { c.EncryptKey = key1 })
	all := []*tnode{eu, us, ap}
	names := []string{"n-eu", "n-us", "n-ap"}
	allSee(t, 10*time.Second, all, names, StateAlive)
	for _, n := range all {
		if !n.m.Encrypted() {
			t.Fatalf("%s is not encrypted", n.cfg.NodeName)
		}
	}

	step := func(what string, f func() (KeyringResult, error)) KeyringResult {
		t.Helper()
		res, err := f()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if res.Nodes != 3 || res.Responses != 3 || res.Errors != 0 {
			t.Fatalf("%s: %+v", what, res)
		}
		return res
	}
	ctx := ctxTimeout(t, 30*time.Second)
	step("install", func() (KeyringResult, error) { return us.m.InstallKey(ctx, key2) })
	res := step("list", func() (KeyringResult, error) { return eu.m.ListKeys(ctx) })
	if want := map[string]int{key1: 3, key2: 3}; !reflect.DeepEqual(res.Keys, want) || res.PrimaryKeys[key1] != 3 {
		t.Fatalf("after install: %+v", res)
	}
	step("use", func() (KeyringResult, error) { return eu.m.UseKey(ctx, key2) })

	// Every node refuses to remove the key it encrypts with.
	res, err := ap.m.RemoveKey(ctx, key2)
	if !errors.Is(err, ErrKeyring) || res.Errors == 0 {
		t.Errorf("removing the key in use: %+v, %v", res, err)
	}
	for node, msg := range res.Messages {
		if !strings.Contains(msg, "primary key") {
			t.Errorf("%s refused for another reason: %s", node, msg)
		}
	}
	step("remove", func() (KeyringResult, error) { return ap.m.RemoveKey(ctx, key1) })
	res = step("list", func() (KeyringResult, error) { return us.m.ListKeys(ctx) })
	if want := map[string]int{key2: 3}; !reflect.DeepEqual(res.Keys, want) || !reflect.DeepEqual(res.PrimaryKeys, want) {
		t.Fatalf("after rotation: %+v", res)
	}
	for _, n := range all {
		data, err := os.ReadFile(filepath.Join(n.cfg.DataDir, "keyring.json"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), key2) || strings.Contains(string(data), key1) {
			t.Errorf("%s keyring file: %s", n.cfg.NodeName, data)
		}
	}

	// The nodes keep talking under the new key: a tag change spreads, and
	// a node failure is still detected.
	adv := us.cfg.Advertise
	adv.Version = "rotated"
	if err := us.m.UpdateAdvertise(ctx, adv); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "tag update after rotation", func() error {
		for _, o := range []*tnode{eu, ap} {
			if n, _ := o.m.Directory().Node("n-us"); n.Version != "rotated" {
				return fmt.Errorf("%s sees version %q", o.cfg.NodeName, n.Version)
			}
		}
		return nil
	})
	allSee(t, 10*time.Second, all, names, StateAlive)

	// Only the new key opens the door now.
	oldCfg := testConfig(t, "old", "eu")
	oldCfg.EncryptKey = key1
	old := start(t, oldCfg)
	if _, err := old.m.Join(ctx, eu.addr()); !errors.Is(err, ErrJoin) {
		t.Errorf("a node with the removed key joined: %v", err)
	}
	newCfg := testConfig(t, "new", "us")
	newCfg.EncryptKey = key2
	nw := start(t, newCfg)
	if _, err := nw.m.Join(ctx, eu.addr()); err != nil {
		t.Errorf("a node with the new key cannot join: %v", err)
	}
	allSee(t, 10*time.Second, all, []string{"new"}, StateAlive)

	// A restart loads the rotated keyring, not the configured key1.
	ap.restart()
	if err := ap.m.WaitJoined(ctx); err != nil {
		t.Fatal(err)
	}
	allSee(t, 10*time.Second, all, names, StateAlive)
	if !strings.Contains(ap.logs.String(), "EncryptKey is not in the keyring file") {
		t.Errorf("restart did not warn that the keyring file overrides EncryptKey")
	}
}

func TestKeyringErrors(t *testing.T) {
	plain := start(t, testConfig(t, "plain", "eu"))
	ctx := ctxTimeout(t, 10*time.Second)
	if _, err := plain.m.InstallKey(ctx, key2); !errors.Is(err, ErrEncryptionDisabled) {
		t.Errorf("install without encryption: %v", err)
	}
	if _, err := plain.m.ListKeys(ctx); !errors.Is(err, ErrEncryptionDisabled) {
		t.Errorf("list without encryption: %v", err)
	}
	cfg := testConfig(t, "enc", "eu")
	cfg.EncryptKey = key1
	enc := start(t, cfg)
	for _, bad := range []string{"", "not base64!", "AAAA", strings.Repeat("A", 100)} {
		if _, err := enc.m.InstallKey(ctx, bad); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("install %q: %v", bad, err)
		}
	}
	// A second key in use is still fine on one node.
	if _, err := enc.m.InstallKey(ctx, key3); err != nil {
		t.Errorf("install on a lone node: %v", err)
	}
}

func TestKeyringFileProblems(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, content, want string
	}{
		{"garbage", "not json", "JSON list"},
		{"empty", "[]", "empty"},
		{"short key", `["AAAA"]`, "key 0"},
	}
	for _, c := range cases {
		path := filepath.Join(dir, c.name)
		if err := os.WriteFile(path, []byte(c.content), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(t, "k", "eu")
		cfg.KeyringFile = path
		_, err := New(cfg)
		if !errors.Is(err, ErrInvalidKeyring) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	cfg := testConfig(t, "k", "eu")
	cfg.KeyringFile = filepath.Join(dir, "missing")
	if _, err := New(cfg); !errors.Is(err, ErrInvalidKeyring) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing keyring without a key: %v", err)
	}
}
