package model

import "iter"

// protectionDenies is the deletion-protection validating webhook on
// DELETE: ProtectionDenial of o with its ActiveDependents in s, unless
// the protection-disabled bug allows everything. It returns why a delete
// is denied, or "".
func (m *Model) protectionDenies(s *State, o *Object) string {
	if m.Bugs.Has(BugProtectionDisabled) || o.Deleting || len(o.Labels) == 0 {
		return "" // ProtectionMayDeny needs the protection label
	}
	v := o.View()
	if !ProtectionMayDeny(&v) {
		return ""
	}
	return ProtectionDenial(&v, activeDependents(s, o))
}

// activeDependents counts what Cascading protection of o waits for in s
// (ActiveDependents).
func activeDependents(s *State, o *Object) int {
	v := o.View()
	return ActiveDependents(&v, objectViews(s, o.UID))
}

// objectViews yields the View of every object in s, with whether it has
// an ownerReference to owner.
func objectViews(s *State, owner UID) iter.Seq2[*View, bool] {
	return func(yield func(*View, bool) bool) {
		for i := range s.Objects {
			d := &s.Objects[i]
			_, refers := d.OwnerRefTo(owner)
			v := d.View()
			if !yield(&v, refers) {
				return
			}
		}
	}
}
