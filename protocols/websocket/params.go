package websocket

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// params reads query parameters the way Pulsar's handlers do (the first
// value of each), collecting every problem so that one 400 names them all.
type params struct {
	q    url.Values
	errs []error
}

func newParams(q url.Values) *params { return &params{q: q} }

func (p *params) has(name string) bool { return p.q.Has(name) }

func (p *params) str(name string) string { return p.q.Get(name) }

func (p *params) fail(format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf(format, args...))
}

// int64 reads an integer within [lo, hi], or def when absent.
func (p *params) int64(name string, def, lo, hi int64) int64 {
	if !p.has(name) {
		return def
	}
	s := strings.TrimSpace(p.q.Get(name))
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		p.fail("%s=%q is not a whole number", name, clip(s, 40))
		return def
	}
	if v < lo || v > hi {
		p.fail("%s=%d is out of range; want %d to %d", name, v, lo, hi)
		return def
	}
	return v
}

// bool reads true or false (any case), or def when absent.
func (p *params) bool(name string, def bool) bool {
	if !p.has(name) {
		return def
	}
	switch strings.ToLower(strings.TrimSpace(p.q.Get(name))) {
	case "true":
		return true
	case "false":
		return false
	}
	p.fail("%s=%q: want true or false", name, clip(p.q.Get(name), 40))
	return def
}

// oneOf reads one of the allowed values (exact case, as Java's enums), or
// def when absent.
func (p *params) oneOf(name, def string, allowed ...string) string {
	if !p.has(name) {
		return def
	}
	v := p.q.Get(name)
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	p.fail("Invalid %s %s; want one of %s", name, clip(v, 40), strings.Join(allowed, ", "))
	return def
}

// err is every problem, or nil.
func (p *params) err() error {
	if len(p.errs) == 0 {
		return nil
	}
	msgs := make([]string, len(p.errs))
	for i, e := range p.errs {
		msgs[i] = e.Error()
	}
	return badRequest("%s", strings.Join(msgs, "; "))
}
