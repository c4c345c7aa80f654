package kafka

// ApiVersions, versions 0-3. v4 is not advertised.
//
// A request at an unknown version gets a v0-layout answer with
// UNSUPPORTED_VERSION and the served ranges (KIP-511), so clients retry at
// a version both sides know. v3 client software names are checked as Kafka
// does (INVALID_REQUEST when malformed). No finalized features are
// reported, in particular no transaction.version, so clients keep classic
// transaction semantics and Produce v11 or lower.

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.ApiVersions, 0, 3, handleApiVersions) }

func handleApiVersions(c *conn, kr kmsg.Request, r *reply) error {
	req := kr.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if req.Version >= 3 && (!validSoftware(req.ClientSoftwareName) || !validSoftware(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
	}
	resp.ApiKeys = servedKeys()
	r.resp = resp
	return nil
}

// apiVersionsFallback answers an ApiVersions request whose version is not
// served. The writer encodes it at the request's version number, so it is
// built as v0 here and the writer keeps v0 (see reply.version).
func apiVersionsFallback(int16) kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = servedKeys()
	return fallbackResponse{resp}
}

// fallbackResponse pins a response to v0 whatever version it is asked for.
type fallbackResponse struct{ *kmsg.ApiVersionsResponse }

func (f fallbackResponse) SetVersion(int16) { f.ApiVersionsResponse.SetVersion(0) }

func servedKeys() []kmsg.ApiVersionsResponseApiKey {
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(apis))
	for k, a := range apis {
		keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: a.min, MaxVersion: a.max})
	}
	slices.SortFunc(keys, func(a, b kmsg.ApiVersionsResponseApiKey) int { return int(a.ApiKey) - int(b.ApiKey) })
	return keys
}

// validSoftware is Kafka's [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?.
func validSoftware(s string) bool {
	if s == "" {
		return false
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	if !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '-' && c != '.' {
			return false
		}
	}
	return true
}
