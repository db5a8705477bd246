package model

import (
	"encoding/binary"
	"hash/maphash"
)

// Encode appends a canonical encoding of the state: two states are equal
// exactly when their encodings are. The checker fingerprints it.
func (s *State) Encode(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s.Objects)))
	for i := range s.Objects {
		b = encObject(b, &s.Objects[i])
	}
	b = binary.AppendUvarint(b, uint64(len(s.UIDs)))
	for _, u := range s.UIDs {
		b = append(b, byte(u.Kind))
		b = encStr(encStr(encStr(b, u.Namespace), u.Name), u.Symbol)
		b = binary.AppendUvarint(b, uint64(u.Nth))
	}
	b = encWatcher(b, &s.GC.Watch)
	b = binary.AppendUvarint(b, uint64(len(s.GC.Nodes)))
	for i := range s.GC.Nodes {
		n := &s.GC.Nodes[i]
		b = encIdent(b, n.Identity)
		b = encRefs(b, n.Owners)
		b = encUIDs(b, n.Dependents)
		b = append(b, flags(n.Virtual, n.BeingDeleted, n.DeletingDependents))
	}
	b = binary.AppendUvarint(b, uint64(len(s.GC.VirtualEvents)))
	for _, id := range s.GC.VirtualEvents {
		b = encIdent(b, id)
	}
	for _, q := range [][]Identity{s.GC.AttemptToDelete, s.GC.AttemptToOrphan} {
		b = binary.AppendUvarint(b, uint64(len(q)))
		for _, id := range q {
			b = encIdent(b, id)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(s.GC.InFlight)))
	for _, f := range s.GC.InFlight {
		b = binary.AppendUvarint(b, uint64(f.UID))
		b = binary.AppendUvarint(b, uint64(len(f.Writes)))
		for _, w := range f.Writes {
			b = append(b, byte(w.Op), byte(w.Policy))
			b = encIdent(b, w.Item)
			b = binary.AppendUvarint(b, uint64(w.RV))
			b = encRefs(b, w.Owners)
			b = encUIDs(b, w.Remove)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(s.GC.Absent)))
	for _, id := range s.GC.Absent {
		b = encIdent(b, id)
	}
	b = binary.AppendUvarint(b, uint64(s.GC.Monitored))
	b = encWatcher(b, &s.Controller.Watch)
	b = binary.AppendUvarint(b, uint64(len(s.Orphans)))
	for _, o := range s.Orphans {
		b = binary.AppendUvarint(b, uint64(o.Owner))
		b = binary.AppendUvarint(b, uint64(o.Dep))
		b = append(b, flags(o.Ran, o.Seen, o.Switched))
	}
	b = binary.AppendUvarint(b, uint64(len(s.Events)))
	for _, e := range s.Events {
		b = encStr(b, e)
	}
	return binary.AppendUvarint(b, s.Budget)
}

var fingerprintSeed = maphash.MakeSeed()

// Fingerprint is a 64-bit hash of the canonical encoding. It is stable
// within a process (the seed is per process), which is all a checker run
// needs.
func (s *State) Fingerprint(buf []byte) (uint64, []byte) {
	buf = s.Encode(buf[:0])
	return maphash.Bytes(fingerprintSeed, buf), buf
}

// Equal reports whether two states are the same.
func (s *State) Equal(o *State) bool { return string(s.Encode(nil)) == string(o.Encode(nil)) }

func flags(bs ...bool) byte {
	var f byte
	for i, b := range bs {
		if b {
			f |= 1 << i
		}
	}
	return f
}

func encStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func encUIDs(b []byte, us []UID) []byte {
	b = binary.AppendUvarint(b, uint64(len(us)))
	for _, u := range us {
		b = binary.AppendUvarint(b, uint64(u))
	}
	return b
}

func encRefs(b []byte, rs []OwnerRef) []byte {
	b = binary.AppendUvarint(b, uint64(len(rs)))
	for _, r := range rs {
		b = encStr(encStr(b, r.Kind), r.Name)
		b = binary.AppendUvarint(b, uint64(r.UID))
		b = append(b, flags(r.Controller, r.Block))
	}
	return b
}

func encIdent(b []byte, id Identity) []byte {
	b = encStr(encStr(encStr(b, id.Kind), id.Namespace), id.Name)
	return binary.AppendUvarint(b, uint64(id.UID))
}

func encObject(b []byte, o *Object) []byte {
	b = binary.AppendUvarint(b, uint64(o.UID))
	b = append(b, byte(o.Kind))
	b = encStr(encStr(b, o.Namespace), o.Name)
	b = encRefs(b, o.Owners)
	b = binary.AppendUvarint(b, uint64(len(o.Finalizers)))
	for _, f := range o.Finalizers {
		b = encStr(b, f)
	}
	b = binary.AppendUvarint(b, uint64(len(o.Labels)))
	for _, l := range o.Labels {
		b = encStr(encStr(b, l.Key), l.Value)
	}
	b = encStr(encStr(b, o.Selector.Key), o.Selector.Value)
	b = binary.AppendUvarint(b, uint64(o.Replicas))
	b = append(b, flags(o.Deleting))
	return binary.AppendUvarint(b, uint64(o.RV))
}

func encWatcher(b []byte, w *Watcher) []byte {
	for _, q := range w.queues() {
		b = binary.AppendUvarint(b, uint64(len(q)))
		for i := range q {
			b = append(b, byte(q[i].Type))
			b = encObject(b, &q[i].Obj)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(w.Cache)))
	for i := range w.Cache {
		b = encObject(b, &w.Cache[i])
	}
	return b
}
