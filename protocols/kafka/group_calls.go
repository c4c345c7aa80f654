package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// parkInGroup runs f on the group's goroutine and defers the reply until f
// (now or at a later rebalance step) calls answer, exactly once. fail
// builds the response for an error code.
func (c *conn) parkInGroup(r *reply, id string, f func(g *group, answer func(kmsg.Response)), fail func(int16) kmsg.Response) {
	if id == "" {
		r.resp = fail(kerr.InvalidGroupID.Code)
		return
	}
	ch := make(chan kmsg.Response, 1)
	answer := func(resp kmsg.Response) { ch <- resp }
	if !c.s.groups.run(id, func(g *group) { f(g, answer) }) {
		r.resp = fail(kerr.CoordinatorNotAvailable.Code)
		return
	}
	r.poll = true
	r.wait = func(ctx context.Context) kmsg.Response {
		select {
		case resp := <-ch:
			return resp
		case <-ctx.Done():
			return fail(kerr.CoordinatorNotAvailable.Code)
		}
	}
}

// run runs f on group id's goroutine (starting the group if needed) and
// waits for it; false when the coordinator is closed.
func (co *coordinator) run(id string, f func(g *group)) bool {
	for range 3 { // a group deleted meanwhile is started afresh
		g := co.group(id)
		if g == nil {
			return false
		}
		done := make(chan struct{})
		if g.do(func() { f(g); close(done) }) {
			<-done
			return true
		}
	}
	return false
}

// runExisting is run for a group that is already running; false when
// there is none.
func (co *coordinator) runExisting(id string, f func(g *group)) bool {
	g := co.existing(id)
	if g == nil {
		return false
	}
	done := make(chan struct{})
	if !g.do(func() { f(g); close(done) }) {
		return false
	}
	<-done
	return true
}

// clientHost is the client's address as Kafka reports it.
func (c *conn) clientHost() string { return "/" + hostOf(c.remote) }

func hostOf(addr string) string {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			h := addr[:i]
			if len(h) > 1 && h[0] == '[' && h[len(h)-1] == ']' {
				h = h[1 : len(h)-1]
			}
			return h
		}
	}
	return addr
}
