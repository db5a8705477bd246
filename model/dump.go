package model

import (
	"sort"
	"strings"
)

// Dump renders the observable state as sorted lines: one per object key
// ever created (live, deleting or gone), then the GC's Warning events.
// Only what a client of the real API can see is shown, so the same dump
// is comparable on real targets.
func (s *State) Dump() []string {
	seen := map[string]bool{}
	var lines []string
	for _, u := range s.UIDs {
		if u.Kind == NoKind {
			continue
		}
		key := ObjKey(u.Kind, u.Namespace, u.Name)
		if seen[key] {
			continue
		}
		seen[key] = true
		if o := s.Lookup(u.Kind, u.Namespace, u.Name); o != nil {
			lines = append(lines, s.DumpObject(o))
		} else {
			lines = append(lines, key+" gone")
		}
	}
	sort.Strings(lines)
	return append(lines, s.Events...)
}

// DumpObject renders one live object.
func (s *State) DumpObject(o *Object) string {
	var b strings.Builder
	b.WriteString(o.Key())
	if o.Deleting {
		b.WriteString(" deleting")
	} else {
		b.WriteString(" live")
	}
	if len(o.Owners) > 0 {
		parts := make([]string, len(o.Owners))
		for i, r := range o.Owners {
			parts[i] = s.FormatRef(o, r)
		}
		b.WriteString(" owners=[" + strings.Join(parts, ", ") + "]")
	}
	// A Namespace's "kubernetes" finalizer lives in spec.finalizers, not
	// metadata.finalizers; the model keeps it with the others but a dump
	// shows what metadata.finalizers would.
	var fs []string
	for _, f := range o.Finalizers {
		if !(f == FinalizerNamespace && o.Kind.Info().Kind == "Namespace") {
			fs = append(fs, f)
		}
	}
	if len(fs) > 0 {
		b.WriteString(" finalizers=[" + strings.Join(fs, " ") + "]")
	}
	writeSpec(&b, o.Labels, o.Selector, o.Replicas)
	return b.String()
}

// FormatRef renders an ownerReference of dependent d: the owner's key as
// the reference resolves it, flags, and uid=LABEL when the UID is not the
// one that key's first incarnation had.
func (s *State) FormatRef(d *Object, r OwnerRef) string {
	key := r.Kind + "/" + r.Name
	natural := ""
	if k, ok := KindByName(r.Kind); ok {
		ns := d.Namespace
		if !k.Info().Namespaced {
			ns = ""
		}
		key = ObjKey(k, "", r.Name)
		natural = ObjKey(k, ns, r.Name)
		if live := s.Lookup(k, ns, r.Name); live != nil {
			natural = s.UIDLabel(live.UID) // a newer incarnation is the natural one
		}
	}
	key += refFlags(r.Controller, r.ControllerUnset, r.Block, r.BlockUnset)
	if l := s.UIDLabel(r.UID); l != natural {
		key += " uid=" + l
	}
	return key
}

// refFlags renders a reference's controller and blockOwnerDeletion fields
// as a dump shows them: " controller" and " block" when true,
// " controller=unset" and " block=unset" when left out, nothing when false.
func refFlags(controller, controllerUnset, block, blockUnset bool) string {
	var out string
	switch {
	case controller:
		out += " controller"
	case controllerUnset:
		out += " controller=unset"
	}
	switch {
	case block:
		out += " block"
	case blockUnset:
		out += " block=unset"
	}
	return out
}

// RefFlags is refFlags for a reference read from a real API server, whose
// fields are pointers: the driver's dump spells them as the model's does.
func RefFlags(controller, block *bool) string {
	return refFlags(controller != nil && *controller, controller == nil, block != nil && *block, block == nil)
}
