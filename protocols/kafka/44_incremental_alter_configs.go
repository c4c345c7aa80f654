package kafka

// IncrementalAlterConfigs, versions 0-1: SET and DELETE of the topic
// configs tern honours. APPEND and SUBTRACT apply to list configs only;
// cleanup.policy accepts only "delete", so they get INVALID_CONFIG.

import (
	"fmt"

	"github.com/ternmq/tern/protocols"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.IncrementalAlterConfigs, 0, 1, handleIncrementalAlterConfigs) }

func handleIncrementalAlterConfigs(c *conn, kr kmsg.Request, r *reply) error {
	req := kr.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range req.Resources {
		res := kmsg.NewIncrementalAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		res.ErrorCode, res.ErrorMessage = c.s.alterConfigs(c.ctx, rr.ResourceType, rr.ResourceName, req.ValidateOnly, func(map[string]string) (map[string]string, []string, error) {
			set := map[string]string{}
			var remove []string
			for _, kv := range rr.Configs {
				switch kv.Op {
				case kmsg.IncrementalAlterConfigOpSet:
					if kv.Value == nil {
						return nil, nil, fmt.Errorf("%w: SET %s needs a value", protocols.ErrInvalidConfig, kv.Name)
					}
					set[kv.Name] = *kv.Value
				case kmsg.IncrementalAlterConfigOpDelete:
					remove = append(remove, kv.Name)
				default:
					return nil, nil, fmt.Errorf("%w: %s: operation %v applies to list configs; use SET or DELETE", protocols.ErrInvalidConfig, kv.Name, kv.Op)
				}
			}
			return set, remove, nil
		})
		resp.Resources = append(resp.Resources, res)
	}
	r.resp = resp
	return nil
}
