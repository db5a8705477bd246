package render

import (
	"fmt"
	"html"
	"strings"

	"github.com/cascade-k8s/cascade/traces"
)

// raceBanner writes the line under the header that names the racing
// pair, each a link to its step, or says that no step violates anything.
func raceBanner(b *strings.Builder, frames []traces.Frame, names []string, lane []int, r Race) {
	b.WriteString(`<div id="race">`)
	if r.Violating < 0 {
		b.WriteString(`<p class="muted">no step violates a property</p></div>`)
		return
	}
	step := func(i int) string {
		return fmt.Sprintf(`<a href="#%d" data-go="%d">step %d</a> <span class="who">%s</span> <code>%s</code>`, i, i, i, html.EscapeString(names[lane[i]]), html.EscapeString(frames[i].Command))
	}
	fmt.Fprintf(b, `<p class="mark-violating"><span class="tag">✖ violating</span> %s violates <b>%s</b></p>`, step(r.Violating), html.EscapeString(r.Property))
	if r.Enabling >= 0 {
		fmt.Fprintf(b, `<p class="mark-enabling"><span class="tag">⚡ made it possible</span> %s</p>`, step(r.Enabling))
	} else {
		b.WriteString(`<p class="muted">no single earlier step by itself made it possible</p>`)
	}
	b.WriteString(`</div>`)
}

// swimlanes writes the steps as a table: one row per step in order, one
// column per actor, each step in its actor's column. The violating and
// the enabling step carry their marks; the script draws an arrow between
// them.
func swimlanes(b *strings.Builder, frames []traces.Frame, names []string, lane []int, r Race) {
	b.WriteString(`<div id="lanes"><table id="swimlanes"><thead><tr><th class="n">#</th>`)
	for _, n := range names {
		fmt.Fprintf(b, `<th class="lane" data-lane="%s">%s</th>`, html.EscapeString(n), html.EscapeString(n))
	}
	b.WriteString(`</tr></thead><tbody>`)
	for i, f := range frames {
		var cls []string
		if hasViolation(f) {
			cls = append(cls, "violation")
		}
		mark := ""
		switch i {
		case r.Violating:
			cls = append(cls, "mark-violating")
			mark = `<span class="tag">✖ violating</span>`
		case r.Enabling:
			cls = append(cls, "mark-enabling")
			mark = `<span class="tag">⚡ made it possible</span>`
		}
		fmt.Fprintf(b, `<tr class="%s" data-i="%d"><td class="n">%d</td>`, strings.Join(cls, " "), i, i)
		if lane[i] < 0 {
			fmt.Fprintf(b, `<td class="init" colspan="%d">(initial state)</td></tr>`, len(names))
			continue
		}
		for l := range names {
			if l != lane[i] {
				b.WriteString(`<td></td>`)
				continue
			}
			cell := []string{"step"}
			if i == r.Violating || i == r.Enabling {
				cell = append(cell, "racing")
			}
			if !f.Result.OK() && f.Result.Code != 0 {
				cell = append(cell, "failed")
			}
			settled := ""
			if f.Settled {
				settled = ` <span class="settle">settle</span>`
			}
			fmt.Fprintf(b, `<td class="%s" title="%s">%s%s%s</td>`, strings.Join(cell, " "), html.EscapeString(f.Command+" → "+f.Result.String()), html.EscapeString(shortCommand(f.Command)), settled, mark)
		}
		b.WriteString(`</tr>`)
	}
	b.WriteString(`</tbody></table><svg id="race-arrow" aria-hidden="true"></svg></div>`)
}

// shortCommand drops the actor word the lane already says.
func shortCommand(cmd string) string {
	for _, actor := range []string{"gc ", "controller ", "client ", "apiextensions "} {
		if rest, ok := strings.CutPrefix(cmd, actor); ok {
			return rest
		}
	}
	return cmd
}
