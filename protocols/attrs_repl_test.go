package protocols

import (
	"bytes"
	"slices"
	"testing"
)

func TestReplicateToRoundTrip(t *testing.T) {
	var env Envelope
	if _, ok, err := ReplicateTo(&env); ok || err != nil {
		t.Fatalf("no restriction: %v %v", ok, err)
	}
	for _, regs := range [][]string{{"us", "eu"}, {ReplicateLocalOnly}, {}} {
		if err := SetReplicateTo(&env, regs); err != nil {
			t.Fatal(err)
		}
		got, ok, err := ReplicateTo(&env)
		if !ok || err != nil || !slices.Equal(got, regs) {
			t.Fatalf("%v: got %v %v %v", regs, got, ok, err)
		}
	}
	if n := len(env.Attrs); n != 1 {
		t.Fatalf("%d attrs after three sets, want 1", n)
	}
	// The attribute survives the entry encoding.
	b, _ := AppendBatch(nil, BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []Message{{Value: []byte("v")}}, nil)
	_ = SetReplicateTo(&env, []string{"ap"})
	SetOriginEpoch(&env, 42)
	SetOriginTime(&env, 1234)
	enc, err := AppendEntry(nil, &env, b)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeEnvelope(enc)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := ReplicateTo(&back); !slices.Equal(got, []string{"ap"}) {
		t.Fatalf("decoded %v", got)
	}
	if ep, _ := OriginEpoch(&back); ep != 42 {
		t.Fatalf("epoch %d", ep)
	}
	if ot, ok, _ := OriginTime(&back); !ok || ot != 1234 {
		t.Fatalf("origin time %d", ot)
	}
	if err := SetReplicateTo(&env, []string{""}); err == nil {
		t.Fatal("an empty region name passed")
	}
}

func FuzzReplicateTo(f *testing.F) {
	f.Add([]byte{0})
	f.Add([]byte{2, 2, 'u', 's', 2, 'e', 'u'})
	f.Add([]byte{1, 9, 'u'})
	f.Add([]byte{})
	f.Add([]byte{1, 0, 7})
	f.Fuzz(func(t *testing.T, v []byte) {
		env := Envelope{Attrs: []Attr{{Key: AttrReplicateTo, Value: v}}}
		regs, ok, err := ReplicateTo(&env)
		if err != nil || !ok {
			return
		}
		var again Envelope
		if SetReplicateTo(&again, regs) != nil {
			return // names that decode but are not settable (empty): fine, never written
		}
		if w, _ := again.Attr(AttrReplicateTo); !bytes.Equal(w, v) {
			t.Fatalf("%x decoded to %q, which encodes to %x", v, regs, w)
		}
	})
}

func FuzzOriginAttrs(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 7})
	f.Add([]byte{})
	f.Add([]byte{1, 2, 3})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0})
	f.Fuzz(func(t *testing.T, v []byte) {
		env := Envelope{Attrs: []Attr{{Key: AttrOriginEpoch, Value: v}, {Key: AttrOriginTime, Value: v}}}
		ep, errE := OriginEpoch(&env)
		ot, ok, errT := OriginTime(&env)
		if (errE == nil) != (len(v) == 8) || (errT == nil) != (len(v) == 8) || !ok {
			t.Fatalf("%x: epoch err %v, time err %v", v, errE, errT)
		}
		if errE == nil {
			var again Envelope
			SetOriginEpoch(&again, ep)
			SetOriginTime(&again, ot)
			if w, _ := again.Attr(AttrOriginEpoch); !bytes.Equal(w, v) {
				t.Fatalf("epoch %x does not round-trip", v)
			}
		}
	})
}
