package render

import (
	"fmt"
	"io"
	"strings"

	"github.com/cascade-k8s/cascade/traces"
)

// DOT writes the ownership graph of one frame in Graphviz syntax: edges
// point from dependent to owner, blocking references bold red, references
// without controller dashed; deleting objects orange, gone ones grey.
func DOT(w io.Writer, frames []traces.Frame, step int) error {
	if step < 0 || step >= len(frames) {
		return fmt.Errorf("step %d out of range: the trace has steps 0..%d", step, len(frames)-1)
	}
	l := newLayout(frames)
	s := frames[step].State
	var b strings.Builder
	fmt.Fprintf(&b, "// cascade: step %d: %s\ndigraph ownership {\n  rankdir=BT;\n  node [shape=box, style=\"rounded,filled\", fontname=\"monospace\", fontsize=10];\n", step, frames[step].Command)
	for _, v := range l.vs {
		st, o := status(s, v)
		if st == "future" {
			continue
		}
		sty := styles[st]
		label := v.label + "\n" + st
		if o != nil && len(o.Finalizers) > 0 {
			label += "\nfinalizers: " + strings.Join(o.Finalizers, ", ")
		}
		extra := ""
		if sty[2] != "" {
			extra = `, style="rounded,filled,dashed"`
		}
		fmt.Fprintf(&b, "  %s [label=%s, fillcolor=%q, color=%q%s];\n", dotQuote(v.label), dotQuote(label), sty[0], sty[1], extra)
	}
	for _, v := range l.vs {
		_, o := status(s, v)
		if o == nil {
			continue
		}
		for _, r := range o.Owners {
			owner := l.byUID[r.UID]
			if owner == nil {
				continue
			}
			attrs := []string{}
			if r.Block {
				attrs = append(attrs, `color="#c62828"`, "penwidth=2.5", `label="block"`)
			}
			if !r.Controller {
				attrs = append(attrs, "style=dashed")
			}
			fmt.Fprintf(&b, "  %s -> %s [%s];\n", dotQuote(v.label), dotQuote(owner.label), strings.Join(attrs, ", "))
		}
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// dotQuote quotes a Graphviz ID; newlines become \n line breaks.
func dotQuote(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	s = strings.ReplaceAll(s, `"`, `\"`)
	return `"` + strings.ReplaceAll(s, "\n", `\n`) + `"`
}
