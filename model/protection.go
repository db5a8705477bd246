package model

import "fmt"

// protectionDenies is the deletion-protection validating webhook on
// DELETE, after OpenKruise's pkg/webhook/util/deletionprotection: it
// returns why a delete is denied, or "".
//
//   - An object already being deleted is always allowed.
//   - policy.kruise.io/delete-protection=Always denies every delete.
//   - =Cascading denies while the object has active dependents: a
//     Namespace with pods not being deleted; a CRD with custom resources;
//     a workload with spec.replicas > 0; any other object with live
//     objects that name it in an ownerReference (cascade's extension of
//     Kruise's per-kind list to every kind).
func (m *Model) protectionDenies(s *State, o *Object) string {
	if m.Bugs.Has(BugProtectionDisabled) || o.Deleting {
		return ""
	}
	v, set := o.Label(ProtectionLabel)
	if !set {
		return ""
	}
	switch v {
	case ProtectAlways:
		return fmt.Sprintf("forbidden by deletion protection for %s=%s", ProtectionLabel, v)
	case ProtectCascading:
		if n := activeDependents(s, o); n > 0 {
			return fmt.Sprintf("forbidden by deletion protection for %s=%s and %d active dependents", ProtectionLabel, v, n)
		}
	}
	return ""
}

// activeDependents counts what Cascading protection waits for.
func activeDependents(s *State, o *Object) int {
	info := o.Kind.Info()
	n := 0
	switch {
	case info.Kind == "Namespace":
		for i := range s.Objects {
			d := &s.Objects[i]
			if d.Kind.Info().Kind == "Pod" && d.Namespace == o.Name && !d.Deleting {
				n++
			}
		}
	case info.Kind == "CustomResourceDefinition":
		if k, ok := kindForCRD(o.Name); ok {
			for i := range s.Objects {
				if s.Objects[i].Kind == k {
					n++
				}
			}
		}
	case info.Workload:
		n = o.Replicas
	default:
		for i := range s.Objects {
			d := &s.Objects[i]
			if _, owned := d.OwnerRefTo(o.UID); owned && !d.Deleting {
				n++
			}
		}
	}
	return n
}
