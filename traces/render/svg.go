package render

import (
	"fmt"
	"html"
	"strings"

	"github.com/cascade-k8s/cascade/model"
)

// status of a vertex in one frame.
func status(s *model.State, v *vertex) (string, *model.Object) {
	if int(v.uid) > len(s.UIDs) {
		return "future", nil
	}
	if v.ghost {
		return "ghost", nil
	}
	if o := s.Get(v.uid); o != nil {
		if o.Deleting {
			return "deleting", o
		}
		return "live", o
	}
	return "gone", nil
}

var styles = map[string][3]string{ // fill, stroke, dash
	"live":     {"#e8f5e9", "#2e7d32", ""},
	"deleting": {"#fff3e0", "#ef6c00", ""},
	"gone":     {"#f5f5f5", "#9e9e9e", "6 4"},
	"ghost":    {"#f3e5f5", "#7b1fa2", "2 3"},
}

// gcFlags summarises the GC's node for an object.
func gcFlags(s *model.State, u model.UID) string {
	n := s.GC.Node(u)
	if n == nil {
		return "gc: not in graph"
	}
	var fs []string
	if n.Virtual {
		fs = append(fs, "virtual")
	}
	if n.BeingDeleted {
		fs = append(fs, "beingDeleted")
	}
	if n.DeletingDependents {
		fs = append(fs, "deletingDependents")
	}
	if len(fs) == 0 {
		fs = append(fs, "observed")
	}
	return "gc: " + strings.Join(fs, ", ")
}

// svg draws one frame. changed marks objects the step touched.
func (l *layout) svg(s *model.State, changed map[model.UID]bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="ui-monospace,monospace" font-size="11">`, l.width, l.height, l.width, l.height)
	b.WriteString(`<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker>` +
		`<marker id="arrowblock" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" markerHeight="6" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#c62828"/></marker></defs>`)
	// edges first, under the boxes: dependent -> owner
	for _, v := range l.vs {
		st, o := status(s, v)
		if o == nil || st == "future" {
			continue
		}
		for _, r := range o.Owners {
			w := l.byUID[r.UID]
			if w == nil {
				continue
			}
			x1, y1 := v.x+boxW/2, v.y
			x2, y2 := w.x+boxW/2, w.y+boxH
			if w.y >= v.y { // same layer or a cycle: bend around
				y1, y2 = v.y+boxH/2, w.y+boxH/2
				x1, x2 = v.x, w.x+boxW
				if w.x > v.x {
					x1, x2 = v.x+boxW, w.x
				}
			}
			stroke, width, marker := "#555", "1.5", "arrow"
			if r.Block {
				stroke, width, marker = "#c62828", "3", "arrowblock"
			}
			dash := ""
			if !r.Controller {
				dash = ` stroke-dasharray="5 3"`
			}
			fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="%s"%s marker-end="url(#%s)"/>`, x1, y1, x2, y2, stroke, width, dash, marker)
			var tags []string
			if r.Controller {
				tags = append(tags, "controller")
			}
			if r.Block {
				tags = append(tags, "block")
			}
			if l.byUID[r.UID].label != r.Kind+"/"+r.Name && !strings.HasSuffix(l.byUID[r.UID].label, "/"+r.Name) {
				tags = append(tags, "uid="+l.byUID[r.UID].label)
			}
			if len(tags) > 0 {
				fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s" font-size="10">%s</text>`, (x1+x2)/2+4, (y1+y2)/2, stroke, html.EscapeString(strings.Join(tags, " ")))
			}
		}
	}
	for _, v := range l.vs {
		st, o := status(s, v)
		if st == "future" {
			continue
		}
		sty := styles[st]
		sw := "1.5"
		if changed[v.uid] {
			sw = "4"
		}
		dash := ""
		if sty[2] != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, sty[2])
		}
		fmt.Fprintf(&b, `<g><title>%s</title><rect x="%d" y="%d" width="%d" height="%d" rx="6" fill="%s" stroke="%s" stroke-width="%s"%s/>`,
			html.EscapeString(v.label), v.x, v.y, boxW, boxH, sty[0], sty[1], sw, dash)
		lines := []string{v.label, st}
		if st == "ghost" {
			lines[1] = "no object has this UID"
		}
		if o != nil {
			if len(o.Finalizers) > 0 {
				lines = append(lines, "⚑ "+strings.Join(o.Finalizers, ", "))
			}
			lines = append(lines, gcFlags(s, o.UID))
		} else if n := s.GC.Node(v.uid); n != nil {
			lines = append(lines, gcFlags(s, v.uid))
		}
		for i, t := range lines {
			if len(t) > 30 {
				t = t[:29] + "…"
			}
			weight := ""
			if i == 0 {
				weight = ` font-weight="bold"`
			}
			fmt.Fprintf(&b, `<text x="%d" y="%d"%s>%s</text>`, v.x+8, v.y+15+i*13, weight, html.EscapeString(t))
		}
		b.WriteString(`</g>`)
	}
	b.WriteString(`</svg>`)
	return b.String()
}
