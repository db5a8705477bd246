package driver

import (
	"fmt"
	"strings"

	"github.com/cascade-k8s/cascade/model"
)

// RealKey maps a trace key (kind/name or kind/namespace/name, as GC and
// controller steps write them) to the key of the real object: namespaces
// and cluster-scoped names carry the driver's prefix. A GC identity of a
// cluster-scoped kind may carry its dependent's namespace (a virtual node);
// that namespace is mapped too.
func (d *Driver) RealKey(key string) (string, error) {
	parts := strings.Split(key, "/")
	if len(parts) < 2 || len(parts) > 3 {
		return "", fmt.Errorf("key %q: expected kind/name or kind/namespace/name", key)
	}
	k, ok := model.KindByShort(parts[0])
	if !ok {
		k, ok = model.KindByName(parts[0])
	}
	name := parts[len(parts)-1]
	ns := ""
	if len(parts) == 3 {
		ns = parts[1]
	}
	if !ok {
		// an unserved kind: its namespace, and its name (unservedName)
		if len(parts) == 3 && ns != "" {
			return parts[0] + "/" + d.realNS(ns) + "/" + d.unservedName(name), nil
		}
		if len(parts) == 3 {
			return parts[0] + "//" + d.unservedName(name), nil
		}
		return parts[0] + "/" + d.unservedName(name), nil
	}
	short := k.Info().Short
	switch {
	case k.Info().Namespaced && len(parts) == 3 && ns == "":
		return short + "//" + name, nil // at cluster scope (model.ObjKey)
	case k.Info().Namespaced:
		if ns == "" {
			ns = model.DefaultNamespace
		}
		return short + "/" + d.realNS(ns) + "/" + name, nil
	case ns != "":
		return short + "/" + d.realNS(ns) + "/" + d.realName(k, name), nil
	}
	return short + "/" + d.realName(k, name), nil
}

// RealUID resolves a trace's uid=LABEL (an incarnation label or symbol)
// to the real UID, as a string.
func (d *Driver) RealUID(label string) string { return string(d.uidFor(label)) }

// RealLine rewrites a GC or controller trace line for a target that takes
// real keys: the key, by=OWNER and uid=LABEL are mapped.
func (d *Driver) RealLine(line string) (string, error) {
	f := strings.Fields(line)
	if len(f) == 2 && f[0] == "gc" && f[1] == "sync" {
		return line, nil // names no object
	}
	if len(f) < 3 {
		return "", fmt.Errorf("%q: expected ACTOR VERB KEY", line)
	}
	k, err := d.RealKey(f[2])
	if err != nil {
		return "", err
	}
	f[2] = k
	for i, a := range f[3:] {
		name, v, _ := strings.Cut(a, "=")
		switch name {
		case "by":
			rk, err := d.RealKey(v)
			if err != nil {
				return "", err
			}
			f[3+i] = "by=" + rk
		case "uid":
			f[3+i] = "uid=" + d.RealUID(v)
		}
	}
	return strings.Join(f, " "), nil
}
