package compare

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ternmq/tern/bench/peer"
)

// peerProc is a server running in a child process (tern-bench peer, or
// tern serve when term is set).
type peerProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	term   bool
	addrs  peer.Addrs
	stderr *tailBuffer
	exited chan error
}

// startPeer runs `self peer ARGS --dir dir` and waits for the address line
// it prints once serving.
func startPeer(ctx context.Context, self string, args []string, dir string) (*peerProc, error) {
	cmd := exec.Command(self, append(append([]string{"peer"}, args...), "--dir", dir)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &peerProc{cmd: cmd, stdin: stdin, stderr: &tailBuffer{max: 8 << 10}, exited: make(chan error, 1)}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("compare: start %s peer %s: %w", self, strings.Join(args, " "), err)
	}
	go func() { p.exited <- cmd.Wait() }()
	line := make(chan []byte, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			line <- bytes.Clone(sc.Bytes())
		}
		close(line)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	t := time.NewTimer(60 * time.Second)
	defer t.Stop()
	select {
	case l, ok := <-line:
		if !ok {
			_ = p.stop()
			return nil, fmt.Errorf("compare: peer %s ended before serving: %s", strings.Join(args, " "), p.stderr.String())
		}
		if err := json.Unmarshal(l, &p.addrs); err != nil {
			_ = p.stop()
			return nil, fmt.Errorf("compare: peer %s printed %q: %w", strings.Join(args, " "), l, err)
		}
		return p, nil
	case <-t.C:
		_ = p.stop()
		return nil, fmt.Errorf("compare: peer %s did not serve within 60s: %s", strings.Join(args, " "), p.stderr.String())
	case <-ctx.Done():
		_ = p.stop()
		return nil, ctx.Err()
	}
}

func (p *peerProc) pid() int { return p.cmd.Process.Pid }

// stop closes the peer's stdin (or signals tern serve), which makes it
// shut down cleanly, and kills it if it has not exited within a minute.
func (p *peerProc) stop() error {
	if p.term {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	} else {
		_ = p.stdin.Close()
	}
	t := time.NewTimer(time.Minute)
	defer t.Stop()
	select {
	case err := <-p.exited:
		if err != nil {
			return fmt.Errorf("compare: peer exited: %w: %s", err, p.stderr.String())
		}
		return nil
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("compare: peer did not stop within a minute; killed")
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}
