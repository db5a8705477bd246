package model

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestEncodeRoundTrip: on random walks that exercise every actor, bug
// switches and odd references (symbolic UIDs, a cross-namespace owner,
// an unserved kind), Decode reads back exactly what Encode wrote, a state
// decoded into a reused Decoder behaves like the original under every
// enabled step, the decoded state is not modified by Apply, and
// EncodeNext encodes every successor exactly as Encode does.
func TestEncodeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var dec Decoder
	for walk := 0; walk < 9; walk++ {
		m := &Model{Bugs: BugSet(0)}
		if walk%3 == 1 {
			m.Bugs = m.Bugs.With(BugUIDOnlyIdentity).With(BugLostFirstUpdate)
		}
		if walk%3 == 2 {
			m.Bugs = m.Bugs.With(BugDeleteWithoutRVPrecondition).With(BugLookupIgnoresScope)
		}
		s, _ := run(t, m, "create crd/widgets.cascade.dev", "create widget/w", "create rc/o replicas=2 selector=app=a",
			"create deploy/d selector=app=a labels=policy.kruise.io/delete-protection=Cascading",
			"create pod/p finalizers=a.io/h labels=app=a,b=c owner=rc/o,block", "create pv/v",
			"create cm/ns1/c owner=pv/v owner=widget/w,uid=widget/w", "create secret/ns2/x owner=cm/ns1/c",
			"create cm/g owner=Frob/f,uid=ghost owner=rc/o,controller",
			"create cm/u owner=rc/o,controller=unset,block=unset owner=rc/o owner=pv/v,block=unset")
		clients := []string{"delete rc/o propagation=Foreground", "delete rc/o propagation=Orphan", "delete deploy/d propagation=Orphan",
			"delete pv/v", "remove-finalizer pod/p a.io/h", "label pod/p x=y", "delete crd/widgets.cascade.dev", "create pod/q labels=app=a",
			"scale deploy/d 0", "delete cm/ns1/c if-uid=stale"}
		for i := 0; i < 40; i++ {
			for _, c := range []*State{s, s.Canonical()} {
				enc := c.Encode(nil)
				back, err := Decode(enc)
				if err != nil {
					t.Fatalf("walk %d step %d: %v", walk, i, err)
				}
				if string(back.Encode(nil)) != string(enc) {
					t.Fatalf("walk %d step %d: re-encoding differs", walk, i)
				}
				if !reflect.DeepEqual(normalize(back), normalize(c)) {
					t.Fatalf("walk %d step %d: decoded state differs:\n%#v\n%#v", walk, i, back, c)
				}
			}
			enc := s.Encode(nil)
			d, err := dec.Decode(enc)
			if err != nil {
				t.Fatal(err)
			}
			steps := m.Enabled(s, Options{Coalesce: true})
			for _, c := range clients {
				steps = append(steps, mustStep(t, c))
			}
			if got := m.Enabled(d, Options{Coalesce: true}); !reflect.DeepEqual(got, steps[:len(got)]) {
				t.Fatalf("Enabled differs on the decoded state")
			}
			var next *State
			for _, st := range steps {
				a, ra, erra := m.Apply(s, st)
				b, rb, errb := m.Apply(d, st)
				if (erra == nil) != (errb == nil) || ra != rb {
					t.Fatalf("%s: %v %v / %v %v", st, ra, erra, rb, errb)
				}
				if erra != nil {
					continue
				}
				if !a.Equal(b) {
					t.Fatalf("%s: the decoded state steps elsewhere", st)
				}
				for _, x := range []*State{b, b.Canonical()} {
					if got, want := dec.EncodeNext(nil, x), x.Encode(nil); string(got) != string(want) {
						t.Fatalf("%s: EncodeNext differs from Encode:\n%q\n%q", st, got, want)
					}
				}
				if string(d.Encode(nil)) != string(enc) {
					t.Fatalf("%s modified the decoded state", st)
				}
				if next == nil || rng.IntN(len(steps)) == 0 {
					next = a
				}
			}
			if next == nil {
				break
			}
			s = next
		}
	}
	for _, bad := range [][]byte{nil, {1}, {0, 0, 0, 0}, []byte("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff")} {
		if _, err := Decode(bad); err == nil {
			t.Errorf("Decode(%q) accepted", bad)
		}
	}
}

// TestDecoderVarints: the decoder's own uvarint, and unzigzag of it, read what
// binary.Uvarint and binary.Varint read, and refuse what they refuse
// (truncated input, more than ten bytes, a value past 64 bits).
func TestDecoderVarints(t *testing.T) {
	var inputs [][]byte
	for _, v := range []uint64{0, 1, 0x7f, 0x80, 0x3fff, 0x4000, 1 << 35, 1<<63 - 1, 1 << 63, math.MaxUint64} {
		inputs = append(inputs, binary.AppendUvarint(nil, v), binary.AppendUvarint([]byte{0x80}, v))
	}
	inputs = append(inputs, nil, []byte{0x80}, []byte{0xff, 0xff},
		[]byte("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"),     // math.MaxUint64
		[]byte("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02"),     // past 64 bits
		[]byte("\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x00")) // eleven bytes
	for _, in := range inputs {
		want, n := binary.Uvarint(in)
		d := Decoder{b: in}
		if got := d.uvarint(); d.bad != (n <= 0) || (n > 0 && (got != want || d.i != n)) {
			t.Errorf("uvarint(%x) = %d, read %d, bad %v; binary.Uvarint: %d, %d", in, got, d.i, d.bad, want, n)
		}
		wantInt, n := binary.Varint(in)
		d = Decoder{b: in}
		if got := unzigzag(d.uvarint()); d.bad != (n <= 0) || (n > 0 && (int64(got) != wantInt || d.i != n)) {
			t.Errorf("int(%x) = %d, read %d, bad %v; binary.Varint: %d, %d", in, got, d.i, d.bad, wantInt, n)
		}
	}
}

// normalize maps empty slices to nil, which the encoding does not tell
// apart (and the model never does either).
func normalize(s *State) *State {
	c := *s
	v := reflect.ValueOf(&c).Elem()
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Slice:
			if v.Len() == 0 {
				v.Set(reflect.Zero(v.Type()))
				return
			}
			cp := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
			reflect.Copy(cp, v)
			v.Set(cp)
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i))
			}
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				if v.Field(i).CanSet() {
					walk(v.Field(i))
				}
			}
		case reflect.Pointer:
			if v.IsNil() {
				return
			}
			if a, ok := v.Interface().(*[NumKinds][]WatchEvent); ok {
				cp := *a
				empty := true
				for k := range cp {
					empty = empty && len(cp[k]) == 0
				}
				if empty {
					v.Set(reflect.Zero(v.Type()))
					return
				}
				v.Set(reflect.ValueOf(&cp))
				walk(v.Elem())
			}
		case reflect.Array:
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i))
			}
		}
	}
	walk(v)
	return &c
}

// TestIdentKeyShortcuts: identKeyIs (with and without the workspace's
// memo of keys) and identKeysEqual agree with the string comparisons they
// replace, over every served kind and unserved ones,
// namespaced and cluster-scoped, every namespace spelling and names with
// and without slashes.
func TestIdentKeyShortcuts(t *testing.T) {
	kinds := []string{"Frob", "pod", ""}
	for i := range Kinds {
		kinds = append(kinds, Kinds[i].Kind)
	}
	nss := []string{"", DefaultNamespace, "ns1", "kube-system"}
	names := []string{"a", "b", "x/a", "ns1/a", "pod/a"}
	var ids []Identity
	for _, k := range kinds {
		for _, ns := range nss {
			for _, n := range names {
				ids = append(ids, Identity{Kind: k, Namespace: ns, Name: n, UID: 1})
			}
		}
	}
	var targets []Target
	for i := range Kinds {
		for _, ns := range nss {
			for _, n := range names {
				targets = append(targets, Target{Kind: KindID(i), Namespace: ns, Name: n})
			}
		}
	}
	for _, n := range []string{"Frob/a", "Frob/ns1/a", "a"} {
		targets = append(targets, Target{Kind: NoKind, Name: n})
	}
	memo := &workspace{} // twice through it: misses, then hits
	for i := range ids {
		for j := range targets {
			want := identKey(ids[i]) == targets[j].String()
			for _, mem := range []memory{heap{}, memo, memo} {
				if got := identKeyIs(mem, &ids[i], &targets[j]); got != want {
					t.Errorf("identKeyIs(%+v, %+v) = %v, want %v", ids[i], targets[j], got, want)
				}
			}
		}
		for j := range ids {
			if got, want := identKeysEqual(&ids[i], &ids[j]), identKey(ids[i]) == identKey(ids[j]); got != want {
				t.Errorf("identKeysEqual(%+v, %+v) = %v, want %v", ids[i], ids[j], got, want)
			}
		}
	}
}

// TestObjectIndex: objectIndex agrees with a plain binary search on
// sorted lists of distinct UIDs, dense or with gaps.
func TestObjectIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for range 2000 {
		var objs []Object
		for u := UID(1 + rng.IntN(3)); len(objs) < rng.IntN(12); u += UID(1 + rng.IntN(3)*rng.IntN(2)) {
			objs = append(objs, Object{UID: u})
		}
		for u := UID(0); u < 40; u++ {
			want, wantOK := len(objs), false
			for i := range objs {
				if objs[i].UID >= u {
					want, wantOK = i, objs[i].UID == u
					break
				}
			}
			if got, ok := objectIndex(objs, u); got != want || ok != wantOK {
				t.Fatalf("objectIndex(%v, %d) = %d, %v; want %d, %v", objs, u, got, ok, want, wantOK)
			}
		}
	}
}

// TestDecodeQueuesFollowTheirCache: a Decoder reuses a part of the last
// state it decoded when the part's bytes recur, but not a watcher's queues
// when its cache was decoded anew, even if the queues' bytes are the same:
// a queued copy of a cached object shares the cache's memory, which the
// new cache overwrites. Here the GC's cache gains an ownerReference ahead
// of the queued object's, in the memory that object's owners used.
func TestDecodeQueuesFollowTheirCache(t *testing.T) {
	s, _ := run(t, &Model{}, "create cm/a", "create cm/b owner=cm/a")
	withCache := func(aOwners []OwnerRef) *State {
		c := *s
		a, b := *s.Get(s.Objects[0].UID), *s.Get(s.Objects[1].UID)
		a.Owners = aOwners
		c.GC.Watch.Cache = []Object{a, b}
		c.GC.Watch.Queues = &[NumKinds][]WatchEvent{}
		c.GC.Watch.Queues[b.Kind] = []WatchEvent{{Type: Deleted, Obj: b}}
		return &c
	}
	s1 := withCache(nil)
	s2 := withCache([]OwnerRef{{Kind: "Secret", Name: "x", UID: 40}, {Kind: "Secret", Name: "y", UID: 41}})
	var dec Decoder
	if _, err := dec.Decode(s1.Encode(nil)); err != nil {
		t.Fatal(err)
	}
	queues := func() string { return string(dec.last[dec.lastParts[partGCQueues]:dec.lastParts[partGCQueues+1]]) }
	q1 := queues()
	b := s.Objects[1]
	if want := binary.AppendUvarint(binary.AppendUvarint(binary.AppendUvarint(nil, 1<<b.Kind), 1), uint64(Deleted)); q1 != string(binary.AppendUvarint(want, uint64(b.UID)<<1|1)) {
		t.Fatalf("the queue is not one reference to the cache: %q", q1)
	}
	got, err := dec.Decode(s2.Encode(nil))
	if err != nil {
		t.Fatal(err)
	}
	if queues() != q1 {
		t.Fatalf("the queues' bytes differ: %q, %q", queues(), q1)
	}
	c := *got
	c.mem = nil
	if !reflect.DeepEqual(normalize(&c), normalize(s2)) {
		t.Fatalf("decoded queue differs:\n%#v\n%#v", got.GC.Watch.Queues[b.Kind], s2.GC.Watch.Queues[b.Kind])
	}
}

// TestEncodeNextQueuedRefs: EncodeNext takes a queued event that is in
// memory one the decoded state's queue held as a reference to the cache
// for a reference again, and compares any other event with the cache: a
// successor that pushes an event after a copy of the queue, and one that
// changes the queued object, encode as Encode encodes them.
func TestEncodeNextQueuedRefs(t *testing.T) {
	s, _ := run(t, &Model{}, "create cm/a", "create cm/b owner=cm/a")
	a, b := *s.Get(s.Objects[0].UID), *s.Get(s.Objects[1].UID)
	c := *s
	c.GC.Watch.Cache = []Object{a, b}
	c.GC.Watch.Queues = &[NumKinds][]WatchEvent{}
	c.GC.Watch.Queues[b.Kind] = []WatchEvent{{Type: Deleted, Obj: b}}
	var dec Decoder
	d, err := dec.Decode(c.Encode(nil))
	if err != nil {
		t.Fatal(err)
	}
	changed := d.GC.Watch.Queues[b.Kind][0]
	changed.Obj.RV++
	for name, q := range map[string][]WatchEvent{
		"pushed after a copy": {d.GC.Watch.Queues[b.Kind][0], {Type: Modified, Obj: a}},
		"changed":             {changed, {Type: Modified, Obj: a}},
	} {
		n := *d
		n.GC.Watch.Queues = &[NumKinds][]WatchEvent{}
		n.GC.Watch.Queues[b.Kind] = q
		if got, want := dec.EncodeNext(nil, &n), n.Encode(nil); string(got) != string(want) {
			t.Errorf("%s: EncodeNext differs from Encode:\n%q\n%q", name, got, want)
		}
	}
}
