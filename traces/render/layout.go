// Package render draws a trace: one self-contained HTML page that steps
// through the ownership graph (SVG), or a Graphviz graph of one step.
package render

import (
	"sort"

	"github.com/cascade-k8s/cascade/model"
	"github.com/cascade-k8s/cascade/traces"
)

// vertex is one object incarnation (or a referenced UID no object has).
type vertex struct {
	uid   model.UID
	label string
	x, y  int
	ghost bool // a UID no object was created with (uid=SYMBOL)
}

// layout places every UID the trace ever mentions, once for all frames so
// that nothing jumps between steps: owners above their dependents, in
// layers by longest ownership chain, ordered by label within a layer.
type layout struct {
	vs     []*vertex
	byUID  map[model.UID]*vertex
	width  int
	height int
}

const (
	boxW   = 190
	boxH   = 64
	gapX   = 40
	gapY   = 70
	margin = 20
)

func newLayout(frames []traces.Frame) *layout {
	last := frames[len(frames)-1].State
	l := &layout{byUID: map[model.UID]*vertex{}}
	owners := map[model.UID][]model.UID{}
	for _, f := range frames {
		for i := range f.State.Objects {
			o := &f.State.Objects[i]
			for _, r := range o.Owners {
				if !contains(owners[o.UID], r.UID) {
					owners[o.UID] = append(owners[o.UID], r.UID)
				}
			}
		}
	}
	for i := range last.UIDs {
		u := model.UID(i + 1)
		v := &vertex{uid: u, label: last.UIDLabel(u), ghost: last.UIDs[i].Kind == model.NoKind}
		l.vs = append(l.vs, v)
		l.byUID[u] = v
	}
	layer := map[model.UID]int{}
	var depth func(u model.UID, seen map[model.UID]bool) int
	depth = func(u model.UID, seen map[model.UID]bool) int {
		if d, ok := layer[u]; ok {
			return d
		}
		if seen[u] {
			return 0 // a cycle: break it here
		}
		seen[u] = true
		d := 0
		for _, o := range owners[u] {
			d = max(d, depth(o, seen)+1)
		}
		delete(seen, u)
		layer[u] = d
		return d
	}
	rows := map[int][]*vertex{}
	maxLayer := 0
	for _, v := range l.vs {
		d := depth(v.uid, map[model.UID]bool{})
		rows[d] = append(rows[d], v)
		maxLayer = max(maxLayer, d)
	}
	widest := 0
	for d := 0; d <= maxLayer; d++ {
		row := rows[d]
		sort.Slice(row, func(i, j int) bool { return row[i].label < row[j].label })
		for i, v := range row {
			v.x = margin + i*(boxW+gapX)
			v.y = margin + d*(boxH+gapY)
		}
		widest = max(widest, len(row))
	}
	l.width = 2*margin + max(1, widest)*(boxW+gapX) - gapX
	l.height = 2*margin + (maxLayer+1)*(boxH+gapY) - gapY
	return l
}

func contains(us []model.UID, u model.UID) bool {
	for _, x := range us {
		if x == u {
			return true
		}
	}
	return false
}
