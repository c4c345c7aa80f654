package regions

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/memberlist"
)

// Tag keys. They are short because all tags of a node share serf's
// 512-byte metadata budget, and they are part of the mesh protocol: a node
// ignores keys it does not know, so new tags can be added later.
const (
	TagRegion  = "region"
	TagRack    = "rack"
	TagQUIC    = "quic"
	TagKafka   = "kafka"
	TagPulsar  = "pulsar"
	TagHTTP    = "http"
	TagVersion = "v"
	TagID      = "id"
)

// idLen is the length of a node identity: 16 random bytes in hex.
const idLen = 32

var placeholderID = strings.Repeat("0", idLen)

// Tags is a node's published metadata, decoded into typed fields.
type Tags struct {
	// Region the node serves.
	Region string
	// Rack or zone inside the region; may be empty.
	Rack string
	// ID is the node's persistent identity (see Config.DataDir). It tells a
	// restart of the same node from a different node reusing its name.
	ID string
	// Advertise holds the node's service addresses and version.
	Advertise
}

// tags builds this node's serf tags from its config and identity.
func (c Config) tags(id string) map[string]string {
	t := map[string]string{TagRegion: c.Region, TagID: id}
	put := func(k, v string) {
		if v != "" {
			t[k] = v
		}
	}
	put(TagRack, c.Rack)
	put(TagQUIC, c.Advertise.QUIC)
	put(TagKafka, c.Advertise.Kafka)
	put(TagPulsar, c.Advertise.Pulsar)
	put(TagHTTP, c.Advertise.HTTP)
	put(TagVersion, c.Advertise.Version)
	return t
}

// encodedTagsLen is the size serf gives the tags on the wire: a magic byte
// and the msgpack map (serf.encodeTags), which must fit
// memberlist.MetaMaxSize.
func encodedTagsLen(tags map[string]string) int {
	var buf bytes.Buffer
	buf.WriteByte(0xff)
	if err := codec.NewEncoder(&buf, &codec.MsgpackHandle{}).Encode(tags); err != nil {
		// A map of strings always encodes; failing here is a broken codec.
		panic(fmt.Sprintf("regions: encoding tags: %v", err))
	}
	return buf.Len()
}

// encodeTagsChecked returns the encoded size, or ErrTagsTooLarge with the
// tags listed largest first so the operator knows what to shorten.
func encodeTagsChecked(tags map[string]string) (int, error) {
	n := encodedTagsLen(tags)
	if n <= memberlist.MetaMaxSize {
		return n, nil
	}
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return len(tags[b]) + len(b) - len(tags[a]) - len(a) })
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s (%d bytes)", k, len(k)+len(tags[k])))
	}
	return n, fmt.Errorf("%w: the tags encode to %d bytes and serf allows %d; shorten them by %d bytes "+
		"(shorter host names in the advertised addresses, version, rack or region); largest first: %s",
		ErrTagsTooLarge, n, memberlist.MetaMaxSize, n-memberlist.MetaMaxSize, strings.Join(parts, ", "))
}

// ParseTags decodes a peer's serf tags. Unknown keys are ignored (a newer
// peer may publish more). A malformed value is left empty in the result and
// reported in the error, so one bad field does not hide the rest.
func ParseTags(m map[string]string) (Tags, error) {
	var t Tags
	var errs []error
	name := func(key string, dst *string, required bool) {
		v, ok := m[key]
		if !ok || v == "" {
			if required {
				errs = append(errs, fmt.Errorf("tag %q is missing", key))
			}
			return
		}
		if len(v) > maxRegionLen || strings.ContainsFunc(v, func(r rune) bool { return !validRegionRune(r) }) {
			errs = append(errs, fmt.Errorf("tag %q=%q: want at most %d of %s", key, v, maxRegionLen, regionChars))
			return
		}
		*dst = v
	}
	addr := func(key string, dst *string) {
		v, ok := m[key]
		if !ok || v == "" {
			return
		}
		if err := validAddr(v); err != nil {
			errs = append(errs, fmt.Errorf("tag %q=%q: %w", key, v, err))
			return
		}
		*dst = v
	}
	name(TagRegion, &t.Region, true)
	name(TagRack, &t.Rack, false)
	if v := m[TagID]; v != "" {
		if !validID(v) {
			errs = append(errs, fmt.Errorf("tag %q=%q: want %d lowercase hex digits", TagID, v, idLen))
		} else {
			t.ID = v
		}
	}
	addr(TagQUIC, &t.QUIC)
	addr(TagKafka, &t.Kafka)
	addr(TagPulsar, &t.Pulsar)
	addr(TagHTTP, &t.HTTP)
	if v := m[TagVersion]; v != "" {
		if strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			errs = append(errs, fmt.Errorf("tag %q=%q contains control characters", TagVersion, v))
		} else {
			t.Version = v
		}
	}
	return t, errors.Join(errs...)
}

// validAddr accepts host:port with a non-empty host and a port in 1..65535.
func validAddr(v string) error {
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return fmt.Errorf("want host:port: %w", err)
	}
	if host == "" {
		return errors.New("want host:port: the host is empty")
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return errors.New("want host:port with a port in 1..65535")
	}
	return nil
}
