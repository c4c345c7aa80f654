package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestKafkaRestartMidStream: a producer and a group consumer keep running
// while the node restarts between two halves of the data. Committed
// offsets and data survive: the consumer resumes after its commit, with no
// loss and no duplicates, and the idempotent producer's sequence state is
// loaded back so its next batches are accepted, not taken for gaps.
func TestKafkaRestartMidStream(t *testing.T) {
	node := startKafka(t)
	addr := node.KafkaAddr()
	const topic = "restart"
	createTopic(t, addr, topic, 3, nil)
	n := recordsPerCase()
	half := n / 2
	prod := kgoClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(time.Millisecond))
	cons := kgoClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumerGroup("g-restart"), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.Balancers(kgo.CooperativeStickyBalancer()))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	produce := func(from, to int) {
		t.Helper()
		var rs []*kgo.Record
		for i := from; i < to; i++ {
			rs = append(rs, &kgo.Record{Value: payload(topic, i)})
		}
		if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("produce %d-%d: %v", from, to, err)
		}
	}
	l := newLedger(topic, n)
	consume := func(until int) {
		t.Helper()
		for l.count() < until && ctx.Err() == nil {
			fs := cons.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) { l.add(r.Partition, r.Offset, r.Value) })
			if err := cons.CommitUncommittedOffsets(ctx); err != nil {
				t.Logf("commit: %v (retried by the next poll)", err)
			}
		}
	}
	produce(0, half)
	consume(half)
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit before restart: %v", err)
	}
	before := highWatermarks(t, node, topic, 3)

	node.Restart()
	if after := highWatermarks(t, node, topic, 3); !equalInt64s(before, after) {
		t.Fatalf("high watermarks %v before the restart, %v after", before, after)
	}

	produce(half, n)
	consume(n)
	l.check(t)

	// Everything is still there from the start, read by a fresh client.
	all := newLedger(topic, n)
	fresh := kgoClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for all.count() < n && ctx.Err() == nil {
		fresh.PollFetches(ctx).EachRecord(func(r *kgo.Record) { all.add(r.Partition, r.Offset, r.Value) })
	}
	all.check(t)
}

func equalInt64s(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestKafkaGroupSurvivesRestart: a member that keeps running while the node
// restarts goes on under its generation (heartbeat, offset commit, its
// assignment in DescribeGroups), as with Apache Kafka; without the stored
// membership it was told UNKNOWN_MEMBER_ID and re-read everything since
// its last commit. A group whose last member left comes back empty.
func TestKafkaGroupSurvivesRestart(t *testing.T) {
	node := startKafka(t)
	addr := node.KafkaAddr()
	const topic, group = "members", "g-members"
	createTopic(t, addr, topic, 1, nil)
	cl := kgoClient(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType = group, "consumer"
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 30000, 30000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("meta")}}
	jr, err := join.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if jr.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("first join: error %d, want MEMBER_ID_REQUIRED", jr.ErrorCode)
	}
	join.MemberID = jr.MemberID
	if jr, err = join.RequestWith(ctx, cl); err != nil || jr.ErrorCode != 0 {
		t.Fatalf("join: %v, error %d", err, jr.ErrorCode)
	}
	member, gen := jr.MemberID, jr.Generation
	assignment := []byte("partition 0 is mine")
	sg := kmsg.NewPtrSyncGroupRequest()
	sg.Group, sg.Generation, sg.MemberID = group, gen, member
	sg.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: member, MemberAssignment: assignment}}
	if sr, err := sg.RequestWith(ctx, cl); err != nil || sr.ErrorCode != 0 {
		t.Fatalf("sync: %v, error %d", err, sr.ErrorCode)
	}

	node.Restart()

	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.Generation, hb.MemberID = group, gen, member
	if hr, err := hb.RequestWith(ctx, cl); err != nil || hr.ErrorCode != 0 {
		t.Fatalf("heartbeat after restart: %v, error %d (%v)", err, hr.ErrorCode, kerr.ErrorForCode(hr.ErrorCode))
	}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation, commit.MemberID = group, gen, member
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = topic
	ct.Partitions = []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 7, LeaderEpoch: -1}}
	commit.Topics = append(commit.Topics, ct)
	cr, err := commit.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if c := cr.Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatalf("commit after restart: error %d (%v)", c, kerr.ErrorForCode(c))
	}
	state, members := describeGroup(ctx, t, cl, group)
	if state != "Stable" || len(members) != 1 || members[0].MemberID != member || string(members[0].MemberAssignment) != string(assignment) {
		t.Fatalf("after restart: state %s, members %+v; want Stable with %s holding %q", state, members, member, assignment)
	}

	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group = group
	leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: member}}
	if lr, err := leave.RequestWith(ctx, cl); err != nil || lr.ErrorCode != 0 {
		t.Fatalf("leave: %v, error %d", err, lr.ErrorCode)
	}
	node.Restart()
	if state, members := describeGroup(ctx, t, cl, group); len(members) != 0 || state == "Stable" {
		t.Fatalf("after the last member left and a restart: state %s, members %+v; want no members", state, members)
	}
	if hr, err := hb.RequestWith(ctx, cl); err != nil || hr.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("heartbeat of the departed member: %v, error %d; want UNKNOWN_MEMBER_ID", err, hr.ErrorCode)
	}
}

// describeGroup returns a group's state and members.
func describeGroup(ctx context.Context, t *testing.T, cl *kgo.Client, group string) (string, []kmsg.DescribeGroupsResponseGroupMember) {
	t.Helper()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	g := resp.Groups[0]
	if g.ErrorCode != 0 {
		t.Fatalf("describe %s: error %d", group, g.ErrorCode)
	}
	return g.State, g.Members
}
