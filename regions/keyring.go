package regions

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/serf"
)

// decodeKey turns a configured or requested key into its raw bytes, with an
// error that says what a valid key looks like.
func decodeKey(s string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: not standard base64 (%v); generate one with `head -c 32 /dev/urandom | base64`", ErrInvalidKey, err)
	}
	switch len(raw) {
	case 16, 24, 32:
		return raw, nil
	}
	return nil, fmt.Errorf("%w: decodes to %d bytes; want 16, 24 or 32 (AES-128/192/256)", ErrInvalidKey, len(raw))
}

// parseKeyring decodes a keyring file: a JSON list of base64 keys, the
// primary (encrypting) key first, as serf writes it.
func parseKeyring(data []byte) ([][]byte, error) {
	var encoded []string
	if err := json.Unmarshal(data, &encoded); err != nil {
		return nil, fmt.Errorf("%w: want a JSON list of base64 keys: %v", ErrInvalidKeyring, err)
	}
	if len(encoded) == 0 {
		return nil, fmt.Errorf("%w: the list of keys is empty", ErrInvalidKeyring)
	}
	keys := make([][]byte, 0, len(encoded))
	for i, s := range encoded {
		k, err := decodeKey(s)
		if err != nil {
			return nil, fmt.Errorf("%w: key %d: %w", ErrInvalidKeyring, i, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// writeKeyring persists keys in serf's keyring file format (0600: keys are
// secrets).
func writeKeyring(path string, keys [][]byte) error {
	encoded := make([]string, len(keys))
	for i, k := range keys {
		encoded[i] = base64.StdEncoding.EncodeToString(k)
	}
	data, err := json.MarshalIndent(encoded, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// keyringPath is where rotations are persisted, or "" for nowhere.
func (c Config) keyringPath() string {
	if c.KeyringFile != "" {
		return c.KeyringFile
	}
	if c.DataDir != "" && c.EncryptKey != "" {
		return filepath.Join(c.DataDir, "keyring.json")
	}
	return ""
}

// loadKeyring builds memberlist's keyring: the keyring file when it exists
// (it holds the outcome of past rotations), else EncryptKey, which is then
// written to the file so later rotations have a place to land. It returns
// nil when gossip is not encrypted.
func loadKeyring(c Config, warn func(msg string, args ...any)) (*memberlist.Keyring, error) {
	path := c.keyringPath()
	var keys [][]byte
	if path != "" {
		data, err := os.ReadFile(path)
		switch {
		case err == nil:
			if keys, err = parseKeyring(data); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			if c.EncryptKey != "" {
				raw, _ := decodeKey(c.EncryptKey)
				if !slices.ContainsFunc(keys, func(k []byte) bool { return string(k) == string(raw) }) {
					warn("EncryptKey is not in the keyring file; the keyring file wins because it holds past rotations",
						"keyring_file", path)
				}
			}
		case errors.Is(err, fs.ErrNotExist):
			if c.EncryptKey == "" {
				return nil, fmt.Errorf("%w: %s does not exist and no EncryptKey is set; set EncryptKey or create the file", ErrInvalidKeyring, path)
			}
		default:
			return nil, fmt.Errorf("%w: %v", ErrInvalidKeyring, err)
		}
	}
	if keys == nil && c.EncryptKey != "" {
		raw, err := decodeKey(c.EncryptKey)
		if err != nil {
			return nil, err
		}
		keys = [][]byte{raw}
		if path != "" {
			if err := writeKeyring(path, keys); err != nil {
				return nil, fmt.Errorf("%w: writing %s: %v", ErrInvalidKeyring, path, err)
			}
		}
	}
	if keys == nil {
		return nil, nil
	}
	return memberlist.NewKeyring(keys, keys[0])
}

// KeyringResult is what the mesh answered to a keyring operation. It is
// JSON-ready for the admin API.
type KeyringResult struct {
	// Nodes is how many live nodes the operation addressed.
	Nodes int `json:"nodes"`
	// Responses is how many of them answered before the query timed out.
	Responses int `json:"responses"`
	// Errors is how many answered with a failure.
	Errors int `json:"errors"`
	// Messages holds each node's error or warning, by node name.
	Messages map[string]string `json:"messages,omitempty"`
	// Keys counts, for ListKeys, how many nodes hold each key.
	Keys map[string]int `json:"keys,omitempty"`
	// PrimaryKeys counts, for ListKeys, how many nodes encrypt with each key.
	PrimaryKeys map[string]int `json:"primary_keys,omitempty"`
}

// InstallKey adds key to every node's keyring without using it yet: the
// first step of a rotation (install, use, remove).
func (m *Mesh) InstallKey(ctx context.Context, key string) (KeyringResult, error) {
	return m.keyOp(ctx, "install", key, func(km *serf.KeyManager) (*serf.KeyResponse, error) {
		return km.InstallKeyWithOptions(key, keyOpts)
	})
}

// keyOpts asks two extra nodes to relay each answer, so one lost UDP
// packet does not lose a node's answer.
var keyOpts = &serf.KeyRequestOptions{RelayFactor: 2}

// UseKey makes an installed key the one every node encrypts with. Nodes
// keep decrypting with every installed key, so the switch needs no
// coordination.
func (m *Mesh) UseKey(ctx context.Context, key string) (KeyringResult, error) {
	return m.keyOp(ctx, "use", key, func(km *serf.KeyManager) (*serf.KeyResponse, error) { return km.UseKeyWithOptions(key, keyOpts) })
}

// RemoveKey drops a key that is no longer used from every node's keyring,
// the last step of a rotation. The key in use cannot be removed.
func (m *Mesh) RemoveKey(ctx context.Context, key string) (KeyringResult, error) {
	return m.keyOp(ctx, "remove", key, func(km *serf.KeyManager) (*serf.KeyResponse, error) { return km.RemoveKeyWithOptions(key, keyOpts) })
}

// ListKeys asks every node which keys it holds, to check a rotation step
// reached the whole mesh before taking the next one.
func (m *Mesh) ListKeys(ctx context.Context) (KeyringResult, error) {
	return m.keyOp(ctx, "list", "", func(km *serf.KeyManager) (*serf.KeyResponse, error) { return km.ListKeysWithOptions(keyOpts) })
}

// keyOp runs one serf key query, again while some live node did not
// answer in time and none refused (the four operations are idempotent), so
// a busy node or a lost packet does not fail a rotation step. serf's calls
// block for the query timeout and take no context, so each runs on a
// tracked goroutine and the caller may stop waiting; Close still waits for
// it (bounded by serf's query timeout).
func (m *Mesh) keyOp(ctx context.Context, op, key string, f func(*serf.KeyManager) (*serf.KeyResponse, error)) (KeyringResult, error) {
	if op != "list" {
		if _, err := decodeKey(key); err != nil {
			return KeyringResult{}, err
		}
	}
	if !m.serf.EncryptionEnabled() {
		return KeyringResult{}, fmt.Errorf("%w: start the mesh with EncryptKey or a keyring file to rotate keys", ErrEncryptionDisabled)
	}
	for attempt := 1; ; attempt++ {
		out, err := m.keyQuery(ctx, f)
		if err == nil {
			m.log.Info("keyring operation done", "op", op, "nodes", out.Nodes, "attempt", attempt)
			return out, nil
		}
		if errors.Is(err, ErrClosed) || ctx.Err() != nil {
			return out, fmt.Errorf("regions: keyring %s: %w", op, err)
		}
		if out.Errors > 0 || out.Responses >= out.Nodes || attempt == keyOpAttempts {
			m.log.Warn("keyring operation failed", "op", op, "err", err, "messages", out.Messages, "attempt", attempt)
			return out, fmt.Errorf("%w: %s: %v %v", ErrKeyring, op, err, out.Messages)
		}
		m.log.Info("keyring operation: some nodes did not answer in time; asking again",
			"op", op, "answered", out.Responses, "nodes", out.Nodes, "attempt", attempt)
	}
}

// keyOpAttempts bounds how often a key query is repeated for missing
// answers.
const keyOpAttempts = 5

func (m *Mesh) keyQuery(ctx context.Context, f func(*serf.KeyManager) (*serf.KeyResponse, error)) (KeyringResult, error) {
	type result struct {
		resp *serf.KeyResponse
		err  error
	}
	done := make(chan result, 1)
	if !m.goTracked(func() {
		resp, err := f(m.serf.KeyManager())
		done <- result{resp, err}
	}) {
		return KeyringResult{}, ErrClosed
	}
	select {
	case <-ctx.Done():
		return KeyringResult{}, ctx.Err()
	case r := <-done:
		var out KeyringResult
		if r.resp != nil {
			out = KeyringResult{
				Nodes:       r.resp.NumNodes,
				Responses:   r.resp.NumResp,
				Errors:      r.resp.NumErr,
				Messages:    r.resp.Messages,
				Keys:        r.resp.Keys,
				PrimaryKeys: r.resp.PrimaryKeys,
			}
		}
		return out, r.err
	}
}
