package main

// The Pulsar WebSocket API v2 client side: a producer session sends {"payload", "properties",
// "key", "context"} and gets {"result":"ok","messageId","context"} back for each; a consumer or
// reader session pushes {"messageId","payload","properties","publishTime","key",...} and takes
// {"messageId"} as the acknowledgement (a reader too: acks free its window). Message ids are
// base64 MessageIdData; tern's entry id plus batch index is the message's offset.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/ternmq/tern/internal/wsclient"
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
	return wsclient.TopicPath(kind, t.Tenant, t.Namespace, t.Local)
}

// wsDial opens a session and turns a refused upgrade into what to change.
func wsDial(ctx context.Context, api *apiFlags, u string) (*websocket.Conn, error) {
	c, resp, err := wsclient.Dial(ctx, u)
	if err == nil {
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
	p *wsclient.Producer
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
	return &wsProducer{p: wsclient.NewProducer(c, wsWindow)}, nil
}

// wsExplain words a session's error for a person.
func wsExplain(err error) error {
	var re *wsclient.RefusedError
	if errors.As(err, &re) {
		return fmt.Errorf("the node refused the message: %s (%s)", plainMessage(re.Msg), re.Result)
	}
	return wsClosed(err)
}

func (p *wsProducer) Send(ctx context.Context, m outMessage, done func(produced, error)) error {
	err := p.p.Send(ctx, wsclient.Message{Payload: m.Value, Key: m.Key, Properties: m.Properties}, func(id string, err error) {
		if err != nil {
			done(produced{}, wsExplain(err))
			return
		}
		part, off, err := idOffset(id)
		if err != nil {
			done(produced{}, fmt.Errorf("the node answered a message id that does not decode: %w", err))
			return
		}
		done(produced{Partition: part, Offset: off, MessageID: id}, nil)
	})
	if err != nil {
		return wsExplain(err)
	}
	return nil
}

func (p *wsProducer) Flush(ctx context.Context) error {
	if err := p.p.Flush(ctx); err != nil {
		return wsExplain(err)
	}
	return nil
}

func (p *wsProducer) Close() error { return p.p.Close() }

type wsConsumer struct {
	c *wsclient.Consumer
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
	return &wsConsumer{c: wsclient.NewConsumer(c)}, nil
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

func (c *wsConsumer) Next(ctx context.Context) (inMessage, error) {
	m, err := c.c.Next(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return inMessage{}, ctx.Err()
		}
		return inMessage{}, wsClosed(err)
	}
	value, err := m.Value(nil)
	if err != nil {
		return inMessage{}, err
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
	if err := c.c.Ack(ctx, m.MessageID); err != nil {
		return wsClosed(err)
	}
	return nil
}

func (c *wsConsumer) Close() error { return c.c.Close() }
