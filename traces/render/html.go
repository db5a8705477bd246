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
	if len(t.Description) > 0 {
		fmt.Fprintf(&b, "<p>%s</p>", html.EscapeString(strings.Join(t.Description, " ")))
	}
	if len(t.Headers) > 0 {
		b.WriteString("<dl>")
		for _, h := range t.Headers {
			fmt.Fprintf(&b, "<dt>%s</dt><dd>%s</dd>", html.EscapeString(h.Key), html.EscapeString(h.Value))
		}
		b.WriteString("</dl>")
	}
	b.WriteString(`</header>`)
	r := FindRace(t, frames)
	names, lane := lanes(frames)
	raceBanner(&b, frames, names, lane, r)
	fmt.Fprintf(&b, `<nav data-open="%d"><button id="prev" title="previous step (←)">◀ prev</button> <span id="pos"></span> <button id="next" title="next step (→)">next ▶</button> <input id="slider" type="range" min="0" value="0"> <span class="legend"><span class="k live">live</span><span class="k deleting">deleting</span><span class="k gone">gone</span><span class="k ghost">no such UID</span> <span class="blk">━ blockOwnerDeletion</span> · dashed edge: not controller · thick box: changed by this step</span></nav><main>`, opening(r))
	swimlanes(&b, frames, names, lane, r)
	b.WriteString(`<section id="frames">`)
	for i, f := range frames {
		var prev *model.State
		if i > 0 {
			prev = frames[i-1].State
		}
		changed := changedUIDs(prev, f.State)
		fmt.Fprintf(&b, `<div class="frame" id="f%d" hidden><div class="graphs">`, i)
		if prev != nil && (i == r.Violating || i == r.Enabling) {
			fmt.Fprintf(&b, `<figure class="before"><figcaption>before step %d</figcaption>%s</figure>`, i, l.svg(prev, changed))
		}
		fmt.Fprintf(&b, `<figure class="after"><figcaption>after step %d</figcaption>%s</figure></div><aside>`, i, l.svg(f.State, changed))
		who := "start"
		if lane[i] >= 0 {
			who = names[lane[i]]
		}
		fmt.Fprintf(&b, "<h2>step %d of %d</h2><p>actor <b>%s</b>: <code>%s</code></p>", i, len(frames)-1, html.EscapeString(who), html.EscapeString(f.Command))
		switch i {
		case r.Violating:
			fmt.Fprintf(&b, `<p class="mark-violating"><span class="tag">✖ the violating step</span></p>`)
		case r.Enabling:
			fmt.Fprintf(&b, `<p class="mark-enabling"><span class="tag">⚡ made it possible</span> without this step, step %d would not violate <b>%s</b></p>`, r.Violating, html.EscapeString(r.Property))
		}
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

// opening is the step the page opens on: the violating one, else the
// first.
func opening(r Race) int { return max(r.Violating, 0) }

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

const css = `body{font-family:system-ui,sans-serif;margin:0;color:#222;height:100vh;display:flex;flex-direction:column}header,#race,nav{flex:none}header{padding:8px 16px;background:#263238;color:#eceff1}header h1{font-size:16px;margin:0 0 4px}header p{margin:2px 0;font-size:13px;max-width:1400px}header dl{display:grid;grid-template-columns:max-content auto;gap:0 10px;font-size:12px;margin:6px 0 0}header dt{color:#90a4ae}header dd{margin:0}
#race{padding:6px 16px;border-bottom:1px solid #ccc;font-size:13px}#race p{margin:3px 0}#race a{font-weight:bold;color:inherit}#race .who{color:#555}
.tag{display:inline-block;padding:0 6px;border-radius:3px;color:#fff;font:bold 11px system-ui,sans-serif;margin:0 4px;white-space:nowrap}.mark-violating .tag{background:#c62828}.mark-enabling .tag{background:#e65100}
nav{padding:8px 16px;border-bottom:1px solid #ccc;display:flex;gap:8px;align-items:center;font-size:13px;flex-wrap:wrap}#slider{width:240px}.legend .k{display:inline-block;padding:1px 6px;margin-right:4px;border:1.5px solid;border-radius:4px}.k.live{background:#e8f5e9;border-color:#2e7d32}.k.deleting{background:#fff3e0;border-color:#ef6c00}.k.gone{background:#f5f5f5;border-color:#9e9e9e;border-style:dashed}.k.ghost{background:#f3e5f5;border-color:#7b1fa2;border-style:dotted}.blk{color:#c62828;font-weight:bold}
main{flex:1;min-height:0;display:flex}#lanes{position:relative;max-width:60vw;overflow:auto;border-right:1px solid #ddd}#race-arrow{position:absolute;left:0;top:0;pointer-events:none;overflow:visible}
#swimlanes{border-collapse:collapse;font:11.5px ui-monospace,monospace}#swimlanes th{position:sticky;top:0;z-index:1;background:#eceff1;font:bold 11px system-ui,sans-serif;padding:4px 6px;border-bottom:1px solid #b0bec5;text-align:left;width:116px;min-width:116px;max-width:116px}#swimlanes th.n,#swimlanes td.n{width:auto;min-width:0;max-width:none;white-space:nowrap;overflow-wrap:normal;text-align:right;color:#888;padding-right:6px}
#swimlanes td{padding:2px 6px;border-left:1px dashed #e0e0e0;vertical-align:top;max-width:116px;overflow-wrap:anywhere}#swimlanes td.init{max-width:none}#swimlanes tr{cursor:pointer}#swimlanes tr:hover{background:#f5f5f5}#swimlanes tr.cur{background:#bbdefb}#swimlanes tr.cur td.n{color:#0d47a1;font-weight:bold}
#swimlanes td.step{color:#37474f}#swimlanes td.init{color:#888}.settle{color:#90a4ae;font-size:10px}#swimlanes td.failed{text-decoration:underline wavy #c62828}#swimlanes tr.violation td.step{font-weight:bold}
#swimlanes td.racing{border:2px solid;border-radius:4px}#swimlanes .tag{display:table;margin:2px 0 0;white-space:normal}#swimlanes tr.mark-violating td.racing{background:#ffcdd2;border-color:#c62828}#swimlanes tr.mark-enabling td.racing{background:#ffe0b2;border-color:#e65100}
#frames{flex:1;min-width:0;overflow:auto}.frame{display:flex;flex-wrap:wrap;gap:12px;padding:12px}.frame[hidden]{display:none}.graphs{display:flex;gap:12px;overflow:auto;max-width:100%}figure{margin:0}figcaption{font-size:12px;color:#555;margin-bottom:2px}figure.before figcaption{color:#e65100}aside{min-width:320px;flex:1;font-size:13px}aside pre{font-size:11px;background:#fafafa;border:1px solid #eee;padding:6px;white-space:pre-wrap}.add{color:#2e7d32}.del{color:#c62828}.same{color:#888}.ok{color:#2e7d32}.err{color:#c62828}p.violation{background:#ffebee;border-left:4px solid #c62828;padding:4px 8px}.muted{color:#888;font-size:12px}`

// script steps through the frames (arrow keys, j/k, the slider, a click
// on a row or a link), opens on the step in the URL's #N or else nav's
// data-open, and draws the arrow from the enabling to the violating
// step's cell.
const script = `(function(){var fr=document.querySelectorAll('.frame'),rows=document.querySelectorAll('#swimlanes tbody tr'),sl=document.getElementById('slider'),pos=document.getElementById('pos'),lanes=document.getElementById('lanes'),cur=0;sl.max=fr.length-1;
function show(i){if(i<0||i>=fr.length)return;fr[cur].hidden=true;rows[cur].classList.remove('cur');cur=i;fr[cur].hidden=false;rows[cur].classList.add('cur');sl.value=i;pos.textContent='step '+i+' / '+(fr.length-1);var r=rows[cur];if(r.offsetTop<lanes.scrollTop+30||r.offsetTop+r.offsetHeight>lanes.scrollTop+lanes.clientHeight)lanes.scrollTop=Math.max(0,r.offsetTop-lanes.clientHeight/2);if(location.hash!=='#'+i)history.replaceState(null,'','#'+i);}
function arrow(){var svg=document.getElementById('race-arrow'),e=document.querySelector('tr.mark-enabling td.racing'),v=document.querySelector('tr.mark-violating td.racing');svg.innerHTML='';if(!e||!v)return;var t=document.getElementById('swimlanes');svg.setAttribute('width',t.offsetWidth);svg.setAttribute('height',t.offsetHeight);
function box(c){var x=c.offsetLeft,y=c.offsetTop,p=c.offsetParent;while(p&&p!==t){x+=p.offsetLeft;y+=p.offsetTop;p=p.offsetParent}return{x:x,y:y,w:c.offsetWidth,h:c.offsetHeight}}
var a=box(e),b=box(v),x1=a.x+a.w/2,y1=a.y+a.h,x2=b.x+b.w/2,y2=b.y,bend=Math.max(40,Math.abs(x2-x1)/2);
svg.innerHTML='<defs><marker id="ah" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0L10,5L0,10z" fill="#c62828"/></marker></defs><path id="race-path" d="M'+x1+','+y1+' C'+x1+','+(y1+bend)+' '+x2+','+(y2-bend)+' '+x2+','+y2+'" fill="none" stroke="#c62828" stroke-width="2.5" stroke-dasharray="6 4" opacity="0.75" marker-end="url(#ah)"/>';}
document.getElementById('prev').onclick=function(){show(cur-1)};document.getElementById('next').onclick=function(){show(cur+1)};sl.oninput=function(){show(+sl.value)};
rows.forEach(function(e){e.onclick=function(){show(+e.dataset.i)}});document.querySelectorAll('[data-go]').forEach(function(a){a.onclick=function(ev){ev.preventDefault();show(+a.dataset.go)}});
document.addEventListener('keydown',function(e){if(e.key==='ArrowRight'||e.key==='j')show(cur+1);if(e.key==='ArrowLeft'||e.key==='k')show(cur-1)});window.addEventListener('resize',arrow);
var h=parseInt(location.hash.slice(1));fr[0].hidden=true;arrow();if(isNaN(h)){var e=document.querySelector('tr.mark-enabling'),v=document.querySelector('tr.mark-violating');if(e&&v&&v.offsetTop+v.offsetHeight-e.offsetTop<lanes.clientHeight-40)lanes.scrollTop=Math.max(0,e.offsetTop-40);show(+document.querySelector('nav').dataset.open);}else show(Math.min(h,fr.length-1));document.body.dataset.ready='1';})();`
