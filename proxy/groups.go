package proxy

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/ternmq/tern/localstore"
	"github.com/ternmq/tern/protocols"
)

// Committed offsets are stored per (group, partition id):
//
//	u8 version (1), i64 offset, i32 leader epoch, i64 commit time, metadata

func encodeCommit(c protocols.CommittedOffset) []byte {
	b := make([]byte, 0, 21+len(c.Metadata))
	b = append(b, 1)
	b = binary.BigEndian.AppendUint64(b, uint64(c.Offset))
	b = binary.BigEndian.AppendUint32(b, uint32(c.LeaderEpoch))
	b = binary.BigEndian.AppendUint64(b, uint64(c.CommitTime))
	return append(b, c.Metadata...)
}

func decodeCommit(b []byte) (protocols.CommittedOffset, error) {
	if len(b) < 21 || b[0] != 1 {
		return protocols.CommittedOffset{}, fmt.Errorf("%w: committed offset record", localstore.ErrCorrupt)
	}
	return protocols.CommittedOffset{
		Offset:      int64(binary.BigEndian.Uint64(b[1:])),
		LeaderEpoch: int32(binary.BigEndian.Uint32(b[9:])),
		CommitTime:  int64(binary.BigEndian.Uint64(b[13:])),
		Metadata:    string(b[21:]),
		Found:       true,
	}, nil
}

// CommitOffsets implements protocols.GroupOffsets.
func (n *Node) CommitOffsets(ctx context.Context, group string, offsets []protocols.CommittedOffset) error {
	if group == "" {
		return errNoGroup
	}
	now := n.now().UnixMilli()
	ops := make([]localstore.Op, 0, len(offsets))
	for _, c := range offsets {
		pid, err := n.pid(c.Partition)
		if err != nil {
			return err
		}
		if c.CommitTime == 0 {
			c.CommitTime = now
		}
		ops = append(ops, localstore.Op{Key: localstore.GroupOffsetKey(group, pid), Value: encodeCommit(c)})
	}
	return mapStoreErr(n.store.Write(ops, true))
}

// FetchOffsets implements protocols.GroupOffsets.
func (n *Node) FetchOffsets(ctx context.Context, group string, parts []protocols.Partition) ([]protocols.CommittedOffset, error) {
	if parts == nil {
		return n.allGroupOffsets(ctx, group)
	}
	out := make([]protocols.CommittedOffset, 0, len(parts))
	for _, p := range parts {
		c := protocols.CommittedOffset{Partition: p, Offset: -1, LeaderEpoch: -1}
		pid, err := n.pid(p)
		if err == nil {
			v, ok, err := n.store.Get(localstore.GroupOffsetKey(group, pid))
			if err != nil {
				return nil, mapStoreErr(err)
			}
			if ok {
				if c, err = decodeCommit(v); err != nil {
					return nil, err
				}
				c.Partition = p
			}
		}
		out = append(out, c)
	}
	return out, nil
}

func (n *Node) allGroupOffsets(ctx context.Context, group string) ([]protocols.CommittedOffset, error) {
	var out []protocols.CommittedOffset
	err := n.store.Scan(ctx, localstore.GroupOffsetPrefix(group, false), func(k localstore.Key, v []byte) error {
		g, pid, ok := localstore.DecodeGroupOffsetKey(k)
		if !ok || g != group {
			return nil
		}
		topic, index, err := n.store.PartitionOwner(pid)
		if err != nil {
			return nil // the topic is gone
		}
		name, err := protocols.ParseTopicName(topic, "")
		if err != nil {
			return nil
		}
		t, err := n.store.Topic(topic)
		if err != nil {
			return nil
		}
		c, err := decodeCommit(v)
		if err != nil {
			return err
		}
		if t.Partitions == 0 {
			index = -1
		}
		c.Partition = protocols.Partition{Topic: name, Index: index}
		out = append(out, c)
		return nil
	})
	return out, mapStoreErr(err)
}

// ListGroupsWithOffsets implements protocols.GroupOffsets.
func (n *Node) ListGroupsWithOffsets(ctx context.Context) ([]string, error) {
	var out []string
	err := n.store.Scan(ctx, localstore.GroupOffsetPrefix("", true), func(k localstore.Key, _ []byte) error {
		g, _, ok := localstore.DecodeGroupOffsetKey(k)
		if ok && (len(out) == 0 || out[len(out)-1] != g) {
			out = append(out, g)
		}
		return nil
	})
	return slices.Compact(out), mapStoreErr(err)
}

// DeleteGroupOffsets implements protocols.GroupOffsets.
func (n *Node) DeleteGroupOffsets(ctx context.Context, group string) error {
	var ops []localstore.Op
	err := n.store.Scan(ctx, localstore.GroupOffsetPrefix(group, false), func(k localstore.Key, _ []byte) error {
		if g, _, ok := localstore.DecodeGroupOffsetKey(k); ok && g == group {
			ops = append(ops, localstore.Op{Key: slices.Clone(k), Delete: true})
		}
		return nil
	})
	if err != nil || len(ops) == 0 {
		return mapStoreErr(err)
	}
	return mapStoreErr(n.store.Write(ops, true))
}

// metaGroupMembership prefixes a Kafka group's membership record in the
// store's metadata.
const metaGroupMembership = "kafka-group/"

// PutGroupMembership implements protocols.GroupMembership.
func (n *Node) PutGroupMembership(ctx context.Context, group string, data []byte) error {
	return mapStoreErr(n.store.PutMeta(metaGroupMembership+group, data))
}

// DeleteGroupMembership implements protocols.GroupMembership.
func (n *Node) DeleteGroupMembership(ctx context.Context, group string) error {
	return mapStoreErr(n.store.DeleteMeta(metaGroupMembership + group))
}

// ScanGroupMemberships implements protocols.GroupMembership.
func (n *Node) ScanGroupMemberships(ctx context.Context, fn func(group string, data []byte) error) error {
	return mapStoreErr(n.store.ScanMeta(ctx, metaGroupMembership, func(name string, v []byte) error {
		return fn(strings.TrimPrefix(name, metaGroupMembership), v)
	}))
}
