package websocket

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/ternmq/tern/protocols"
)

// Server is the Pulsar WebSocket API v2 front end: an http.Handler the node
// mounts at /ws/ on its HTTP port. Each request upgrades to one session: a
// producer, a consumer, a reader or a ping-pong session.
//
// What a session needs (its producer names, its subscriptions) is set up
// before the upgrade, so a refusal is an HTTP status with a message, as in
// Pulsar; a session that is running reports errors with Pulsar's close
// codes (see CloseCode) or, for a producer, in the ack of each message.
type Server struct {
	cfg Config
	b   protocols.Messaging
	log *slog.Logger
	m   counters

	mu struct {
		sync.Mutex
		sessions map[*session]struct{}
		reserved int
		closing  bool
	}
	wg sync.WaitGroup
}

// New returns a server for the node b.
func New(cfg Config, b protocols.Messaging) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("websocket: config: %w", err)
	}
	s := &Server{cfg: cfg, b: b, log: cfg.Logger}
	s.mu.sessions = map[*session]struct{}{}
	return s, nil
}

// ServeHTTP upgrades a request to a session and serves it until it ends.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := s.serve(w, r); err != nil {
		status, msg := upgradeStatus(err, "Failed to create producer/consumer")
		s.m.refused.Add(1)
		s.log.Debug("WebSocket session refused", "url", loggedURL(r), "remote", r.RemoteAddr, "status", status, "reason", msg)
		http.Error(w, msg, status)
	}
}

// serve returns an error only before the upgrade.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		return &httpError{status: http.StatusMethodNotAllowed, msg: "WebSocket sessions open with GET"}
	}
	t, err := parsePath(r.URL.EscapedPath())
	if err != nil {
		return err
	}
	if !headerHasToken(r.Header, "Upgrade", "websocket") {
		return &httpError{status: http.StatusUpgradeRequired, msg: "this is a WebSocket endpoint of Pulsar's WebSocket API v2; connect with a WebSocket client"}
	}
	if err := s.checkOrigin(r); err != nil {
		return err
	}
	if err := s.reserve(); err != nil {
		return err
	}
	registered := false
	defer func() {
		if !registered {
			s.unreserve()
		}
	}()
	if t.kind != epPingPong && s.cfg.Authenticate != nil {
		a := Access{Topic: t.topic, Subscription: t.subscription, Action: map[endpoint]string{epProducer: "produce", epConsumer: "consume", epReader: "read"}[t.kind]}
		if err := s.cfg.Authenticate(r, requestToken(r), a); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.SetupTimeout)
	defer cancel()
	var ep endpointSession
	switch t.kind {
	case epProducer:
		ep, err = s.setupProducer(ctx, t, newParams(r.URL.Query()), r.RemoteAddr)
	case epConsumer, epReader:
		ep, err = s.setupConsumer(ctx, t, newParams(r.URL.Query()), r.RemoteAddr)
	default:
		ep = pingPong{}
	}
	if err != nil {
		what := "Failed to create producer"
		if t.kind != epProducer {
			what = "Failed to subscribe"
		}
		status, msg := upgradeStatus(err, what)
		return &httpError{status: status, msg: msg}
	}
	cw := &corkingWriter{ResponseWriter: w, writes: &s.m.writes}
	c, err := websocket.Accept(cw, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		// Accept has answered the client.
		ep.abort()
		s.log.Debug("WebSocket upgrade failed", "url", loggedURL(r), "remote", r.RemoteAddr, "err", err)
		return nil
	}
	ss := s.newSession(c, t.kind, r.RemoteAddr)
	ss.cork = cw.conn
	ss.log = ss.log.With(logAttrs(t)...)
	ss.ep = ep
	// The client has its 101 from here on: the session counts as opened
	// even when a shutdown that began meanwhile closes it at once.
	s.m.opened(t.kind, 1)
	registered = s.register(ss)
	if !registered {
		// Not counted as open once the client can see it closed: a
		// shutdown's caller reads the metrics after its sessions end.
		ep.abort()
		s.m.opened(t.kind, -1)
		ss.closeWith(websocket.StatusGoingAway, "the node is shutting down")
		ss.end()
		return nil
	}
	// The session stops counting as open before it deregisters: Close
	// returns once every session has deregistered, and the metrics then
	// show none open.
	defer func() {
		s.m.opened(t.kind, -1)
		s.deregister(ss)
	}()
	ep.run(ss)
	ss.end()
	return nil
}

// endpointSession is a producer, consumer, reader or ping-pong session
// set up and waiting for its connection.
type endpointSession interface {
	// run serves the session: it reads client messages in the calling
	// goroutine until the session ends, then releases what setup took.
	run(ss *session)
	// abort releases what setup took when the upgrade fails.
	abort()
	// goAway ends the session gracefully when the server shuts down; it
	// may be called from any goroutine, before run has started.
	goAway(ss *session)
}

// reserve counts a session against MaxSessions before its setup.
func (s *Server) reserve() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closing {
		return ErrClosed
	}
	if len(s.mu.sessions)+s.mu.reserved >= s.cfg.MaxSessions {
		return &httpError{status: http.StatusServiceUnavailable,
			msg: fmt.Sprintf("the node has the maximum of %d WebSocket sessions open; retry later or raise the limit", s.cfg.MaxSessions)}
	}
	s.mu.reserved++
	return nil
}

func (s *Server) unreserve() {
	s.mu.Lock()
	s.mu.reserved--
	s.mu.Unlock()
}

// register turns a reservation into an open session.
func (s *Server) register(ss *session) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closing {
		return false
	}
	s.mu.reserved--
	s.mu.sessions[ss] = struct{}{}
	s.wg.Add(1)
	return true
}

func (s *Server) deregister(ss *session) {
	s.mu.Lock()
	delete(s.mu.sessions, ss)
	s.mu.Unlock()
	s.wg.Done()
}

// checkOrigin applies AllowedOrigins to browser requests.
func (s *Server) checkOrigin(r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin == "" || len(s.cfg.AllowedOrigins) == 0 {
		return nil
	}
	u, err := url.Parse(origin)
	if err != nil {
		return &httpError{status: http.StatusForbidden, msg: "the Origin header is not a URL"}
	}
	if strings.EqualFold(u.Host, r.Host) {
		return nil
	}
	for _, p := range s.cfg.AllowedOrigins {
		if ok, _ := path.Match(strings.ToLower(p), strings.ToLower(u.Host)); ok {
			return nil
		}
	}
	return &httpError{status: http.StatusForbidden, msg: fmt.Sprintf("pages from %s may not open WebSocket sessions on this node; add it to the allowed origins", u.Host)}
}

// headerHasToken reports whether a comma-separated header lists token.
func headerHasToken(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// Close stops accepting sessions and ends the open ones: producers first
// answer the messages they have in flight, then every session closes with
// 1001 (going away). It waits for them, or until ctx ends, when it drops
// the connections that remain.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	s.mu.closing = true
	open := make([]*session, 0, len(s.mu.sessions))
	for ss := range s.mu.sessions {
		open = append(open, ss)
	}
	s.mu.Unlock()
	for _, ss := range open {
		go ss.ep.goAway(ss)
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	for _, ss := range open {
		ss.closeNow()
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		return errors.New("websocket: sessions did not end after their connections were dropped")
	}
	return ctx.Err()
}

// pingPong is Pulsar's /ws/v2/pingpong: a session that only answers
// pings (the WebSocket library does) and ignores what else it receives.
type pingPong struct{}

func (pingPong) abort() {}

func (pingPong) goAway(ss *session) {
	ss.closeWith(websocket.StatusGoingAway, "the node is shutting down")
}

func (pingPong) run(ss *session) {
	ss.start(func() {
		for {
			select {
			case <-ss.ctx.Done():
				return
			case <-ss.wake:
			}
			if ss.flush() != nil {
				return
			}
		}
	})
	for {
		if _, err := ss.read(); err != nil {
			ss.readErr(err)
			return
		}
	}
}
