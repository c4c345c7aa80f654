package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// apiFlags are the flags every command that talks to a node shares.
type apiFlags struct {
	url    string
	asJSON bool
}

func (a *apiFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&a.url, "url", "", "node admin URL (default $TERN_URL or http://127.0.0.1:8080)")
	c.Flags().BoolVar(&a.asJSON, "json", false, "print JSON instead of a table")
}

// base is the node URL without a trailing slash.
func (a *apiFlags) base() string {
	u := a.url
	if u == "" {
		u = os.Getenv("TERN_URL")
	}
	if u == "" {
		u = "http://127.0.0.1:8080"
	}
	if !strings.Contains(u, "://") {
		u = "http://" + u
	}
	return strings.TrimRight(u, "/")
}

// apiError is an error response from a node.
type apiError struct {
	Status int
	Msg    string
	// Body is the raw answer, for commands that read structured error fields.
	Body []byte
}

// Error is the node's message; the HTTP status shows only for the node's own failures, where
// it helps whoever reads the node's log.
func (e *apiError) Error() string {
	if e.Status >= 500 {
		return fmt.Sprintf("%s (HTTP %d)", e.Msg, e.Status)
	}
	return e.Msg
}

// call sends a request to the node and decodes a JSON answer into out.
func (a *apiFlags) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, a.base()+path, rd)
	if err != nil {
		return usagef("--url %q: %v", a.base(), err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach tern at %s: %w (is the node running? set --url or TERN_URL)", a.base(), err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error  string `json:"error"`
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(raw, &e)
		msg := e.Error
		if msg == "" {
			msg = e.Reason
		}
		if msg == "" {
			msg = strings.TrimSpace(string(raw))
		}
		ae := &apiError{Status: resp.StatusCode, Msg: plainMessage(msg), Body: raw}
		if resp.StatusCode == http.StatusBadRequest {
			// The node refused the request as given: the caller's to fix, like a bad flag.
			return usageError{ae}
		}
		return ae
	}
	if out == nil || len(raw) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("unexpected answer from %s%s: %w", a.base(), path, err)
	}
	return nil
}

// isStatus reports an API error with the given HTTP status.
func isStatus(err error, status int) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Status == status
}

// plainMessage drops Go package prefixes of sentinel errors ("protocols: ", "replicator: ")
// from a node's message: an operator reads what is wrong, not where it was found.
func plainMessage(msg string) string {
	for _, p := range []string{"protocols: ", "localstore: ", "replicator: ", "proxy: "} {
		msg = strings.ReplaceAll(msg, ": "+p, ": ")
		msg = strings.TrimPrefix(msg, p)
	}
	return msg
}

// printJSON writes v indented.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
