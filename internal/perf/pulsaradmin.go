package perf

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// CreatePulsarTopic makes a partitioned topic in namespace (tenant/name)
// through Pulsar's admin REST API at adminURL (http://host:port): PUT
// .../partitions with the count. A topic that exists is accepted. The
// Pulsar and WebSocket drivers both create their topics this way.
func CreatePulsarTopic(ctx context.Context, adminURL, namespace, topic string, partitions int) error {
	u := fmt.Sprintf("%s/admin/v2/persistent/%s/%s/partitions", strings.TrimRight(adminURL, "/"), namespace, topic)
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, u, bytes.NewReader(fmt.Appendf(nil, "%d", partitions)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusConflict {
		return fmt.Errorf("PUT %s: HTTP %d %s", u, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}
