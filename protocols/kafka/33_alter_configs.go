package kafka

// AlterConfigs, versions 0-2. As in Kafka the request replaces the topic's
// whole set of overrides: configs left out return to their defaults. Only
// topic resources and the configs tern honours can be altered; a broker
// resource gets INVALID_REQUEST.

import (
	"context"
	"fmt"

	"github.com/ternmq/tern/protocols"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.AlterConfigs, 0, 2, handleAlterConfigs) }

func handleAlterConfigs(c *conn, kr kmsg.Request, r *reply) error {
	req := kr.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range req.Resources {
		res := kmsg.NewAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		res.ErrorCode, res.ErrorMessage = c.s.alterConfigs(c.ctx, rr.ResourceType, rr.ResourceName, req.ValidateOnly, func(cur map[string]string) (map[string]string, []string, error) {
			set := map[string]string{}
			for _, kv := range rr.Configs {
				if kv.Value == nil {
					return nil, nil, fmt.Errorf("%w: %s has a null value; leave it out to reset it", protocols.ErrInvalidConfig, kv.Name)
				}
				set[kv.Name] = *kv.Value
			}
			var remove []string
			for k := range cur {
				if _, ok := set[k]; !ok {
					remove = append(remove, k)
				}
			}
			return set, remove, nil
		})
		resp.Resources = append(resp.Resources, res)
	}
	r.resp = resp
	return nil
}

// alterConfigs computes a topic's config change from its current overrides
// and applies it (or only validates it), answering with an error code and
// message. Only topic resources can be altered.
func (s *Server) alterConfigs(ctx context.Context, typ kmsg.ConfigResourceType, topic string, validateOnly bool, change func(cur map[string]string) (set map[string]string, remove []string, err error)) (int16, *string) {
	if typ != kmsg.ConfigResourceTypeTopic {
		return kerr.InvalidRequest.Code, kmsg.StringPtr("only topic configs can be altered")
	}
	err := s.alterTopicConfig(ctx, topic, validateOnly, change)
	return errCode(err), errMessage(err)
}

func (s *Server) alterTopicConfig(ctx context.Context, topic string, validateOnly bool, change func(cur map[string]string) (map[string]string, []string, error)) error {
	name, err := s.topicName(topic)
	if err != nil {
		return err
	}
	t, err := s.b.Topic(ctx, name)
	if err != nil {
		return err
	}
	set, remove, err := change(t.Config)
	if err != nil {
		return err
	}
	if validateOnly {
		return s.b.ValidateTopicConfig(set)
	}
	return s.b.AlterTopicConfig(ctx, name, set, remove)
}
