package main

// The Pulsar WebSocket API v2 client side: a producer session sends {"payload", "properties",
// "key", "context"} and gets {"result":"ok","messageId","context"} back for each; a consumer or
// reader session pushes {"messageId","payload","properties","publishTime","key",...} and takes
// {"messageId"} as the acknowledgement (a reader too: acks free its window). Message ids are
// base64 MessageIdData; tern's entry id plus batch index is the message's offset.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/protocols/pulsar"
)

// wsWindow bounds the messages a producer has in flight.
const wsWindow = 256

// wsURL is the WebSocket URL of a path on the node.
func wsURL(api *apiFlags, path string, q url.Values) string {
	base := api.base()
	switch {
	case strings.HasPrefix(base, "https://"):
		base = "wss://" + strings.TrimPrefix(base, "https://")
	case strings.HasPrefix(base, "http://"):
		base = "ws://" + strings.TrimPrefix(base, "http://")
	}
	u := base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

func wsTopicPath(kind string, t protocols.TopicName) string {
	return "/ws/v2/" + kind + "/persistent/" + url.PathEscape(t.Tenant) + "/" + url.PathEscape(t.Namespace) + "/" + url.PathEscape(t.Local)
}

// wsDial opens a session and turns a refused upgrade into what to change.
func wsDial(ctx context.Context, api *apiFlags, u string) (*websocket.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(dctx, u, nil)
	if err == nil {
		c.SetReadLimit(64 << 20)
		return c, nil
	}
	if resp == nil {
		return nil, fmt.Errorf("cannot reach tern at %s: %w (is the node running? set --url or TERN_URL)", api.base(), err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	var e struct {
		Reason string `json:"reason"`
		Error  string `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	msg := strings.TrimSpace(e.Reason + e.Error)
	if msg == "" {
		msg = strings.TrimSpace(string(body))
	}
	if resp.StatusCode == http.StatusNotFound && !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return nil, fmt.Errorf("the node at %s does not serve Pulsar's WebSocket API (/ws/v2): use --protocol kafka, or a node that serves it", api.base())
	}
	ae := &apiError{Status: resp.StatusCode, Msg: plainMessage(msg)}
	if resp.StatusCode == http.StatusBadRequest {
		return nil, usageError{ae}
	}
	return nil, ae
}

// wsClosed explains why a session ended.
func wsClosed(err error) error {
	if code := websocket.CloseStatus(err); code != -1 {
		var ce websocket.CloseError
		if errors.As(err, &ce) && ce.Reason != "" {
			return fmt.Errorf("the node closed the session: %s (code %d)", plainMessage(ce.Reason), code)
		}
		return fmt.Errorf("the node closed the session (code %d)", code)
	}
	return err
}

// idOffset reads partition and offset from a WebSocket message id.
func idOffset(s string) (partition int, offset int64, err error) {
	id, err := pulsar.ParseMessageID(s)
	if err != nil {
		return 0, 0, err
	}
	offset = int64(id.GetEntryId())
	if b := id.GetBatchIndex(); b > 0 {
		offset += int64(b)
	}
	return int(id.GetPartition()), offset, nil
}

type wsProducer struct {
	c *websocket.Conn
	// slots bounds the messages in flight; pending holds their callbacks in send order.
	slots   chan struct{}
	mu      sync.Mutex
	pending map[string]func(produced, error)
	next    int64
	// inflight counts sends without a result, for Flush.
	inflight sync.WaitGroup
	// done is closed when the ack reader ends; err says why.
	done chan struct{}
	err  error
}

func newWSProducer(ctx context.Context, o clientOptions) (producer, error) {
	q := url.Values{}
	if o.name != "" {
		q.Set("producerName", o.name)
	}
	c, err := wsDial(ctx, o.api, wsURL(o.api, wsTopicPath("producer", o.topic), q))
	if err != nil {
		return nil, err
	}
	p := &wsProducer{c: c, slots: make(chan struct{}, wsWindow), pending: map[string]func(produced, error){}, done: make(chan struct{})}
	go p.readAcks()
	return p, nil
}

type wsAck struct {
	Result    string `json:"result"`
	ErrorMsg  string `json:"errorMsg"`
	MessageID string `json:"messageId"`
	Context   string `json:"context"`
}

// readAcks owns the read side: it matches acks to pending sends by context.
func (p *wsProducer) readAcks() {
	defer close(p.done)
	for {
		var a wsAck
		if err := wsjson.Read(context.Background(), p.c, &a); err != nil {
			p.mu.Lock()
			p.err = wsClosed(err)
			for k, cb := range p.pending {
				cb(produced{}, p.err)
				delete(p.pending, k)
			}
			p.mu.Unlock()
			return
		}
		p.mu.Lock()
		cb, ok := p.pending[a.Context]
		delete(p.pending, a.Context)
		p.mu.Unlock()
		if !ok {
			continue
		}
		<-p.slots
		if a.Result != "ok" {
			cb(produced{}, fmt.Errorf("the node refused the message: %s (%s)", plainMessage(a.ErrorMsg), a.Result))
			continue
		}
		part, off, err := idOffset(a.MessageID)
		if err != nil {
			cb(produced{}, fmt.Errorf("the node answered a message id that does not decode: %w", err))
			continue
		}
		cb(produced{Partition: part, Offset: off, MessageID: a.MessageID}, nil)
	}
}

func (p *wsProducer) Send(ctx context.Context, m outMessage, done func(produced, error)) error {
	select {
	case p.slots <- struct{}{}:
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
	p.mu.Lock()
	if p.err != nil {
		p.mu.Unlock()
		<-p.slots
		return p.err
	}
	p.next++
	id := strconv.FormatInt(p.next, 10)
	p.inflight.Add(1)
	p.pending[id] = func(r produced, err error) {
		defer p.inflight.Done()
		done(r, err)
	}
	p.mu.Unlock()
	msg := map[string]any{"payload": base64.StdEncoding.EncodeToString(m.Value), "context": id}
	if m.Key != nil {
		msg["key"] = *m.Key
	}
	if len(m.Properties) > 0 {
		msg["properties"] = m.Properties
	}
	if err := wsjson.Write(ctx, p.c, msg); err != nil {
		return wsClosed(err)
	}
	return nil
}

func (p *wsProducer) Flush(ctx context.Context) error {
	idle := make(chan struct{})
	go func() {
		p.inflight.Wait()
		close(idle)
	}()
	select {
	case <-idle:
	case <-ctx.Done():
		return ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *wsProducer) Close() error {
	err := p.c.Close(websocket.StatusNormalClosure, "")
	<-p.done
	return ignoreClosed(err)
}

func ignoreClosed(err error) error {
	if err == nil || errors.Is(err, net.ErrClosed) || websocket.CloseStatus(err) != -1 {
		return nil
	}
	return err
}

type wsConsumer struct {
	c *websocket.Conn
}

// newWSConsumer opens a consumer on a subscription (created at o.from when new) or, without
// one, a reader starting at o.from.
func newWSConsumer(ctx context.Context, o clientOptions) (consumer, error) {
	q := url.Values{}
	var path string
	if o.subscription == "" {
		path = wsTopicPath("reader", o.topic)
		q.Set("messageId", o.from)
		if o.name != "" {
			q.Set("readerName", o.name)
		}
	} else {
		if err := createSubscription(ctx, o); err != nil {
			return nil, err
		}
		path = wsTopicPath("consumer", o.topic) + "/" + url.PathEscape(o.subscription)
		q.Set("subscriptionType", o.subType)
		if o.name != "" {
			q.Set("consumerName", o.name)
		}
	}
	c, err := wsDial(ctx, o.api, wsURL(o.api, path, q))
	if err != nil {
		return nil, err
	}
	return &wsConsumer{c: c}, nil
}

// createSubscription makes a new subscription start where asked (a WebSocket consumer's new
// subscription starts at the latest message, as in Pulsar); an existing one keeps its position.
func createSubscription(ctx context.Context, o clientOptions) error {
	t := o.topic
	path := "/admin/v2/persistent/" + url.PathEscape(t.Tenant) + "/" + url.PathEscape(t.Namespace) + "/" + url.PathEscape(t.Local) +
		"/subscription/" + url.PathEscape(o.subscription)
	id := map[string]int64{"ledgerId": -1, "entryId": -1}
	if o.from == "latest" {
		id = map[string]int64{"ledgerId": 1<<63 - 1, "entryId": 1<<63 - 1}
	}
	err := o.api.call(ctx, "PUT", path, id, nil)
	switch {
	case err == nil, isStatus(err, http.StatusConflict):
		return nil
	case isStatus(err, http.StatusNotFound):
		return fmt.Errorf("topic %s does not exist (tern topics create %s)", t, short(t.String()))
	}
	return err
}

type wsPush struct {
	MessageID       string            `json:"messageId"`
	Payload         string            `json:"payload"`
	Properties      map[string]string `json:"properties"`
	PublishTime     string            `json:"publishTime"`
	EventTime       string            `json:"eventTime"`
	RedeliveryCount int               `json:"redeliveryCount"`
	Key             *string           `json:"key"`
}

func (c *wsConsumer) Next(ctx context.Context) (inMessage, error) {
	var m wsPush
	if err := wsjson.Read(ctx, c.c, &m); err != nil {
		if ctx.Err() != nil {
			return inMessage{}, ctx.Err()
		}
		return inMessage{}, wsClosed(err)
	}
	value, err := base64.StdEncoding.DecodeString(m.Payload)
	if err != nil {
		return inMessage{}, fmt.Errorf("the node sent a payload that is not base64: %w", err)
	}
	part, off, err := idOffset(m.MessageID)
	if err != nil {
		return inMessage{}, fmt.Errorf("the node sent a message id that does not decode: %w", err)
	}
	in := inMessage{Partition: part, Offset: off, MessageID: m.MessageID, Key: m.Key, Value: value, Properties: m.Properties,
		RedeliveryCount: m.RedeliveryCount, ack: m.MessageID}
	in.PublishTime, _ = time.Parse(time.RFC3339Nano, m.PublishTime)
	if m.EventTime != "" {
		in.EventTime, _ = time.Parse(time.RFC3339Nano, m.EventTime)
	}
	return in, nil
}

func (c *wsConsumer) Ack(ctx context.Context, m inMessage) error {
	if err := wsjson.Write(ctx, c.c, map[string]string{"messageId": m.MessageID}); err != nil {
		return wsClosed(err)
	}
	return nil
}

func (c *wsConsumer) Close() error {
	return ignoreClosed(c.c.Close(websocket.StatusNormalClosure, ""))
}
