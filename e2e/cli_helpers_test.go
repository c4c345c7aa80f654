package e2e

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// The CLI suite runs the real tern binary against in-process nodes and compares what an
// operator sees with golden transcripts under testdata/cli. Outputs that vary from run to run
// (ports, wall times, "3s ago") are redacted here, in the test; the product prints them as
// they are. Regenerate the transcripts with
//
//	go test ./e2e -run TestCLI -update
//
// and read the diff before committing it.

var update = flag.Bool("update", false, "rewrite the CLI golden transcripts under testdata/cli")

// cli runs one tern binary against one node.
type cli struct {
	t   *testing.T
	bin string
	url string
	// label names the node in transcripts of several nodes.
	label string
}

// step is one command of a transcript.
type step struct {
	args  []string
	stdin string
	// want is the exit status the command must end with.
	want int
	// sort sorts the output lines after the first (the order consumers print partitions in
	// is not fixed).
	sort bool
}

// run executes tern with --url set by TERN_URL and returns its combined output and status.
func (c cli) run(stdin string, args ...string) (string, int) {
	c.t.Helper()
	cmd := exec.Command(c.bin, args...)
	cmd.Env = append(os.Environ(), "TERN_URL="+c.url)
	cmd.Stdin = strings.NewReader(stdin)
	done := make(chan struct{})
	var out []byte
	var err error
	go func() {
		out, err = cmd.CombinedOutput()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		c.t.Fatalf("tern %s did not finish within 60s; output:\n%s", strings.Join(args, " "), out)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	c.t.Fatalf("tern %s: %v", strings.Join(args, " "), err)
	return "", -1
}

// runJSON runs a command with --json and decodes its output.
func (c cli) runJSON(v any, args ...string) {
	c.t.Helper()
	out, code := c.run("", append(args, "--json")...)
	if code != 0 {
		c.t.Fatalf("tern %s --json: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		c.t.Fatalf("tern %s --json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// transcript collects commands and their redacted outputs for one golden file.
type transcript struct {
	t      *testing.T
	name   string
	b      strings.Builder
	redact []func(string) string
}

var (
	reAddr = regexp.MustCompile(`127\.0\.0\.1:\d+`)
	reTime = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)
	reAgo  = regexp.MustCompile(`\b[0-9hms.]+ ago\b`)
	// reBytes matches stored data sizes below 1 KiB, which depend on how the client happened
	// to batch; configured sizes (1MiB, 10GiB) are left alone.
	reBytes = regexp.MustCompile(`\b[1-9][0-9]*B\b`)
)

// redactPadded replaces matches with word, padded to the match's width so tables stay
// aligned whatever the width of the value they held.
func redactPadded(re *regexp.Regexp, word string) func(string) string {
	return func(s string) string {
		return re.ReplaceAllStringFunc(s, func(m string) string {
			if len(word) >= len(m) {
				return word
			}
			return word + strings.Repeat(" ", len(m)-len(word))
		})
	}
}

func newTranscript(t *testing.T, name string) *transcript {
	return &transcript{t: t, name: name, redact: []func(string) string{
		redactPadded(reAddr, "127.0.0.1:PORT"),
		redactPadded(reTime, "TIME"),
		redactPadded(reAgo, "AGO"),
		redactPadded(reBytes, "<n>B"),
	}}
}

// do runs a step with c, checks its exit status, and records it.
func (tr *transcript) do(c cli, s step) string {
	tr.t.Helper()
	out, code := c.run(s.stdin, s.args...)
	if code != s.want {
		tr.t.Fatalf("tern %s: exit %d, want %d; output:\n%s", strings.Join(s.args, " "), code, s.want, out)
	}
	red := out
	for _, f := range tr.redact {
		red = f(red)
	}
	if s.sort {
		lines := strings.Split(strings.TrimRight(red, "\n"), "\n")
		from := 0
		if len(lines) > 0 && strings.HasPrefix(lines[0], "PARTITION ") {
			from = 1 // the header stays on top
		}
		slices.Sort(lines[from:])
		red = strings.Join(lines, "\n") + "\n"
	}
	prompt := "$"
	if c.label != "" {
		prompt = c.label + "$"
	}
	fmt.Fprintf(&tr.b, "%s tern %s\n", prompt, shellJoin(s.args))
	if s.stdin != "" {
		fmt.Fprintf(&tr.b, "< %q\n", s.stdin)
	}
	tr.b.WriteString(red)
	fmt.Fprintf(&tr.b, "[exit %d]\n\n", code)
	return out
}

// note records a line that explains the next steps.
func (tr *transcript) note(format string, args ...any) {
	fmt.Fprintf(&tr.b, "# "+format+"\n\n", args...)
}

// check compares the transcript with its golden file, or rewrites it with -update.
func (tr *transcript) check() {
	tr.t.Helper()
	path := filepath.Join("testdata", "cli", tr.name+".golden")
	got := tr.b.String()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			tr.t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			tr.t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tr.t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		tr.t.Errorf("%s differs from the golden transcript (rerun with -update and review the diff):\n%s", path, lineDiff(string(want), got))
	}
}

// lineDiff lists the lines that differ, for a readable failure.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  want %q\n  got  %q\n", i+1, wl, gl)
		}
	}
	return b.String()
}

func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " '\"$*?|&;<>") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}
