package kafka

// DescribeConfigs, versions 0-4. Topics report the configs tern honours
// (retention.ms, retention.bytes, max.message.bytes, cleanup.policy) and
// the read-only message.timestamp.type, with their source: a topic
// override, a namespace policy (reported as the dynamic default broker
// config) or the node default. Brokers report no configs. Synonyms and
// documentation are not given.

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.DescribeConfigs, 0, 4, handleDescribeConfigs) }

func configSource(s string) kmsg.ConfigSource {
	switch s {
	case "topic":
		return kmsg.ConfigSourceDynamicTopicConfig
	case "namespace":
		return kmsg.ConfigSourceDynamicDefaultBrokerConfig
	}
	return kmsg.ConfigSourceDefaultConfig
}

func configType(name string) kmsg.ConfigType {
	switch name {
	case "retention.ms", "retention.bytes":
		return kmsg.ConfigTypeLong
	case "max.message.bytes":
		return kmsg.ConfigTypeInt
	case "cleanup.policy":
		return kmsg.ConfigTypeList
	}
	return kmsg.ConfigTypeString
}

func handleDescribeConfigs(c *conn, kr kmsg.Request, r *reply) error {
	req := kr.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		res := kmsg.NewDescribeConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			name, err := c.s.topicName(rr.ResourceName)
			if err == nil {
				_, err = c.s.b.Topic(c.ctx, name)
			}
			if err != nil {
				res.ErrorCode, res.ErrorMessage = errCode(err), errMessage(err)
				break
			}
			entries, err := c.s.b.TopicConfig(c.ctx, name)
			if err != nil {
				res.ErrorCode, res.ErrorMessage = errCode(err), errMessage(err)
				break
			}
			for _, e := range entries {
				if rr.ConfigNames != nil && !slices.Contains(rr.ConfigNames, e.Name) {
					continue
				}
				ce := kmsg.NewDescribeConfigsResponseResourceConfig()
				ce.Name, ce.Value = e.Name, kmsg.StringPtr(e.Value)
				ce.ReadOnly, ce.IsSensitive = e.ReadOnly, e.Sensitive
				ce.Source = configSource(e.Source)
				ce.IsDefault = e.Source == "default"
				ce.ConfigType = configType(e.Name)
				res.Configs = append(res.Configs, ce)
			}
		case kmsg.ConfigResourceTypeBroker:
		default:
			res.ErrorCode = kerr.InvalidRequest.Code
			res.ErrorMessage = kmsg.StringPtr("only topic (2) and broker (4) configs can be described")
		}
		resp.Resources = append(resp.Resources, res)
	}
	r.resp = resp
	return nil
}
