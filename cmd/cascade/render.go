package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

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

--html writes one self-contained page: every step with its actor and API
result, the ownership graph as SVG (owners above dependents; red edges are
blockOwnerDeletion; orange boxes are being deleted, grey ones are gone), the
properties a step violated, the state diff and the GC's queues. Arrow keys
step through it; it opens at the first violation.

--dot writes the ownership graph of one step (--step, default the last) for
Graphviz: 'dot -Tsvg OUT.dot > OUT.svg'.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (htmlOut == "") == (dotOut == "") {
				return usageErr("give exactly one of --html or --dot")
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
			path := htmlOut
			if path == "" {
				path = dotOut
			}
			f, err := os.Create(path)
			if err != nil {
				return usageErr("%v", err)
			}
			if htmlOut != "" {
				err = render.HTML(f, tr, frames)
			} else {
				if step < 0 {
					step = len(frames) - 1
				}
				err = render.DOT(f, frames, step)
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				os.Remove(path)
				return usageErr("%v", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (%d steps)\n", path, len(frames)-1)
			return nil
		},
	}
	cmd.Flags().StringVar(&htmlOut, "html", "", "write a self-contained HTML page")
	cmd.Flags().StringVar(&dotOut, "dot", "", "write one step as Graphviz")
	cmd.Flags().IntVar(&step, "step", -1, "with --dot: the step to draw (0 is the initial state; default the last)")
	return cmd
}
