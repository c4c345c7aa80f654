package wsclient

import (
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
)

// TestOutgoingJSONAsBefore: a message to send encodes to the bytes
// encoding/json made of it with the payload in base64 first: an empty key
// still sent, no properties left out, a missing payload "", invalid UTF-8
// replaced (written as itself rather than as \ufffd), properties sorted.
func TestOutgoingJSONAsBefore(t *testing.T) {
	empty, odd := "", "k\xfe<&>"
	for _, m := range []outgoing{
		{Payload: []byte("hello \x00\xff"), Properties: map[string]string{"b": "<&>", "a": "\xff"}, Key: &odd, Context: "7"},
		{Payload: nil, Key: &empty, Context: "8"},
		{Payload: []byte{}, Properties: map[string]string{}, Context: "9"},
	} {
		got, err := jsonv2.Marshal(m, encodeOpts)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(struct {
			Payload    string            `json:"payload"`
			Properties map[string]string `json:"properties,omitempty"`
			Key        *string           `json:"key,omitempty"`
			Context    string            `json:"context"`
		}{base64.StdEncoding.EncodeToString(m.Payload), m.Properties, m.Key, m.Context})
		if err != nil {
			t.Fatal(err)
		}
		if w := strings.ReplaceAll(string(want), `\ufffd`, "\ufffd"); string(got) != w {
			t.Errorf("encoded\n%s\nwant\n%s", got, w)
		}
	}
}

// TestPushDecodesAsBefore: a pushed message decodes as encoding/json
// decoded it, names in any case and unknown members ignored.
func TestPushDecodesAsBefore(t *testing.T) {
	for _, in := range []string{
		`{"messageId":"CAAQAw==","payload":"aGk=","properties":{"a":"1"},"publishTime":"2023-11-14T22:13:20.000Z","redeliveryCount":2,"key":"k","eventTime":"x"}`,
		`{"MessageId":"CAAQBA==","PAYLOAD":"","properties":null,"unknown":[1,2],"redeliveryCount":0}`,
	} {
		var got, want Push
		if err := jsonv2.Unmarshal([]byte(in), &got, decodeOpts); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: decoded %+v, want %+v", in, got, want)
		}
	}
}

// BenchmarkReadPush decodes a pushed 1 KiB message as the client does and,
// beside it, as encoding/json did; MB/s counts payload bytes.
func BenchmarkReadPush(b *testing.B) {
	in := []byte(`{"messageId":"CAAQAw==","payload":"` + base64.StdEncoding.EncodeToString(make([]byte, 1024)) +
		`","properties":{"app":"bench"},"publishTime":"2023-11-14T22:13:20.000Z","redeliveryCount":0}`)
	for _, c := range []struct {
		name   string
		decode func([]byte, *Push) error
	}{
		{"tern", func(b []byte, m *Push) error { return jsonv2.Unmarshal(b, m, decodeOpts) }},
		{"encoding-json", func(b []byte, m *Push) error { return json.Unmarshal(b, m) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(1024)
			b.ReportAllocs()
			for b.Loop() {
				var m Push
				if err := c.decode(in, &m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
