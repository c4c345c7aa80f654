package websocket_test

import (
	"errors"
	"testing"
	"time"
)

func errorsAs(err error, target any) bool { return errors.As(err, target) }

func TestSmoke(t *testing.T) {
	n := startNode(t)
	topic := topicName("smoke")
	cons := dial(t, n, consumerPath(topic, "s1", ""))
	prod := dial(t, n, producerPath(topic, ""))
	id := produceOK(t, prod, "hello", map[string]any{"key": "k1", "properties": map[string]string{"a": "b"}, "context": "c1"})
	var m msg
	readJSON(t, cons, 10*time.Second, &m)
	if m.text(t) != "hello" || *m.Key != "k1" || m.Properties["a"] != "b" || m.MessageID != id {
		t.Fatalf("got %+v (id %s)", m, id)
	}
	writeJSON(t, cons, map[string]any{"messageId": m.MessageID})
}
