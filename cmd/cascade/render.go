package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/cascade-k8s/cascade/harness/artifact"
	"github.com/cascade-k8s/cascade/traces"
	"github.com/cascade-k8s/cascade/traces/render"
)

func newRenderCmd() *cobra.Command {
	var htmlOut, dotOut string
	step := -1
	cmd := &cobra.Command{
		Use:   "render TRACE (--html OUT.html | --dot OUT.dot [--step N])",
		Short: "Draw a trace: a step-through HTML page, or one step as Graphviz",
		Long: `render replays a trace on the model and draws it. TRACE is a trace file or
the name of a trace built into cascade (race/orphan-adoption; see 'cascade
conform --list').

--html writes one self-contained page. On the left, a swimlane view: one
row per step in order, one lane per actor (each client principal, the
controllers' informers, each controller, the GC's informers, its
attemptToOrphan and attemptToDelete workers, the CRD cleanup). On the
right, the step shown: its actor and API result, the ownership graph as SVG
(owners above dependents; red edges are blockOwnerDeletion; orange boxes
are being deleted, grey ones are gone), the properties it violated, the
state diff and the GC's queues. Arrow keys step through it; #N in the
address opens step N.

The page opens on the step that violates the trace's property (its
'# property:' header, else any). That step and the one that made it
possible are marked, in the swimlanes and in a line above them, and joined
by an arrow; both show the graph before and after the step. The step that
made it possible is the GC's stale decision's racing write when another
actor wrote the object between the decision and the GC's write; otherwise
the last command written before the violation without which the trace,
replayed, no longer violates the property (the racing write, the stale
delivery, the lost event).

--dot writes the ownership graph of one step (--step, default the last) for
Graphviz: 'dot -Tsvg OUT.dot > OUT.svg'.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (htmlOut == "") == (dotOut == "") {
				return usageErr("give exactly one of --html or --dot")
			}
			if cmd.Flags().Changed("step") && (htmlOut != "" || step < -1) {
				if htmlOut != "" {
					return usageErr("--step picks the step --dot draws; the --html page has every step")
				}
				return usageErr("--step %d: want 0 (the initial state) or more, or -1 (the last)", step)
			}
			loaded, err := loadTraces(args) // a file, or an embedded trace's name
			if err != nil {
				return err
			}
			tr := loaded[0]
			frames, err := traces.Frames(tr)
			if err != nil {
				return usageErr("%v", err)
			}
			if dotOut != "" && step >= len(frames) {
				return usageErr("--step %d: %s has steps 0 to %d", step, tr.Path, len(frames)-1)
			}
			path := htmlOut
			if path == "" {
				path = dotOut
			}
			opens := ""
			// artifact.Write: a failed render leaves no file, and a file
			// cascade did not write is never replaced
			err = artifact.Write(path, func(w io.Writer) error {
				if htmlOut != "" {
					opens = opensAt(render.FindRace(tr, frames), frames)
					return render.HTML(w, tr, frames)
				}
				if step < 0 {
					step = len(frames) - 1
				}
				return render.DOT(w, frames, step)
			})
			if err != nil {
				return usageErr("%v", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (%s)%s\n", path, plural(len(frames)-1, "step"), opens)
			return nil
		},
	}
	cmd.Flags().StringVar(&htmlOut, "html", "", "write a self-contained HTML page")
	cmd.Flags().StringVar(&dotOut, "dot", "", "write one step as Graphviz")
	cmd.Flags().IntVar(&step, "step", -1, "with --dot: the step to draw (0 is the initial state; -1, the default, the last)")
	return cmd
}

// opensAt says where the page opens and which step made the violation
// possible.
func opensAt(r render.Race, frames []traces.Frame) string {
	if r.Violating < 0 {
		return "; no step violates a property"
	}
	out := fmt.Sprintf("; opens at step %d (%s), which violates %s", r.Violating, frames[r.Violating].Command, r.Property)
	if r.Enabling >= 0 {
		out += fmt.Sprintf("; step %d (%s) made it possible", r.Enabling, frames[r.Enabling].Command)
	}
	return out
}
