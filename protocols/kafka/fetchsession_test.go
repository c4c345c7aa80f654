package kafka

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// tp is a topic partition at a fetch offset, as a test names it.
type tp struct {
	topic     string
	partition int32
	offset    int64
}

func sessionReq(id, epoch int32, parts []tp, forget ...tp) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.SessionID, req.SessionEpoch = id, epoch
	req.MaxBytes, req.MinBytes = 1<<20, 1
	for _, p := range parts {
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != p.topic {
			t := kmsg.NewFetchRequestTopic()
			t.Topic = p.topic
			req.Topics = append(req.Topics, t)
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p.partition, p.offset, 1<<20
		t := &req.Topics[len(req.Topics)-1]
		t.Partitions = append(t.Partitions, rp)
	}
	for _, p := range forget {
		req.ForgottenTopics = append(req.ForgottenTopics, kmsg.FetchRequestForgottenTopic{Topic: p.topic, Partitions: []int32{p.partition}})
	}
	return req
}

// readOf lists what a plan reads, in order.
func readOf(req *kmsg.FetchRequest) []tp {
	var out []tp
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			out = append(out, tp{t.Topic, p.Partition, p.FetchOffset})
		}
	}
	return out
}

// answerTo is the answer fetchOnce would give to req: every partition, at
// high watermark hw[topic/partition] (0 when absent), with records where
// records says so.
func answerTo(req *kmsg.FetchRequest, hw map[string]int64, records map[string]bool) *kmsg.FetchResponse {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			k := fmt.Sprintf("%s/%d", t.Topic, p.Partition)
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = p.Partition
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = hw[k], hw[k], 0
			rp.RecordBatches = []byte{}
			if records[k] {
				rp.RecordBatches = []byte("records of " + k)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// answered lists the partitions of an answer, as topic/partition.
func answered(resp *kmsg.FetchResponse) []string {
	var out []string
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, fmt.Sprintf("%s/%d", t.Topic, p.Partition))
		}
	}
	return out
}

// serve plans req, answers what it reads with answerTo, and finishes it;
// it gives what was read and the answer.
func serve(t *testing.T, c *fetchSessions, req *kmsg.FetchRequest, hw map[string]int64, records map[string]bool) ([]tp, *kmsg.FetchResponse) {
	t.Helper()
	p, code := c.plan(req)
	if code != 0 {
		t.Fatalf("plan: error %v", kerr.ErrorForCode(code))
	}
	read := readOf(p.read)
	resp := answerTo(p.read, hw, records)
	p.finish(resp, nil)
	return read, resp
}

// TestFetchSessionLifecycle: a full fetch at epoch 0 opens a session; an
// incremental fetch names only what changed, reads every partition of the
// session at the offsets last given, and is answered with only the
// partitions that have news; epochs must follow on; epoch -1 closes.
func TestFetchSessionLifecycle(t *testing.T) {
	c := newFetchSessions(10, time.Now)
	all := []tp{{"a", 0, 5}, {"a", 1, 7}, {"b", 0, 0}}
	hw := map[string]int64{"a/0": 5, "a/1": 7, "b/0": 0}
	_, resp := serve(t, c, sessionReq(0, 0, all), hw, nil)
	id := resp.SessionID
	if id <= 0 {
		t.Fatalf("full fetch at epoch 0: session id %d, want one", id)
	}
	if got := answered(resp); !slices.Equal(got, []string{"a/0", "a/1", "b/0"}) {
		t.Fatalf("full fetch answered %v, want every partition", got)
	}

	// Nothing changed: the fetch names nothing, reads all three, and
	// hears of none.
	read, resp := serve(t, c, sessionReq(id, 1, nil), hw, nil)
	if got := read; !slices.Equal(got, all) {
		t.Fatalf("incremental fetch read %v, want %v", got, all)
	}
	if resp.SessionID != id || len(resp.Topics) != 0 {
		t.Fatalf("quiet incremental fetch: session %d, answered %v; want %d and none", resp.SessionID, answered(resp), id)
	}

	// Records arrive in a/1 and b/0's high watermark moves: those two are
	// answered; a/0 is not.
	hw["a/1"], hw["b/0"] = 9, 3
	_, resp = serve(t, c, sessionReq(id, 2, nil), hw, map[string]bool{"a/1": true})
	if got := answered(resp); !slices.Equal(got, []string{"a/1", "b/0"}) {
		t.Fatalf("answered %v, want a/1 (records) and b/0 (high watermark)", got)
	}

	// The consumer moves a/1 on and forgets b/0; the partitions answered
	// last time are read last.
	read, resp = serve(t, c, sessionReq(id, 3, []tp{{"a", 1, 9}}, tp{"b", 0, 0}), hw, nil)
	if got := read; !slices.Equal(got, []tp{{"a", 0, 5}, {"a", 1, 9}}) {
		t.Fatalf("after moving a/1 and forgetting b/0, read %v", got)
	}
	if len(resp.Topics) != 0 {
		t.Fatalf("answered %v, want none", answered(resp))
	}

	// A new partition is answered at once, even with nothing in it.
	_, resp = serve(t, c, sessionReq(id, 4, []tp{{"c", 2, 0}}), hw, nil)
	if got := answered(resp); !slices.Equal(got, []string{"c/2"}) {
		t.Fatalf("after adding c/2, answered %v", got)
	}

	for _, tc := range []struct {
		id, epoch int32
		want      error
	}{
		{id, 4, kerr.InvalidFetchSessionEpoch},
		{id, 6, kerr.InvalidFetchSessionEpoch},
		{id + 1, 5, kerr.FetchSessionIDNotFound},
		{0, 5, kerr.FetchSessionIDNotFound},
	} {
		if _, code := c.plan(sessionReq(tc.id, tc.epoch, nil)); kerr.ErrorForCode(code) != tc.want {
			t.Errorf("session %d epoch %d: %v, want %v", tc.id, tc.epoch, kerr.ErrorForCode(code), tc.want)
		}
	}
	// Errors leave the epoch as it was.
	if _, code := c.plan(sessionReq(id, 5, nil)); code != 0 {
		t.Fatalf("epoch 5 after rejected fetches: %v", kerr.ErrorForCode(code))
	}

	// Epoch -1 closes the session and answers without one.
	_, resp = serve(t, c, sessionReq(id, -1, all), hw, nil)
	if resp.SessionID != 0 || len(answered(resp)) != 3 {
		t.Fatalf("closing fetch: session %d, answered %v", resp.SessionID, answered(resp))
	}
	if _, code := c.plan(sessionReq(id, 6, nil)); code != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("fetch on a closed session: %v", kerr.ErrorForCode(code))
	}
	if n, _ := c.stats(); n != 0 {
		t.Fatalf("%d sessions open after closing the only one", n)
	}
}

// TestFetchSessionForgettingAllEndsIt: an incremental fetch that forgets
// every partition ends the session and is answered without one.
func TestFetchSessionForgettingAllEndsIt(t *testing.T) {
	c := newFetchSessions(10, time.Now)
	_, resp := serve(t, c, sessionReq(0, 0, []tp{{"a", 0, 0}}), nil, nil)
	id := resp.SessionID
	_, resp = serve(t, c, sessionReq(id, 1, nil, tp{"a", 0, 0}), nil, nil)
	if resp.SessionID != 0 {
		t.Fatalf("session %d answered after forgetting its last partition", resp.SessionID)
	}
	if n, parts := c.stats(); n != 0 || parts != 0 {
		t.Fatalf("%d sessions with %d partitions left", n, parts)
	}
}

// TestFetchSessionEarlyVersionsAndNoSlots: v4-v6 have no sessions, and a
// node keeping none answers epoch 0 with session 0 (the client then sends
// full fetches).
func TestFetchSessionEarlyVersionsAndNoSlots(t *testing.T) {
	c := newFetchSessions(10, time.Now)
	req := sessionReq(0, 0, []tp{{"a", 0, 0}})
	req.SetVersion(6)
	if _, resp := serve(t, c, req, nil, nil); resp.SessionID != 0 {
		t.Fatalf("v6 fetch opened session %d", resp.SessionID)
	}
	none := newFetchSessions(0, time.Now)
	if _, resp := serve(t, none, sessionReq(0, 0, []tp{{"a", 0, 0}}), nil, nil); resp.SessionID != 0 {
		t.Fatalf("a node keeping no sessions opened %d", resp.SessionID)
	}
}

// TestFetchSessionEpochWraps: after the largest epoch comes 1.
func TestFetchSessionEpochWraps(t *testing.T) {
	if e := nextEpoch(math.MaxInt32); e != 1 {
		t.Fatalf("after MaxInt32: %d", e)
	}
	if e := nextEpoch(1); e != 2 {
		t.Fatalf("after 1: %d", e)
	}
}

// TestFetchSessionSentBatchFollowsItsPartition: a batch sent from its
// read buffer is spliced at its partition, which moves when partitions
// before it are left out of the answer.
func TestFetchSessionSentBatchFollowsItsPartition(t *testing.T) {
	c := newFetchSessions(10, time.Now)
	all := []tp{{"a", 0, 0}, {"a", 1, 0}, {"a", 2, 0}}
	_, resp := serve(t, c, sessionReq(0, 0, all), nil, nil)
	p, code := c.plan(sessionReq(resp.SessionID, 1, nil))
	if code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	resp = answerTo(p.read, map[string]int64{"a/2": 4}, nil)
	sp := &resp.Topics[0].Partitions[2]
	sp.RecordBatches = nil // spliced in when encoded
	sent := []sentBatch{{p: sp, parts: [][]byte{[]byte("batch")}}}
	p.finish(resp, sent)
	if got := answered(resp); !slices.Equal(got, []string{"a/2"}) {
		t.Fatalf("answered %v", got)
	}
	if sent[0].p != &resp.Topics[0].Partitions[0] {
		t.Fatal("the sent batch still points where a/2 was before the answer was cut")
	}
	if pieces, _, ok := encodeSpliced(make([]byte, 4), resp, sent); !ok || len(pieces) == 0 {
		t.Fatal("the cut answer did not encode with its sent batch")
	}
}

// TestFetchSessionEviction: a full cache gives a new session the slot of
// one idle for fetchSessionIdle, or of a smaller one opened that long ago;
// otherwise the fetch goes without a session.
func TestFetchSessionEviction(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newFetchSessions(2, func() time.Time { return now })
	open := func(n int) int32 {
		parts := make([]tp, n)
		for i := range parts {
			parts[i] = tp{"t", int32(i), 0}
		}
		_, resp := serve(t, c, sessionReq(0, 0, parts), nil, nil)
		return resp.SessionID
	}
	small, big := open(1), open(3)
	if small == 0 || big == 0 {
		t.Fatal("sessions not opened with room")
	}
	if id := open(5); id != 0 {
		t.Fatalf("a full cache of fresh sessions opened %d", id)
	}
	now = now.Add(fetchSessionIdle)
	// big is used; small is idle for fetchSessionIdle and goes.
	if _, code := c.plan(sessionReq(big, 1, nil)); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	third := open(2)
	if third == 0 {
		t.Fatal("no slot taken from the idle session")
	}
	if _, code := c.plan(sessionReq(small, 1, nil)); code != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("the evicted session answered %v", kerr.ErrorForCode(code))
	}
	// Both left are in use; third is fresh, big is old and has 3
	// partitions: a session of 2 takes no slot, one of 4 takes big's.
	if id := open(2); id != 0 {
		t.Fatalf("a session no larger than any opened %d", id)
	}
	if id := open(4); id == 0 {
		t.Fatal("a larger session took no slot from an old smaller one")
	}
	if _, code := c.plan(sessionReq(big, 2, nil)); code != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("big after eviction: %v", kerr.ErrorForCode(code))
	}
	if got := c.evictions.Load(); got != 2 {
		t.Fatalf("%d evictions counted, want 2", got)
	}
}

// TestFetchSessionAnswersEachKindOfNews: each kind of news alone puts a
// partition in an incremental answer; offsets told are no news the next
// time; the partitions answered are read after the others by the next
// fetch.
func TestFetchSessionAnswersEachKindOfNews(t *testing.T) {
	c := newFetchSessions(10, time.Now)
	all := []tp{{"x", 0, 0}, {"x", 1, 0}, {"x", 2, 0}}
	_, resp := serve(t, c, sessionReq(0, 0, all), nil, nil)
	id, epoch := resp.SessionID, int32(1)
	for _, news := range []struct {
		name string
		// offset: the news is an offset, which stays as told.
		offset bool
		set    func(*kmsg.FetchResponseTopicPartition)
	}{
		{"records", false, func(p *kmsg.FetchResponseTopicPartition) { p.RecordBatches = []byte("r") }},
		{"an error", false, func(p *kmsg.FetchResponseTopicPartition) { p.ErrorCode = kerr.KafkaStorageError.Code }},
		{"high watermark", true, func(p *kmsg.FetchResponseTopicPartition) { p.HighWatermark = 10 }},
		{"last stable offset", true, func(p *kmsg.FetchResponseTopicPartition) { p.LastStableOffset = 10 }},
		{"log start", true, func(p *kmsg.FetchResponseTopicPartition) { p.LogStartOffset = 10 }},
	} {
		p, code := c.plan(sessionReq(id, epoch, nil))
		if code != 0 {
			t.Fatal(kerr.ErrorForCode(code))
		}
		epoch++
		first := readOf(p.read)[0]
		resp := answerTo(p.read, nil, nil)
		news.set(&resp.Topics[0].Partitions[0])
		p.finish(resp, nil)
		want := fmt.Sprintf("x/%d", first.partition)
		if got := answered(resp); !slices.Equal(got, []string{want}) {
			t.Errorf("%s in %s: answered %v", news.name, want, got)
		}
		p, _ = c.plan(sessionReq(id, epoch, nil))
		epoch++
		read := readOf(p.read)
		if read[len(read)-1] != first {
			t.Errorf("%s: %v answered, but the next fetch reads %v", news.name, first, read)
		}
		resp = answerTo(p.read, nil, nil)
		if news.offset {
			news.set(&resp.Topics[0].Partitions[len(read)-1])
		}
		p.finish(resp, nil)
		if got := answered(resp); len(got) != 0 {
			t.Errorf("after %s: the same offsets again answered %v", news.name, got)
		}
		if news.offset {
			// Back to 0 for the next step: news again, told once.
			p, _ = c.plan(sessionReq(id, epoch, nil))
			epoch++
			resp = answerTo(p.read, nil, nil)
			p.finish(resp, nil)
			if got := answered(resp); !slices.Equal(got, []string{want}) {
				t.Errorf("%s back to 0: answered %v", news.name, got)
			}
		}
	}
}

// FuzzFetchSessions: no sequence of fetches, whatever their session ids,
// epochs, partitions and forgotten partitions, makes the cache panic or
// lose track: a session's order and index hold the same partitions, an
// incremental fetch reads each of its session's partitions once, and an
// answer holds only partitions it read.
func FuzzFetchSessions(f *testing.F) {
	f.Add([]byte{0, 0, 3, 1, 2, 3, 1, 1, 0, 2, 0x81, 2, 1, 0xff})
	f.Add([]byte{0, 0, 2, 5, 6, 2, 1, 1, 7, 1, 5, 2, 0, 0, 1, 4})
	f.Fuzz(func(t *testing.T, ops []byte) {
		c := newFetchSessions(3, time.Now)
		var ids []int32
		next := func() byte {
			if len(ops) == 0 {
				return 0
			}
			b := ops[0]
			ops = ops[1:]
			return b
		}
		for len(ops) > 0 {
			// A fetch: which session (0: none, else one opened), its
			// epoch, the partitions it names and those it forgets.
			var id int32
			if k := int(next()); k > 0 && len(ids) > 0 {
				id = ids[k%len(ids)]
			}
			epoch := int32(int8(next()))
			var parts, forget []tp
			for range int(next() % 8) {
				b := next()
				parts = append(parts, tp{string(rune('a' + b%3)), int32(b >> 5), int64(b)})
			}
			for range int(next() % 4) {
				b := next()
				forget = append(forget, tp{string(rune('a' + b%3)), int32(b >> 5), 0})
			}
			p, code := c.plan(sessionReq(id, epoch, parts, forget...))
			if code != 0 {
				continue
			}
			read := readOf(p.read)
			if p.sess != nil {
				seen := map[sessionKey]bool{}
				for _, r := range read {
					k := sessionKey{r.topic, r.partition}
					if seen[k] {
						t.Fatalf("partition %v read twice", k)
					}
					seen[k] = true
				}
			}
			hw := map[string]int64{}
			records := map[string]bool{}
			for _, r := range read {
				k := fmt.Sprintf("%s/%d", r.topic, r.partition)
				hw[k] = int64(next() % 3)
				records[k] = next()%4 == 0
			}
			resp := answerTo(p.read, hw, records)
			p.finish(resp, nil)
			inRead := map[string]bool{}
			for _, r := range read {
				inRead[fmt.Sprintf("%s/%d", r.topic, r.partition)] = true
			}
			for _, a := range answered(resp) {
				if !inRead[a] {
					t.Fatalf("answered %s, which was not read", a)
				}
			}
			if resp.SessionID != 0 && p.open {
				ids = append(ids, resp.SessionID)
			}
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, s := range c.byID {
			if len(s.parts) != len(s.index) || int(s.size.Load()) != len(s.parts) {
				t.Fatalf("session %d: %d in order, %d in index, size %d", s.id, len(s.parts), len(s.index), s.size.Load())
			}
			for _, sp := range s.parts {
				if s.index[sp.sessionKey] != sp {
					t.Fatalf("session %d: %v in order but not in index", s.id, sp.sessionKey)
				}
			}
		}
	})
}
