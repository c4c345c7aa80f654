package localstore

import "encoding/binary"

// Key layout. Every key starts with a one-byte kind; numbers are big-endian
// so keys sort in numeric order; strings are length-prefixed where another
// field follows them. keys_test.go pins every layout with golden bytes:
// changing one is a storage format change.
//
//	0x01 name                       metadata KV
//	0x02 topic name                 topic record
//	0x03 pid                        partition record
//	0x04 pid                        partition head (start, next, bytes, ...)
//	0x05                            segment replay start (segment number)
//	0x10 pid base                   log entry (its first part)
//	0x10 pid base part              log entry, part 1..n of a large one
//	0x11 pid base                   entry index (count, size, times)
//	0x20 pid name                   cursor
//	0x21 u16 len group pid          group committed offset
//	0x22 pid kind producer          producer (dedup) state
//	0x23 pid region                 replication cursor (to region)
//	0x24 pid region                 inbound replication high-water mark (from region)
const (
	kindMeta       byte = 0x01
	kindTopic      byte = 0x02
	kindPartition  byte = 0x03
	kindHead       byte = 0x04
	kindReplayFrom byte = 0x05
	kindEntry      byte = 0x10
	kindIndex      byte = 0x11
	kindCursor     byte = 0x20
	kindGroup      byte = 0x21
	kindProducer   byte = 0x22
	kindReplCursor byte = 0x23
	kindReplHWM    byte = 0x24
)

// PartitionID is the compact, never reused id of one partition log. It
// doubles as the partition's incarnation (a Pulsar ledger id): a topic
// deleted and created again gets new ids.
type PartitionID uint32

// Key is an encoded pebble key. Callers build keys with the functions below
// so that every layout stays in this file.
type Key []byte

func appendPID(b []byte, pid PartitionID) []byte {
	return binary.BigEndian.AppendUint32(b, uint32(pid))
}

// MetaKey is a metadata record.
func MetaKey(name string) Key { return append([]byte{kindMeta}, name...) }

func topicKey(name string) Key { return append([]byte{kindTopic}, name...) }

func partitionKey(pid PartitionID) Key { return appendPID([]byte{kindPartition}, pid) }

func headKey(pid PartitionID) Key { return appendPID([]byte{kindHead}, pid) }

// replayFromKey holds the segment a replay after a crash starts reading at.
func replayFromKey() Key { return Key{kindReplayFrom} }

// logKey is an entry (kindEntry) or entry index (kindIndex) key.
func logKey(kind byte, pid PartitionID, base int64) Key {
	k := make([]byte, 13)
	k[0] = kind
	binary.BigEndian.PutUint32(k[1:], uint32(pid))
	binary.BigEndian.PutUint64(k[5:], uint64(base))
	return k
}

// entryPartKey is part n (from 1) of a large entry: it sorts after the
// entry's own key and before the next entry's, so a scan meets an entry's
// parts in order right after it.
func entryPartKey(pid PartitionID, base int64, part uint32) Key {
	return binary.BigEndian.AppendUint32(logKey(kindEntry, pid, base), part)
}

// pidPrefix is the first key of a partition's range of the given kind, and
// pidEnd the first key after it.
func pidPrefix(kind byte, pid PartitionID) Key { return appendPID([]byte{kind}, pid) }
func pidEnd(kind byte, pid PartitionID) Key {
	if pid == ^PartitionID(0) {
		return []byte{kind + 1}
	}
	return appendPID([]byte{kind}, pid+1)
}

// CursorKey is a subscription cursor on a partition.
func CursorKey(pid PartitionID, name string) Key {
	return append(pidPrefix(kindCursor, pid), name...)
}

// GroupOffsetKey is a Kafka group's committed offset on a partition.
func GroupOffsetKey(group string, pid PartitionID) Key {
	k := binary.BigEndian.AppendUint16([]byte{kindGroup}, uint16(len(group)))
	k = append(k, group...)
	return appendPID(k, pid)
}

// GroupOffsetPrefix is the prefix of every committed offset of a group, or
// of every group's when group is empty and all is set.
func GroupOffsetPrefix(group string, all bool) Key {
	if all {
		return Key{kindGroup}
	}
	return groupPrefix(group)
}

// DecodeGroupOffsetKey splits a committed offset key.
func DecodeGroupOffsetKey(k Key) (group string, pid PartitionID, ok bool) {
	if len(k) < 7 || k[0] != kindGroup {
		return "", 0, false
	}
	l := int(binary.BigEndian.Uint16(k[1:]))
	if len(k) != 3+l+4 {
		return "", 0, false
	}
	return string(k[3 : 3+l]), PartitionID(binary.BigEndian.Uint32(k[3+l:])), true
}

// groupPrefix is the first key of a group's offsets.
func groupPrefix(group string) Key {
	k := binary.BigEndian.AppendUint16([]byte{kindGroup}, uint16(len(group)))
	return append(k, group...)
}

// ProducerKey is deduplication state of one producer on a partition; kind
// separates the layers (Pulsar producer names, Kafka producer ids).
func ProducerKey(pid PartitionID, kind byte, producer []byte) Key {
	k := append(pidPrefix(kindProducer, pid), kind)
	return append(k, producer...)
}

// ProducerPrefix is the first key of a partition's producer state of a kind.
func ProducerPrefix(pid PartitionID, kind byte) Key {
	return append(pidPrefix(kindProducer, pid), kind)
}

// ReplCursorKey is the durable replication cursor of a partition towards a
// destination region.
func ReplCursorKey(pid PartitionID, region string) Key {
	return append(pidPrefix(kindReplCursor, pid), region...)
}

// ReplHWMKey is the highest origin offset applied on a partition from an
// origin region (replication dedup, layer 3).
func ReplHWMKey(pid PartitionID, origin string) Key {
	return append(pidPrefix(kindReplHWM, pid), origin...)
}

// PrefixEnd is the first key after every key that starts with prefix.
func PrefixEnd(prefix Key) Key {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// decodeEntryPartKey returns the base offset and part number of an entry
// part key, or ok false for any other key.
func decodeEntryPartKey(k []byte) (base int64, part uint32, ok bool) {
	if len(k) != 17 || k[0] != kindEntry {
		return 0, 0, false
	}
	return int64(binary.BigEndian.Uint64(k[5:])), binary.BigEndian.Uint32(k[13:]), true
}

// decodeLogKey returns the base offset of an entry or index key.
func decodeLogKey(k []byte) (PartitionID, int64, bool) {
	if len(k) != 13 {
		return 0, 0, false
	}
	return PartitionID(binary.BigEndian.Uint32(k[1:])), int64(binary.BigEndian.Uint64(k[5:])), true
}
