// Command cascade checks Kubernetes deletion semantics: it explores the
// model exhaustively (check), draws and replays traces (render, replay),
// and — as the harness grows — runs conformance against real control
// planes.
//
// Exit codes: 0 when everything holds, 1 when a property is violated or a
// replay diverges, 2 for usage and input errors.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

func usageErr(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}

// errViolation makes cascade exit 1 after it has printed its findings.
var errViolation = &exitError{code: 1, err: errors.New("")}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "cascade",
		Short: "Model-check and conformance-test Kubernetes deletion semantics",
		Long: `cascade makes Kubernetes deletion checkable: ownerReferences, finalizers,
Background/Foreground/Orphan propagation, the garbage collector and deletion
protection.

  cascade check    explore the model exhaustively and print the shortest
                   counterexample to each property it breaks
  cascade render   draw a trace as a step-through HTML page or Graphviz
  cascade replay   replay a trace on the model and report where it diverges

Exit codes: 0 all hold, 1 violation or divergence, 2 usage or input error.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErr("%v (see '%s --help')", err, c.CommandPath())
	})
	root.AddCommand(newCheckCmd(), newRenderCmd(), newReplayCmd(), newGCCmd())
	return root
}

func main() {
	err := newRoot().Execute()
	if err == nil {
		return
	}
	code := 2 // cobra's own errors are usage errors
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintln(os.Stderr, "cascade: "+msg)
	}
	os.Exit(code)
}
