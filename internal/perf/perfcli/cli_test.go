package perfcli

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/ternmq/tern/internal/perf"
)

// commands returns fresh bench commands (flags not yet set) of a binary
// whose drivers fail the test if reached: the runs here must stop at the
// command line.
func commands(t *testing.T) map[string]func(args ...string) error {
	t.Helper()
	never := func(*Flags) (perf.Driver, error) {
		t.Error("a driver was made for a command line that should have been refused")
		return nil, errors.New("refused")
	}
	opts := Options{
		Drivers:   map[string]Factory{"kafka": never, "pulsar": never, "websocket": never},
		Protocols: []string{"kafka", "pulsar", "websocket"},
	}
	out := map[string]func(args ...string) error{}
	for _, c := range Commands(opts) {
		out[c.Name()] = func(args ...string) error {
			c.SetArgs(args)
			c.SetOut(&bytes.Buffer{})
			c.SetErr(&bytes.Buffer{})
			return c.Execute()
		}
	}
	return out
}

// A flag the mode or protocol would ignore is refused with what to change,
// as a usage error.
func TestBenchRefusesFlagsThatWouldBeIgnored(t *testing.T) {
	for _, tc := range []struct {
		mode string
		args []string
		want string
	}{
		{"produce", []string{"--consumers", "2"}, "--consumers is for consume and e2e, not produce"},
		{"produce", []string{"--fetch-size", "65536"}, "--fetch-size is for consume and e2e, not produce"},
		{"e2e", []string{"--backlog", "10"}, "--backlog is for consume, not e2e"},
		{"consume", []string{"--protocol", "pulsar", "--fetch-size", "65536"}, "--fetch-size is for --protocol kafka, not pulsar"},
		{"produce", []string{"--protocol", "pulsar", "--acks", "1"}, "--acks is for --protocol kafka, not pulsar"},
		{"e2e", []string{"--protocol", "websocket", "--compression", "zstd"}, "--compression is for --protocol kafka, not websocket"},
		{"produce", []string{"--protocol", "kafka", "--ws-batching"}, "--ws-batching is for --protocol websocket, not kafka"},
		{"produce", []string{"--protocol", "websocket", "--no-batching"}, "unless --ws-batching is given"},
		{"produce", []string{"--protocol", "mqtt"}, `--protocol "mqtt": want one of kafka, pulsar, websocket`},
	} {
		err := commands(t)[tc.mode](tc.args...)
		var ue UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %v: got %v, want a usage error saying %q", tc.mode, tc.args, err, tc.want)
		}
	}
}

// Each mode's help lists the flags it uses and leaves out the ones it
// refuses.
func TestBenchHelpListsTheModesFlags(t *testing.T) {
	for _, c := range Commands(Options{Protocols: []string{"kafka"}}) {
		var help bytes.Buffer
		c.SetOut(&help)
		if err := c.Help(); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			flag  string
			modes []string
		}{
			{"--backlog", []string{"consume"}},
			{"--consumers", []string{"consume", "e2e"}},
			{"--fetch-size", []string{"consume", "e2e"}},
			{"--rate", []string{"produce", "consume", "e2e"}},
		} {
			listed := strings.Contains(help.String(), "  "+tc.flag+" ")
			want := false
			for _, m := range tc.modes {
				want = want || m == c.Name()
			}
			if listed != want {
				t.Errorf("%s --help lists %s: %v, want %v", c.Name(), tc.flag, listed, want)
			}
		}
		for _, line := range strings.Split(help.String(), "\n") {
			if strings.Count(line, "(default") > 1 {
				t.Errorf("%s --help gives a default twice: %s", c.Name(), strings.TrimSpace(line))
			}
		}
	}
}
