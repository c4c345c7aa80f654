package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ternmq/tern/internal/testcluster"
	"github.com/ternmq/tern/protocols"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestKafkaApiVersionsFallback: an ApiVersions request at an unknown
// version gets a v0-layout answer with UNSUPPORTED_VERSION and the served
// ranges, and the connection stays usable at a known version.
func TestKafkaApiVersionsFallback(t *testing.T) {
	node := startKafka(t)
	rc := dialRaw(t, node.KafkaAddr())
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(9)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "x", "1"
	rc.corr++
	if _, err := rc.c.Write(frame(req, rc.corr, "raw")); err != nil {
		t.Fatal(err)
	}
	body := rc.readFrame()[4:]
	v0 := kmsg.NewPtrApiVersionsResponse()
	v0.SetVersion(0)
	if err := v0.ReadFrom(body); err != nil {
		t.Fatalf("fallback body is not v0: %v", err)
	}
	if v0.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("fallback error %d, want UNSUPPORTED_VERSION", v0.ErrorCode)
	}
	var apiMax int16 = -1
	for _, k := range v0.ApiKeys {
		if k.ApiKey == 18 {
			apiMax = k.MaxVersion
		}
	}
	if apiMax != 3 {
		t.Fatalf("fallback advertises ApiVersions up to %d, want 3", apiMax)
	}
	req.SetVersion(3)
	resp := rc.roundTrip(req).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 || len(resp.ApiKeys) < 20 || len(resp.FinalizedFeatures) != 0 {
		t.Fatalf("ApiVersions v3: error %d, %d keys, features %v", resp.ErrorCode, len(resp.ApiKeys), resp.FinalizedFeatures)
	}
	for _, k := range resp.ApiKeys {
		if k.ApiKey == 0 && (k.MinVersion != 0 || k.MaxVersion != 11) {
			t.Errorf("Produce advertised %d-%d, want 0-11", k.MinVersion, k.MaxVersion)
		}
	}
}

// TestKafkaAcksZero: acks=0 produces get no response (the next request's
// answer is the next frame), yet are written.
func TestKafkaAcksZero(t *testing.T) {
	node := startKafka(t)
	addr := node.KafkaAddr()
	createTopic(t, addr, "acks0", 1, nil)
	rc := dialRaw(t, addr)
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(7)
	req.Acks = 0
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "acks0"
	rt.Partitions = []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: idemBatch(t, -1, -1, -1, 2)}}
	req.Topics = []kmsg.ProduceRequestTopic{rt}
	rc.corr++
	if _, err := rc.c.Write(frame(req, rc.corr, "raw")); err != nil {
		t.Fatal(err)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(1)
	_ = rc.roundTrip(md) // fails on a correlation mismatch if the produce was answered
	testcluster.WaitFor(t, 5*time.Second, "the acks=0 records", func() bool {
		return highWatermarks(t, node, "acks0", 1)[0] == 2
	})
}

// TestKafkaMetadataAndAdmin covers the metadata and admin APIs: brokers
// with rack and cluster id, auto-creation, ListOffsets, configs,
// CreatePartitions, DeleteRecords, DescribeCluster, group listing and
// deletion, DeleteTopics, and a Pulsar non-partitioned topic seen as one
// partition.
func TestKafkaMetadataAndAdmin(t *testing.T) {
	c := testcluster.Start(t, testcluster.Spec{Rack: "rack-a"})
	node := c.Node(0)
	addr := node.KafkaAddr()
	ctx := ctxT(t)
	cl := kgoClient(t, addr)

	// Metadata auto-creates with the node's default partition count.
	md := kmsg.NewPtrMetadataRequest()
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("auto")}}
	md.AllowAutoTopicCreation = true
	mresp, err := md.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(mresp.Brokers) != 1 || mresp.Brokers[0].Rack == nil || *mresp.Brokers[0].Rack != "rack-a" {
		t.Fatalf("brokers %+v, want one in rack-a", mresp.Brokers)
	}
	if mresp.ClusterID == nil || *mresp.ClusterID != node.Proxy().ClusterID() {
		t.Fatalf("cluster id %v, want %s", mresp.ClusterID, node.Proxy().ClusterID())
	}
	if tp := mresp.Topics[0]; tp.ErrorCode != 0 || len(tp.Partitions) != 1 || tp.Partitions[0].LeaderEpoch != -1 {
		t.Fatalf("auto-created topic %+v", tp)
	}
	md.AllowAutoTopicCreation = false
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("not-created")}}
	if mresp, _ = md.RequestWith(ctx, cl); mresp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic without auto-create: %+v", mresp.Topics[0])
	}

	// ListOffsets: earliest, latest and by timestamp.
	createTopic(t, addr, "offsets", 1, nil)
	prod := kgoClient(t, addr, kgo.DefaultProduceTopic("offsets"))
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for i := 0; i < 10; i++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}, Timestamp: base.Add(time.Duration(i) * time.Second)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	listOffset := func(ts int64) (int64, int64) {
		t.Helper()
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "offsets"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Fatalf("ListOffsets %d: error %d", ts, p.ErrorCode)
		}
		return p.Offset, p.Timestamp
	}
	if o, _ := listOffset(-2); o != 0 {
		t.Errorf("earliest %d, want 0", o)
	}
	if o, _ := listOffset(-1); o != 10 {
		t.Errorf("latest %d, want 10", o)
	}
	if o, ts := listOffset(base.Add(4500 * time.Millisecond).UnixMilli()); o != 5 || ts != base.Add(5*time.Second).UnixMilli() {
		t.Errorf("by timestamp: offset %d ts %d, want 5 at %d", o, ts, base.Add(5*time.Second).UnixMilli())
	}
	if o, _ := listOffset(base.Add(time.Hour).UnixMilli()); o != -1 {
		t.Errorf("timestamp after every record: %d, want -1", o)
	}

	// Configs: describe, incremental alter, alter (replace), bad key.
	describe := func() map[string]string {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "offsets"}}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.Resources[0].ErrorCode != 0 {
			t.Fatalf("describe configs: %v %+v", err, resp)
		}
		out := map[string]string{}
		for _, c := range resp.Resources[0].Configs {
			out[c.Name] = *c.Value
		}
		return out
	}
	inc := kmsg.NewPtrIncrementalAlterConfigsRequest()
	inc.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "offsets",
		Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Op: kmsg.IncrementalAlterConfigOpSet, Value: kmsg.StringPtr("3600000")}}}}
	if resp, err := inc.RequestWith(ctx, cl); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("incremental alter: %v %+v", err, resp)
	}
	if got := describe()["retention.ms"]; got != "3600000" {
		t.Fatalf("retention.ms %q after SET", got)
	}
	alt := kmsg.NewPtrAlterConfigsRequest()
	alt.Resources = []kmsg.AlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "offsets",
		Configs: []kmsg.AlterConfigsRequestResourceConfig{{Name: "max.message.bytes", Value: kmsg.StringPtr("65536")}}}}
	if resp, err := alt.RequestWith(ctx, cl); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("alter: %v %+v", err, resp)
	}
	if got := describe(); got["max.message.bytes"] != "65536" || got["retention.ms"] == "3600000" {
		t.Fatalf("after AlterConfigs (which replaces every override): %v", got)
	}
	alt.Resources[0].Configs[0].Name = "segment.bytes"
	if resp, _ := alt.RequestWith(ctx, cl); resp.Resources[0].ErrorCode != kerr.InvalidConfig.Code || resp.Resources[0].ErrorMessage == nil {
		t.Fatalf("unknown config: %+v", resp.Resources[0])
	}

	// Validate-only requests check configs and change nothing.
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.ValidateOnly = true
	ctt := kmsg.NewCreateTopicsRequestTopic()
	ctt.Topic, ctt.NumPartitions, ctt.ReplicationFactor = "validate-only", 2, 1
	ctt.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "retention.ms", Value: kmsg.StringPtr("soon")}}
	ct.Topics = []kmsg.CreateTopicsRequestTopic{ctt}
	if resp, err := ct.RequestWith(ctx, cl); err != nil || resp.Topics[0].ErrorCode != kerr.InvalidConfig.Code {
		t.Fatalf("validate-only create with a bad config: %v %+v", err, resp)
	}
	ct.Topics[0].Configs[0].Value = kmsg.StringPtr("1000")
	if resp, err := ct.RequestWith(ctx, cl); err != nil || resp.Topics[0].ErrorCode != 0 || resp.Topics[0].NumPartitions != 2 {
		t.Fatalf("validate-only create: %v %+v", err, resp)
	}
	if _, err := node.Proxy().Topic(ctx, protocols.TopicName{Tenant: "public", Namespace: "default", Local: "validate-only"}); !errors.Is(err, protocols.ErrTopicNotFound) {
		t.Fatalf("validate-only create made the topic: %v", err)
	}
	alt.ValidateOnly = true
	alt.Resources[0].Configs[0].Name = "retention.bytes"
	alt.Resources[0].Configs[0].Value = kmsg.StringPtr("-5")
	if resp, _ := alt.RequestWith(ctx, cl); resp.Resources[0].ErrorCode != kerr.InvalidConfig.Code {
		t.Fatalf("validate-only alter with a bad value: %+v", resp.Resources[0])
	}
	alt.ValidateOnly = false

	// CreatePartitions grows the topic.
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "offsets", Count: 3}}
	if resp, err := cp.RequestWith(ctx, cl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create partitions: %v %+v", err, resp)
	}
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("offsets")}}
	if mresp, _ = md.RequestWith(ctx, cl); len(mresp.Topics[0].Partitions) != 3 {
		t.Fatalf("after growing: %d partitions", len(mresp.Topics[0].Partitions))
	}

	// DeleteRecords moves the log start offset.
	dr := kmsg.NewPtrDeleteRecordsRequest()
	dr.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: "offsets", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 10}}}}
	if resp, err := dr.RequestWith(ctx, cl); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("delete records: %v %+v", err, resp)
	}
	if o, _ := listOffset(-2); o != 10 {
		t.Errorf("earliest after DeleteRecords: %d, want 10", o)
	}

	// DescribeCluster.
	dc := kmsg.NewPtrDescribeClusterRequest()
	if resp, err := dc.RequestWith(ctx, cl); err != nil || resp.ClusterID != node.Proxy().ClusterID() || len(resp.Brokers) != 1 {
		t.Fatalf("describe cluster: %v %+v", err, resp)
	}

	// A group with committed offsets is listed, described and deleted.
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.Generation = "admin-group", -1
	oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "offsets", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 7, LeaderEpoch: -1}}}}
	if resp, err := oc.RequestWith(ctx, cl); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit: %v %+v", err, resp)
	}
	lg := kmsg.NewPtrListGroupsRequest()
	lresp, err := lg.RequestWith(ctx, cl)
	if err != nil || len(lresp.Groups) != 1 || lresp.Groups[0].Group != "admin-group" {
		t.Fatalf("list groups: %v %+v", err, lresp)
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{"admin-group", "never"}
	if resp, err := dg.RequestWith(ctx, cl); err != nil || resp.Groups[0].State != "Empty" || resp.Groups[1].State != "Dead" {
		t.Fatalf("describe groups: %v %+v", err, resp)
	}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"admin-group"}
	if resp, err := del.RequestWith(ctx, cl); err != nil || resp.Groups[0].ErrorCode != 0 {
		t.Fatalf("delete group: %v %+v", err, resp)
	}
	if lresp, _ = lg.RequestWith(ctx, cl); len(lresp.Groups) != 0 {
		t.Fatalf("groups after delete: %+v", lresp.Groups)
	}

	// DeleteTopics.
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.TopicNames = []string{"offsets", "never-there"}
	dresp, err := dt.RequestWith(ctx, cl)
	if err != nil || dresp.Topics[0].ErrorCode != 0 || dresp.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("delete topics: %v %+v", err, dresp)
	}

	// A Pulsar-style non-partitioned topic is one Kafka partition.
	name := protocols.TopicName{Tenant: "public", Namespace: "default", Local: "plain"}
	if _, err := node.Proxy().CreateTopic(ctx, name, 0, nil); err != nil {
		t.Fatal(err)
	}
	plain := kgoClient(t, addr, kgo.DefaultProduceTopic("plain"))
	if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte("hello")}).FirstErr(); err != nil {
		t.Fatalf("produce to a non-partitioned topic: %v", err)
	}
	off, err := node.Proxy().Offsets(ctx, protocols.Partition{Topic: name, Index: -1})
	if err != nil || off.HighWatermark != 1 {
		t.Fatalf("non-partitioned topic log: %+v %v", off, err)
	}
	cons := kgoClient(t, addr, kgo.ConsumeTopics("plain"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := cons.PollFetches(ctx)
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "hello" || recs[0].Partition != 0 {
		t.Fatalf("consumed %+v", recs)
	}
}

// TestKafkaTransactionsRefused: a transactional producer fails with a
// clear, non-retriable error instead of hanging.
func TestKafkaTransactionsRefused(t *testing.T) {
	node := startKafka(t)
	addr := node.KafkaAddr()
	createTopic(t, addr, "txn", 1, nil)
	cl := kgoClient(t, addr, kgo.TransactionalID("tx-1"), kgo.DefaultProduceTopic("txn"))
	ctx := ctxT(t)
	err := cl.BeginTransaction()
	if err == nil {
		err = cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr()
	}
	if !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		t.Fatalf("transactional produce: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", err)
	}
	if hw := highWatermarks(t, node, "txn", 1)[0]; hw != 0 {
		t.Fatalf("a refused transactional producer wrote %d records", hw)
	}
}
