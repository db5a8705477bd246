package lin

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/cascade-k8s/cascade/harness/artifact"
	"github.com/cascade-k8s/cascade/harness/history"
)

// Visualize writes porcupine's HTML visualization of the check to path:
// the ops by lane with the (partial) linearizations found, annotated with
// the lanes' actors, the Known findings and, when the verdict is not Ok,
// the op the Summary names.
func (r *Result) Visualize(path string) error {
	info := r.Info // AddAnnotations appends to a copy: Visualize may run twice
	var anns []porcupine.Annotation
	if len(r.Ops) > 0 {
		start := r.Ops[0].Call
		for i := range r.Ops {
			start = min(start, r.Ops[i].Call)
		}
		var legend []string
		for lane, a := range r.Actors {
			legend = append(legend, fmt.Sprintf("%d=%s", lane, a))
		}
		anns = append(anns, porcupine.Annotation{Tag: "lanes", Start: start,
			Description: strings.Join(legend, " "), Details: r.Summary})
	}
	for _, k := range r.Known {
		op := &r.Ops[k.Op]
		anns = append(anns, porcupine.Annotation{ClientId: op.ClientID, Start: op.Call, End: op.Return,
			Description: "known " + k.Issue, Details: k.Message + " [" + k.Property + "]",
			BackgroundColor: "#fff3b0"})
	}
	if r.Culprit >= 0 && r.Culprit < len(r.Ops) {
		op := &r.Ops[r.Culprit]
		anns = append(anns, porcupine.Annotation{ClientId: op.ClientID, Start: op.Call, End: op.Return,
			Description: "cannot be linearized", Details: r.Summary, TextColor: "#ffffff", BackgroundColor: "#c0392b"})
	}
	info.AddAnnotations(anns)
	// artifact.Write: never over a file cascade did not write
	return artifact.Write(path, func(w io.Writer) error { return porcupine.Visualize(r.Model, info, w) })
}

// describeOp renders an op for the visualization: who did what to which
// object, and what the server answered.
func describeOp(in *input) string {
	op := in.op
	s := op.String()
	if op.Got != nil && !op.Removed && op.OK() {
		s += " " + describeObject(op.Got)
	}
	return fmt.Sprintf("#%d %s", in.id, s)
}

func describeMeta(in *input) string {
	op := in.op
	s := "actor " + op.Actor
	if op.Message != "" {
		s += "; " + op.Message
	}
	if len(op.Body) > 0 {
		b := string(op.Body)
		if len(b) > 300 {
			b = b[:300] + "…"
		}
		s += "; body " + b
	}
	return s
}

// describeObject renders what deletion reads of an object, briefly.
func describeObject(o *history.Object) string {
	var b strings.Builder
	b.WriteString("uid=" + short(o.UID) + " rv=" + strconv.FormatUint(o.RV, 10))
	if o.Deleting {
		b.WriteString(" deleting")
	}
	if len(o.Finalizers) > 0 {
		b.WriteString(" fin=" + strings.Join(o.Finalizers, ","))
	}
	for _, r := range o.Owners {
		b.WriteString(" owner=" + r.Kind + "/" + r.Name + "@" + short(r.UID))
		if r.Controller {
			b.WriteString(",controller")
		}
		if r.Block {
			b.WriteString(",block")
		}
	}
	return b.String()
}

// maxDescribed bounds a state's description (etcd's robustness model
// truncates the same way): the visualization shows it in a tooltip.
const maxDescribed = 12

func describeStore(s *store) string {
	es := s.sorted()
	var lines []string
	for i, e := range es {
		if i == maxDescribed {
			lines = append(lines, fmt.Sprintf("… %d more", len(es)-i))
			break
		}
		line := e.key.String() + " "
		switch {
		case e.flags&contentUnknown != 0:
			line += "(maybe written: content unknown)"
		case e.flags&uidUnknown != 0:
			line += "(maybe created: uid unknown) " + describeObject(e.obj)
		default:
			line += describeObject(e.obj)
		}
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		return "(empty)"
	}
	return strings.Join(lines, "\n")
}
