package regions

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestParseLogLine(t *testing.T) {
	for _, c := range []struct {
		in        string
		level     slog.Level
		component string
		msg       string
	}{
		{"[INFO] memberlist: Suspect n3 has failed, no acks received\n", slog.LevelInfo, "memberlist", "Suspect n3 has failed, no acks received"},
		{"[ERR] memberlist: failed to receive: x from=1.2.3.4:5", slog.LevelError, "memberlist", "failed to receive: x from=1.2.3.4:5"},
		{"[WARN] serf: Shutdown without a Leave", slog.LevelWarn, "serf", "Shutdown without a Leave"},
		{"[DEBUG] memberlist: Stream connection from=x", slog.LevelDebug, "memberlist", "Stream connection from=x"},
		{"[TRACE] serf: Rejected coordinate", slog.LevelDebug - 4, "serf", "Rejected coordinate"},
		{"plain line: with colon", slog.LevelInfo, "gossip", "plain line: with colon"},
		{"[", slog.LevelInfo, "gossip", "["},
		{"", slog.LevelInfo, "gossip", ""},
	} {
		level, component, msg := parseLogLine(c.in)
		if level != c.level || component != c.component || msg != c.msg {
			t.Errorf("%q: got %v %q %q", c.in, level, component, msg)
		}
	}
}

func TestLogBridge(t *testing.T) {
	var buf bytes.Buffer
	var suspects []string
	b := &logBridge{
		log:       slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})),
		onSuspect: func(name string) { suspects = append(suspects, name) },
	}
	l := newStdLogger(b)
	l.Printf("[INFO] memberlist: Suspect %s has failed, no acks received", "node-1.eu")
	l.Printf("[INFO] serf: Suspect fake has failed, no acks received") // not memberlist
	l.Printf("[INFO] serf: EventMemberJoin: x 127.0.0.1")              // demoted to debug
	l.Printf("[DEBUG] memberlist: noisy")
	if len(suspects) != 1 || suspects[0] != "node-1.eu" {
		t.Errorf("suspects %v", suspects)
	}
	out := buf.String()
	if !strings.Contains(out, "component=memberlist") || strings.Contains(out, "EventMemberJoin") || strings.Contains(out, "noisy") {
		t.Errorf("log output:\n%s", out)
	}
}

// FuzzParseLogLine: any line is split without panicking, the message is
// the tail of the line, and the suspect hook only fires on memberlist's
// exact wording.
func FuzzParseLogLine(f *testing.F) {
	for _, s := range []string{
		"[INFO] memberlist: Suspect n has failed, no acks received",
		"[INFO] memberlist: Suspect  has failed, no acks received",
		"[WARN] x", "[]", "[INFO]", "[INFO] : y", "a: b", "\n", "[ERR] memberlist: ",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		_, component, msg := parseLogLine(line)
		if component == "" || !strings.Contains(line, msg) {
			t.Fatalf("%q -> %q %q", line, component, msg)
		}
		b := &logBridge{log: slog.New(slog.DiscardHandler), onSuspect: func(name string) {
			if !strings.Contains(line, "Suspect "+name+" has failed") {
				t.Fatalf("suspect %q from %q", name, line)
			}
		}}
		b.Write([]byte(line))
	})
}

func FuzzParseKeyring(f *testing.F) {
	for _, s := range []string{`["` + key1 + `"]`, `["` + key2 + `","` + key1 + `"]`, `[]`, `null`, `{}`, `[""]`, `["AAAA"]`, `[1]`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, err := parseKeyring(data)
		if err != nil {
			return
		}
		for _, k := range keys {
			if l := len(k); l != 16 && l != 24 && l != 32 {
				t.Fatalf("accepted a %d-byte key", l)
			}
		}
		path := t.TempDir() + "/k.json"
		if err := writeKeyring(path, keys); err != nil {
			t.Fatal(err)
		}
		if _, err := loadKeyring(Config{KeyringFile: path}, func(string, ...any) {}); err != nil {
			t.Fatalf("written keyring does not load: %v", err)
		}
	})
}
