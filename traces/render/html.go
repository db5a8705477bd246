package render

import (
	"fmt"
	"html"
	"io"
	"strings"

	"github.com/cascade-k8s/cascade/model"
	"github.com/cascade-k8s/cascade/traces"
)

// HTML writes one self-contained page (no external resources) that steps
// through the trace: the ownership graph of each step as SVG, the step's
// actor, command and API result, any property it violated, the state
// diff, and the GC's queues.
func HTML(w io.Writer, t *traces.Trace, frames []traces.Frame) error {
	l := newLayout(frames)
	var b strings.Builder
	title := t.Path
	fmt.Fprintf(&b, "<!doctype html><html><head><meta charset=\"utf-8\"><title>cascade: %s</title><style>%s</style></head><body>", html.EscapeString(title), css)
	fmt.Fprintf(&b, "<header><h1>%s</h1>", html.EscapeString(title))
	for _, d := range t.Description {
		fmt.Fprintf(&b, "<p>%s</p>", html.EscapeString(d))
	}
	if len(t.Headers) > 0 {
		b.WriteString("<dl>")
		for _, h := range t.Headers {
			fmt.Fprintf(&b, "<dt>%s</dt><dd>%s</dd>", html.EscapeString(h.Key), html.EscapeString(h.Value))
		}
		b.WriteString("</dl>")
	}
	b.WriteString(`</header><nav><button id="prev" title="previous step (←)">◀ prev</button> <span id="pos"></span> <button id="next" title="next step (→)">next ▶</button> <input id="slider" type="range" min="0" value="0"> <span class="legend"><span class="k live">live</span><span class="k deleting">deleting</span><span class="k gone">gone</span><span class="k ghost">no such UID</span> <span class="blk">━ blockOwnerDeletion</span> · dashed edge: not controller · thick box: changed by this step</span></nav><main><ol id="steps" start="0">`)
	for i, f := range frames {
		cls := "actor-" + f.Actor
		if hasViolation(f) {
			cls += " violation"
		}
		if !f.Result.OK() && f.Result.Code != 0 {
			cls += " failed"
		}
		cmd := f.Command
		if f.Settled {
			cmd += "  (settle)"
		}
		fmt.Fprintf(&b, `<li class="%s" data-i="%d">%s</li>`, cls, i, html.EscapeString(cmd))
	}
	b.WriteString(`</ol><section id="frames">`)
	for i, f := range frames {
		var prev *model.State
		if i > 0 {
			prev = frames[i-1].State
		}
		fmt.Fprintf(&b, `<div class="frame" id="f%d" hidden><div class="graph">%s</div><aside>`, i, l.svg(f.State, changedUIDs(prev, f.State)))
		who := f.Actor
		if who == "" {
			who = "start"
		}
		fmt.Fprintf(&b, "<h2>step %d of %d</h2><p>actor <b>%s</b>: <code>%s</code></p>", i, len(frames)-1, html.EscapeString(who), html.EscapeString(f.Command))
		if f.Line > 0 {
			fmt.Fprintf(&b, "<p class=\"muted\">%s:%d</p>", html.EscapeString(t.Path), f.Line)
		}
		if f.Result.Code != 0 {
			cls := "ok"
			if !f.Result.OK() {
				cls = "err"
			}
			fmt.Fprintf(&b, "<p class=\"%s\">API result: %s</p>", cls, html.EscapeString(f.Result.String()))
		}
		for _, v := range f.Violations {
			fmt.Fprintf(&b, "<p class=\"violation\">violates <b>%s</b>: %s</p>", html.EscapeString(v.Property), html.EscapeString(v.Message))
			if v.Known != "" {
				fmt.Fprintf(&b, "<p class=\"muted\">known upstream race %s</p>", html.EscapeString(v.Known))
			}
		}
		b.WriteString("<h3>state change</h3><pre class=\"diff\">")
		var before []string
		if prev != nil {
			before = prev.Dump()
		}
		for _, d := range traces.DiffLines(before, f.State.Dump()) {
			cls := "same"
			switch d[0] {
			case '+':
				cls = "add"
			case '-':
				cls = "del"
			}
			fmt.Fprintf(&b, "<span class=\"%s\">%s</span>\n", cls, html.EscapeString(d))
		}
		b.WriteString("</pre><h3>garbage collector</h3><pre>")
		b.WriteString(html.EscapeString(gcSummary(f.State)))
		b.WriteString("</pre></aside></div>")
	}
	fmt.Fprintf(&b, "</section></main><script>%s</script></body></html>\n", script)
	_, err := io.WriteString(w, b.String())
	return err
}

func hasViolation(f traces.Frame) bool { return len(f.Violations) > 0 }

// changedUIDs lists objects whose dump line differs between two states.
func changedUIDs(prev, next *model.State) map[model.UID]bool {
	out := map[model.UID]bool{}
	if prev == nil {
		return out
	}
	for i := range next.UIDs {
		u := model.UID(i + 1)
		a, b := prev.Get(u), next.Get(u)
		switch {
		case a == nil && b == nil:
		case a == nil || b == nil:
			out[u] = true
		case prev.DumpObject(a) != next.DumpObject(b):
			out[u] = true
		}
	}
	return out
}

// gcSummary lists the GC's pending work in a frame.
func gcSummary(s *model.State) string {
	var b strings.Builder
	pending := s.GC.Watch.Events()
	fmt.Fprintf(&b, "undelivered watch events: %d\n", len(pending))
	for _, e := range pending {
		fmt.Fprintf(&b, "  %s %s\n", [...]string{"ADDED", "MODIFIED", "DELETED"}[e.Type], e.Obj.Key())
	}
	list := func(name string, ids []model.Identity) {
		var parts []string
		for _, id := range ids {
			parts = append(parts, s.UIDLabel(id.UID))
		}
		fmt.Fprintf(&b, "%s: [%s]\n", name, strings.Join(parts, " "))
	}
	list("virtual delete events", s.GC.VirtualEvents)
	list("attemptToDelete", s.GC.AttemptToDelete)
	list("attemptToOrphan", s.GC.AttemptToOrphan)
	for _, f := range s.GC.InFlight {
		for _, w := range f.Writes {
			fmt.Fprintf(&b, "in flight: %s %s\n", [...]string{"DELETE", "PATCH ownerReferences", "PATCH unblock"}[w.Op], s.UIDLabel(w.Item.UID))
		}
	}
	list("absentOwnerCache", s.GC.Absent)
	return b.String()
}

const css = `body{font-family:system-ui,sans-serif;margin:0;color:#222}header{padding:10px 16px;background:#263238;color:#eceff1}header h1{font-size:16px;margin:0 0 4px}header p{margin:2px 0;font-size:13px}header dl{display:grid;grid-template-columns:max-content auto;gap:0 10px;font-size:12px;margin:6px 0 0}header dt{color:#90a4ae}header dd{margin:0}
nav{padding:8px 16px;border-bottom:1px solid #ccc;display:flex;gap:8px;align-items:center;font-size:13px;flex-wrap:wrap}#slider{width:240px}.legend .k{display:inline-block;padding:1px 6px;margin-right:4px;border:1.5px solid;border-radius:4px}.k.live{background:#e8f5e9;border-color:#2e7d32}.k.deleting{background:#fff3e0;border-color:#ef6c00}.k.gone{background:#f5f5f5;border-color:#9e9e9e;border-style:dashed}.k.ghost{background:#f3e5f5;border-color:#7b1fa2;border-style:dotted}.blk{color:#c62828;font-weight:bold}
main{display:flex;align-items:flex-start}#steps{width:300px;margin:0;padding:8px 8px 8px 34px;font:12px ui-monospace,monospace;max-height:calc(100vh - 120px);overflow:auto;border-right:1px solid #ddd}#steps li{cursor:pointer;padding:2px 4px;border-radius:3px}#steps li.cur{background:#bbdefb}#steps li.actor-gc{color:#1565c0}#steps li.actor-controller{color:#6a1b9a}#steps li.actor-apiextensions{color:#00695c}#steps li.failed{text-decoration:underline wavy #c62828}#steps li.violation{background:#ffebee;font-weight:bold}
#frames{flex:1}.frame{display:flex;gap:12px;padding:12px}.frame[hidden]{display:none}.graph{overflow:auto;max-width:60vw}aside{min-width:320px;font-size:13px}aside pre{font-size:11px;background:#fafafa;border:1px solid #eee;padding:6px;white-space:pre-wrap}.add{color:#2e7d32}.del{color:#c62828}.same{color:#888}.ok{color:#2e7d32}.err{color:#c62828}p.violation{background:#ffebee;border-left:4px solid #c62828;padding:4px 8px}.muted{color:#888;font-size:12px}`

const script = `(function(){var fr=document.querySelectorAll('.frame'),li=document.querySelectorAll('#steps li'),sl=document.getElementById('slider'),pos=document.getElementById('pos'),cur=0;sl.max=fr.length-1;
function show(i){if(i<0||i>=fr.length)return;fr[cur].hidden=true;li[cur].classList.remove('cur');cur=i;fr[cur].hidden=false;li[cur].classList.add('cur');sl.value=i;pos.textContent='step '+i+' / '+(fr.length-1);li[cur].scrollIntoView({block:'nearest'});if(location.hash!=='#'+i)history.replaceState(null,'','#'+i);}
document.getElementById('prev').onclick=function(){show(cur-1)};document.getElementById('next').onclick=function(){show(cur+1)};sl.oninput=function(){show(+sl.value)};
li.forEach(function(e){e.onclick=function(){show(+e.dataset.i)}});document.addEventListener('keydown',function(e){if(e.key==='ArrowRight'||e.key==='j')show(cur+1);if(e.key==='ArrowLeft'||e.key==='k')show(cur-1)});
var h=parseInt(location.hash.slice(1));fr[0].hidden=true;show(isNaN(h)?0:Math.min(h,fr.length-1));if(isNaN(h)){var v=document.querySelector('#steps li.violation');if(v)show(+v.dataset.i);}})();`
