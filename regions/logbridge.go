package regions

import (
	"context"
	"log"
	"log/slog"
	"strings"
)

// logBridge is the io.Writer behind the *log.Logger handed to serf and
// memberlist. Each Write is one line such as
//
//	[INFO] memberlist: Suspect n3 has failed, no acks received
//
// which becomes one slog record at the matching level, with the source
// ("serf" or "memberlist") under the key "component".
//
// The bridge is also the only place where memberlist says that it started
// to suspect a peer: memberlist has no delegate for it, and its Members()
// does not fill in Node.State. onSuspect gets the peer's name for the line
// memberlist prints right before it marks the peer suspect after a failed
// direct and indirect probe. It must not block: it runs on memberlist's
// probe goroutine.
type logBridge struct {
	log       *slog.Logger
	onSuspect func(name string)
}

func newStdLogger(b *logBridge) *log.Logger { return log.New(b, "", 0) }

const (
	suspectPrefix = "Suspect "
	suspectSuffix = " has failed, no acks received"
)

func (b *logBridge) Write(p []byte) (int, error) {
	level, component, msg := parseLogLine(string(p))
	if component == "memberlist" && b.onSuspect != nil {
		if name, ok := suspectName(msg); ok {
			b.onSuspect(name)
		}
	}
	// serf announces every member event at INFO; the directory logs the
	// same transitions with structured keys, so serf's lines go to DEBUG.
	if component == "serf" && level == slog.LevelInfo && strings.HasPrefix(msg, "EventMember") {
		level = slog.LevelDebug
	}
	ctx := context.Background()
	if b.log.Enabled(ctx, level) {
		b.log.Log(ctx, level, msg, "component", component)
	}
	return len(p), nil
}

// suspectName extracts the peer from memberlist's suspect line. The prefix
// and suffix must not overlap (the name is never empty).
func suspectName(msg string) (string, bool) {
	rest, ok := strings.CutPrefix(msg, suspectPrefix)
	if !ok {
		return "", false
	}
	name, ok := strings.CutSuffix(rest, suspectSuffix)
	return name, ok && name != ""
}

// parseLogLine splits "[LEVEL] component: message". Lines that do not
// follow the convention are logged whole at INFO.
func parseLogLine(line string) (slog.Level, string, string) {
	line = strings.TrimRight(line, "\r\n")
	level := slog.LevelInfo
	if strings.HasPrefix(line, "[") {
		if end := strings.IndexByte(line, ']'); end > 0 {
			switch line[1:end] {
			case "TRACE":
				level = slog.LevelDebug - 4
			case "DEBUG":
				level = slog.LevelDebug
			case "INFO":
				level = slog.LevelInfo
			case "WARN", "WARNING":
				level = slog.LevelWarn
			case "ERR", "ERROR":
				level = slog.LevelError
			}
			line = strings.TrimLeft(line[end+1:], " ")
		}
	}
	component := "gossip"
	if i := strings.Index(line, ": "); i > 0 && !strings.ContainsAny(line[:i], " \t") {
		component, line = line[:i], line[i+2:]
	}
	return level, component, line
}
