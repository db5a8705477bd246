package model

import (
	"fmt"
	"strconv"
	"strings"
)

// SyntaxError is a step that does not parse; Col is 1-based.
type SyntaxError struct {
	Col int
	Msg string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("column %d: %s", e.Col, e.Msg) }

type token struct {
	text string
	col  int
}

func tokenize(line string) []token {
	var out []token
	start := -1
	for i := 0; i <= len(line); i++ {
		if i == len(line) || line[i] == ' ' || line[i] == '\t' {
			if start >= 0 {
				out = append(out, token{line[start:i], start + 1})
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	return out
}

func synErr(t token, format string, args ...any) error {
	return &SyntaxError{Col: t.col, Msg: fmt.Sprintf(format, args...)}
}

var clientVerbs = map[string]Op{
	"create": OpCreate, "delete": OpDelete, "add-finalizer": OpAddFinalizer, "remove-finalizer": OpRemoveFinalizer,
	"add-owner": OpAddOwner, "remove-owner": OpRemoveOwner, "label": OpLabel, "unlabel": OpUnlabel, "scale": OpScale,
}

var gcVerbs = map[string]Op{
	"deliver": OpDeliver, "deliver-virtual": OpDeliverVirtual, "coalesce": OpCoalesce, "lose": OpLose,
	"attemptToDelete": OpAttemptToDelete, "attemptToOrphan": OpAttemptToOrphan,
	"delete": OpSend, "patch": OpSend, "unblock": OpSend,
}

// ParseStep reads one trace command.
func ParseStep(line string) (Step, error) {
	toks := tokenize(line)
	if len(toks) == 0 {
		return Step{}, &SyntaxError{Col: 1, Msg: "empty command"}
	}
	switch toks[0].text {
	case "settle":
		if len(toks) == 1 {
			return Step{}, synErr(toks[0], "settle is not one step: it runs the system until it is quiet (a trace's command, or --setup's)")
		}
		return Step{}, synErr(toks[0], "settle takes no arguments")
	case "gc":
		if len(toks) == 2 && toks[1].text == "sync" {
			return Step{Actor: ActorGC, Op: OpSync}, nil
		}
		return parseGC(toks)
	case "controller":
		return parseController(toks)
	case "apiextensions":
		if len(toks) != 3 || toks[1].text != "cleanup" {
			return Step{}, synErr(toks[0], "expected `apiextensions cleanup crd/NAME`")
		}
		t, err := parseKey(toks[2], false)
		if err != nil {
			return Step{}, err
		}
		return Step{Actor: ActorAPIExtensions, Op: OpCleanup, Target: t}, nil
	case "client":
		toks = toks[1:]
		if len(toks) == 0 {
			return Step{}, &SyntaxError{Col: 7, Msg: "expected a client verb"}
		}
	}
	return parseClient(toks)
}

func verbList(m map[string]Op) string {
	var vs []string
	for v := range m {
		vs = append(vs, v)
	}
	sortStrings(vs)
	return strings.Join(vs, ", ")
}

func parseGC(toks []token) (Step, error) {
	if len(toks) < 3 {
		return Step{}, synErr(toks[0], "expected `gc VERB KEY` with VERB one of %s, or `gc sync`", verbList(gcVerbs))
	}
	op, known := gcVerbs[toks[1].text]
	if !known {
		return Step{}, synErr(toks[1], "unknown gc verb %q (known: %s; and `gc sync`, alone)", toks[1].text, verbList(gcVerbs))
	}
	t, err := parseKey(toks[2], true)
	if err != nil {
		return Step{}, err
	}
	st := Step{Actor: ActorGC, Op: op, Target: t}
	if t.Kind != NoKind && !t.Kind.Info().Namespaced && strings.Count(toks[2].text, "/") == 2 {
		// a virtual node of a cluster-scoped kind carries its dependent's
		// namespace; the GC's key keeps it
		parts := strings.Split(toks[2].text, "/")
		st.Target.Namespace = parts[1]
	}
	if op == OpSend {
		st.Write = map[string]WriteOp{"delete": WriteDelete, "patch": WritePatchOwners, "unblock": WriteUnblock}[toks[1].text]
	}
	for _, a := range toks[3:] {
		k, v, _ := strings.Cut(a.text, "=")
		if k != "uid" || v == "" {
			return Step{}, synErr(a, "unexpected %q: gc steps take only uid=LABEL", a.text)
		}
		st.UIDLabel = v
	}
	return st, nil
}

func parseController(toks []token) (Step, error) {
	if len(toks) < 3 {
		return Step{}, synErr(toks[0], "expected `controller deliver|coalesce|adopt KEY`")
	}
	t, err := parseKey(toks[2], false)
	if err != nil {
		return Step{}, err
	}
	switch toks[1].text {
	case "deliver", "coalesce":
		if len(toks) != 3 {
			return Step{}, synErr(toks[3], "unexpected %q", toks[3].text)
		}
		op := OpDeliver
		if toks[1].text == "coalesce" {
			op = OpCoalesce
		}
		return Step{Actor: ActorController, Op: op, Target: t}, nil
	case "adopt", "release":
		if len(toks) != 4 || !strings.HasPrefix(toks[3].text, "by=") {
			return Step{}, synErr(toks[1], "expected `controller %s KEY by=OWNER`", toks[1].text)
		}
		by, err := parseKey(token{toks[3].text[3:], toks[3].col + 3}, false)
		if err != nil {
			return Step{}, err
		}
		op := OpAdopt
		if toks[1].text == "release" {
			op = OpRelease
		}
		return Step{Actor: ActorController, Op: op, Target: t, By: by}, nil
	}
	return Step{}, synErr(toks[1], "unknown controller verb %q (known: adopt, coalesce, deliver, release)", toks[1].text)
}

// parseKey reads kind/name or kind/namespace/name. With allowUnserved, a
// kind written as an API kind name that the model does not serve is kept
// whole (GC items can name such owners).
func parseKey(t token, allowUnserved bool) (Target, error) {
	parts := strings.Split(t.text, "/")
	clusterScope := len(parts) == 3 && parts[1] == "" && parts[0] != "" && parts[2] != "" // kind//name (see ObjKey)
	if len(parts) < 2 || len(parts) > 3 || (slicesContainsEmpty(parts) && !clusterScope) {
		return Target{}, synErr(t, "expected kind/name or kind/namespace/name, got %q", t.text)
	}
	k, known := KindByShort(parts[0])
	if !known {
		if kk, byName := KindByName(parts[0]); byName {
			k, known = kk, true
		}
	}
	if !known {
		if allowUnserved {
			return Target{Kind: NoKind, Name: t.text}, nil
		}
		return Target{}, synErr(t, "unknown kind %q (known: %s)", parts[0], shortNames())
	}
	ns, name := DefaultNamespace, parts[len(parts)-1]
	if len(parts) == 3 {
		ns = parts[1]
	}
	if !validName(name) || (len(parts) == 3 && !validName(ns)) {
		return Target{}, synErr(t, "%q: an object's name and namespace are lowercase letters, digits, '-' and '.', starting and ending with a letter or digit (the API server refuses others with 422)", t.text)
	}
	if clusterScope && !k.Info().Namespaced {
		return Target{}, synErr(t, "%s is cluster-scoped: write %s/%s", parts[0], parts[0], name)
	}
	if !k.Info().Namespaced {
		if len(parts) == 3 && !allowUnserved {
			return Target{}, synErr(t, "%s is cluster-scoped: write %s/%s", parts[0], parts[0], name)
		}
		ns = ""
	}
	return Target{Kind: k, Namespace: ns, Name: name}, nil
}

// validName reports whether s is a lowercase RFC 1123 subdomain, as
// ValidateObjectMeta requires of most kinds' names (namespaces are
// stricter still: labels, without dots).
func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
	if !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

func slicesContainsEmpty(ps []string) bool {
	for _, p := range ps {
		if p == "" {
			return true
		}
	}
	return false
}

func shortNames() string {
	var out []string
	for _, k := range Kinds {
		out = append(out, k.Short)
	}
	return strings.Join(out, ", ")
}

func parseClient(toks []token) (Step, error) {
	op, known := clientVerbs[toks[0].text]
	if !known {
		return Step{}, synErr(toks[0], "unknown command %q (client verbs: %s; actors: gc, controller, apiextensions; and settle)", toks[0].text, verbList(clientVerbs))
	}
	if len(toks) < 2 {
		return Step{}, synErr(toks[0], "%s needs an object key", toks[0].text)
	}
	t, err := parseKey(toks[1], false)
	if err != nil {
		return Step{}, err
	}
	st := Step{Actor: ActorClient, Op: op, Target: t}
	args := toks[2:]
	// positional argument of update verbs
	switch op {
	case OpAddFinalizer, OpRemoveFinalizer, OpAddOwner, OpRemoveOwner, OpLabel, OpUnlabel, OpScale:
		if len(args) == 0 {
			return Step{}, synErr(toks[1], "%s needs a value after the key", toks[0].text)
		}
		a := args[0]
		args = args[1:]
		switch op {
		case OpAddFinalizer, OpRemoveFinalizer:
			st.Finalizer = a.text
		case OpAddOwner, OpRemoveOwner:
			if st.Owner, err = parseOwner(a); err != nil {
				return Step{}, err
			}
		case OpLabel:
			k, v, found := strings.Cut(a.text, "=")
			if !found || k == "" {
				return Step{}, synErr(a, "expected key=value")
			}
			st.Label = Label{k, v}
		case OpUnlabel:
			st.Label = Label{Key: a.text}
		case OpScale:
			n, err := strconv.Atoi(a.text)
			if err != nil || n < 0 {
				return Step{}, synErr(a, "expected a replica count")
			}
			st.Replicas = n
		}
	}
	for _, a := range args {
		k, v, hasVal := strings.Cut(a.text, "=")
		switch {
		case k == "as":
			switch v {
			case "admin":
				st.Principal = PrincipalAdmin
			case "limited":
				st.Principal = PrincipalLimited
			default:
				return Step{}, synErr(a, "unknown principal %q (known: admin, limited)", v)
			}
		case k == "if-rv" && op != OpCreate:
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return Step{}, synErr(a, "if-rv needs a positive resourceVersion")
			}
			if op == OpDelete {
				st.Delete.PreconditionRV = n
			} else {
				st.IfRV = n
			}
		case op == OpCreate && k == "labels":
			for _, kv := range strings.Split(v, ",") {
				lk, lv, ok := strings.Cut(kv, "=")
				if !ok || lk == "" {
					return Step{}, synErr(a, "labels: expected k=v[,k=v]")
				}
				st.Labels = insertLabel(st.Labels, Label{lk, lv})
			}
		case op == OpCreate && k == "selector":
			lk, lv, ok := strings.Cut(v, "=")
			if !ok || lk == "" {
				return Step{}, synErr(a, "selector: expected k=v")
			}
			st.Selector = Label{lk, lv}
		case op == OpCreate && k == "replicas":
			if !t.Kind.Info().Workload {
				return Step{}, synErr(a, "replicas: %s has no replicas (workload kinds: %s)", t.Kind.Info().Short, workloadShortNames())
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return Step{}, synErr(a, "replicas: expected a count")
			}
			st.Replicas = n
		case op == OpCreate && k == "finalizers":
			st.Finalizers = strings.Split(v, ",")
		case op == OpCreate && k == "owner":
			o, err := parseOwner(token{v, a.col + 6})
			if err != nil {
				return Step{}, err
			}
			st.Owners = append(st.Owners, o)
		case op == OpDelete && k == "propagation":
			p, ok := ParsePolicy(v)
			if !ok {
				return Step{}, synErr(a, "propagation: expected Background, Foreground or Orphan, got %q", v)
			}
			st.Delete.Policy = p
		case op == OpDelete && k == "orphan":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return Step{}, synErr(a, "orphan: expected true or false")
			}
			st.Delete.OrphanDependents = &b
		case op == OpDelete && k == "if-uid":
			st.IfUIDSym = v
		case op == OpDelete && k == "dry-run" && !hasVal:
			st.Delete.DryRun = true
		default:
			return Step{}, synErr(a, "unexpected argument %q for %s (it takes %s)", a.text, toks[0].text, clientArgs(op))
		}
	}
	return st, nil
}

// clientArgs lists the KEY=VALUE arguments a client verb takes, as
// parseClient reads them.
func clientArgs(op Op) string {
	switch op {
	case OpCreate:
		return "labels=k=v[,k=v], selector=k=v, replicas=N, finalizers=a[,b], owner=KEY[,FLAGS] (repeatable), as=admin|limited"
	case OpDelete:
		return "propagation=Background|Foreground|Orphan, orphan=true|false, if-uid=SYMBOL, if-rv=N, dry-run, as=admin|limited"
	}
	return "if-rv=N, as=admin|limited"
}

func workloadShortNames() string {
	var out []string
	for _, k := range Kinds {
		if k.Workload {
			out = append(out, k.Short)
		}
	}
	return strings.Join(out, ", ")
}

func insertLabel(ls []Label, l Label) []Label {
	for i := range ls {
		if ls[i].Key == l.Key {
			ls[i] = l
			return ls
		}
	}
	ls = append(ls, l)
	for i := len(ls) - 1; i > 0 && ls[i].Key < ls[i-1].Key; i-- {
		ls[i], ls[i-1] = ls[i-1], ls[i]
	}
	return ls
}

// parseOwner reads KEY[,controller|,controller=unset][,block|,block=unset][,uid=SYM].
func parseOwner(t token) (OwnerSpec, error) {
	parts := strings.Split(t.text, ",")
	key, err := parseKey(token{parts[0], t.col}, true)
	if err != nil {
		return OwnerSpec{}, err
	}
	o := OwnerSpec{Namespace: key.Namespace, Name: key.Name}
	if key.Kind == NoKind {
		kind, name, _ := strings.Cut(key.Name, "/")
		o.Kind, o.Name = kind, name
		if strings.Contains(name, "/") {
			return OwnerSpec{}, synErr(t, "an unserved owner kind is written Kind/name")
		}
		o.Namespace = ""
	} else {
		o.Kind = key.Kind.Info().Kind
	}
	col := t.col + len(parts[0]) + 1
	for _, p := range parts[1:] {
		switch {
		case p == "controller":
			o.Controller = true
		case p == "controller=unset":
			o.ControllerUnset = true
		case p == "block":
			o.Block = true
		case p == "block=unset":
			o.BlockUnset = true
		case p == "uid=":
			o.UIDSym = "-"
		case strings.HasPrefix(p, "uid="):
			o.UIDSym = p[4:]
		default:
			return OwnerSpec{}, &SyntaxError{Col: col, Msg: fmt.Sprintf("unknown owner flag %q (known: controller, controller=unset, block, block=unset, uid=SYMBOL)", p)}
		}
		col += len(p) + 1
	}
	return o, nil
}

// String renders a step in trace syntax; ParseStep reads it back.
func (st Step) String() string {
	var b strings.Builder
	switch st.Actor {
	case ActorGC:
		verb := map[Op]string{OpDeliver: "deliver", OpDeliverVirtual: "deliver-virtual", OpCoalesce: "coalesce", OpLose: "lose", OpAttemptToDelete: "attemptToDelete", OpAttemptToOrphan: "attemptToOrphan"}[st.Op]
		if st.Op == OpSend {
			verb = writeVerb(st.Write)
		}
		if st.Op == OpSync {
			return "gc sync"
		}
		b.WriteString("gc " + verb + " " + st.Target.String())
		if st.UIDLabel != "" {
			b.WriteString(" uid=" + st.UIDLabel)
		}
		return b.String()
	case ActorController:
		verb := map[Op]string{OpDeliver: "deliver", OpCoalesce: "coalesce", OpAdopt: "adopt", OpRelease: "release"}[st.Op]
		b.WriteString("controller " + verb + " " + st.Target.String())
		if st.Op == OpAdopt || st.Op == OpRelease {
			b.WriteString(" by=" + st.By.String())
		}
		return b.String()
	case ActorAPIExtensions:
		return "apiextensions cleanup " + st.Target.String()
	}
	for v, op := range clientVerbs {
		if op == st.Op {
			b.WriteString(v)
		}
	}
	b.WriteString(" " + st.Target.String())
	switch st.Op {
	case OpAddFinalizer, OpRemoveFinalizer:
		b.WriteString(" " + st.Finalizer)
	case OpAddOwner, OpRemoveOwner:
		b.WriteString(" " + st.Owner.String())
	case OpLabel:
		b.WriteString(" " + st.Label.Key + "=" + st.Label.Value)
	case OpUnlabel:
		b.WriteString(" " + st.Label.Key)
	case OpScale:
		b.WriteString(" " + itoa(st.Replicas))
	case OpCreate:
		writeSpec(&b, st.Labels, st.Selector, st.Replicas)
		if len(st.Finalizers) > 0 {
			b.WriteString(" finalizers=" + strings.Join(st.Finalizers, ","))
		}
		for _, o := range st.Owners {
			b.WriteString(" owner=" + o.String())
		}
	case OpDelete:
		d := st.Delete
		if d.Policy != NoPolicy {
			b.WriteString(" propagation=" + d.Policy.String())
		}
		if d.OrphanDependents != nil {
			b.WriteString(" orphan=" + strconv.FormatBool(*d.OrphanDependents))
		}
		if st.IfUIDSym != "" {
			b.WriteString(" if-uid=" + st.IfUIDSym)
		}
		if d.PreconditionRV != 0 {
			b.WriteString(" if-rv=" + itoa(d.PreconditionRV))
		}
		if d.DryRun {
			b.WriteString(" dry-run")
		}
	}
	if st.IfRV != 0 {
		b.WriteString(" if-rv=" + itoa(st.IfRV))
	}
	if st.Principal == PrincipalLimited {
		b.WriteString(" as=limited")
	}
	return b.String()
}

// writeSpec writes the labels=, selector= and replicas= fields that a
// create step and a state dump spell the same way.
func writeSpec(b *strings.Builder, labels []Label, sel Label, replicas int) {
	if len(labels) > 0 {
		b.WriteString(" labels=" + formatLabels(labels))
	}
	if sel.Key != "" {
		b.WriteString(" selector=" + sel.Key + "=" + sel.Value)
	}
	if replicas != 0 {
		b.WriteString(" replicas=" + itoa(replicas))
	}
}

// String renders an owner spec as parseOwner reads it.
func (o OwnerSpec) String() string {
	var key string
	if k, ok := KindByName(o.Kind); ok {
		key = ObjKey(k, o.Namespace, o.Name)
		if !k.Info().Namespaced {
			key = ObjKey(k, "", o.Name)
		}
	} else {
		key = o.Kind + "/" + o.Name
	}
	key += strings.ReplaceAll(refFlags(o.Controller, o.ControllerUnset, o.Block, o.BlockUnset), " ", ",")
	switch o.UIDSym {
	case "":
	case "-":
		key += ",uid="
	default:
		key += ",uid=" + o.UIDSym
	}
	return key
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
