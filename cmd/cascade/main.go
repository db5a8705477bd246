// Command cascade checks Kubernetes deletion semantics: it explores the
// model exhaustively (check), draws traces (render), replays them on the
// model and on real control planes (replay, conform), starts a local
// control plane to test against (cluster) and runs cascade's reference
// garbage collector against a cluster (gc).
//
// Exit codes: 0 when everything holds, 1 when a property is violated or a
// replay diverges, 2 for usage and input errors, 3 when fuzz's checker
// could not decide a history, 130 when interrupted.
//
// SIGINT and SIGTERM cancel the running command's context: commands that
// touch a cluster then remove the objects they created and stop what they
// started before exiting. A second signal exits at once (the control
// plane's processes die with cascade through their lifeline).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

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

// errInterrupted makes cascade exit 130, as a shell reports a command
// stopped by SIGINT, after it has cleaned up.
var errInterrupted = &exitError{code: 130, err: errors.New("interrupted")}

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
  cascade replay   replay traces on the model or a real target and report
                   where they diverge
  cascade conform  run every scenario and race trace on a target; a table,
                   JSON and JUnit
  cascade fuzz     randomized conformance runs on a target
  cascade cluster  start a local control plane and write its kubeconfig
  cascade gc       run cascade's reference garbage collector on a cluster
  cascade campaign shard fuzz runs or a universe check over a cluster's
                   pods (an Indexed Job), and merge the shards into one report

Output files (traces, reports, failure artifacts) never replace a file
cascade did not write: each directory's .cascade-artifacts lists what
cascade wrote there with its SHA-256, and any other file at an output path
is refused, naming it, before the work when the name is known.

Exit codes: 0 all hold, 1 violation or divergence, 2 usage or input error,
3 inconclusive (fuzz: the checker could not decide a run's history),
130 interrupted (after cleaning up).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErr("%v (see '%s --help')", err, c.CommandPath())
	})
	root.AddCommand(newCheckCmd(), newRenderCmd(), newReplayCmd(), newConformCmd(), newClusterCmd(), newGCCmd(), newFuzzCmd(), newCampaignCmd())
	// cobra's own help command prints the whole usage for a topic it does
	// not know, and exits 0
	root.SetHelpCommand(&cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || len(rest) > 0 {
				return usageErr("help: no command %q (cascade --help lists them)", strings.Join(args, " "))
			}
			cmd.InitDefaultHelpFlag() // as cobra's own: the help lists -h, --help
			return cmd.Help()
		},
		// as cobra's own: complete the command names
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			cmd, _, err := c.Root().Find(args)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var names []string
			for _, sub := range cmd.Commands() {
				if sub.IsAvailableCommand() && strings.HasPrefix(sub.Name(), toComplete) {
					names = append(names, sub.Name()+"\t"+sub.Short)
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
	})
	withReleaseInHelp(root)
	return root
}

func main() {
	// SIGINT and SIGTERM cancel the context; the message names the one
	// that came ("interrupt" or "terminated"), so a SIGTERM from a CI
	// runner's timeout does not read as a user's ^C.
	// A closed stdout (`cascade replay ... | head`) makes writes fail
	// with EPIPE instead of killing the process with SIGPIPE, and the
	// failed write stops the run as an interrupt does (closedPipe), so
	// that a control plane started for the run is still stopped and its
	// directory removed.
	signal.Ignore(syscall.SIGPIPE)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		sig := <-sigs
		// from now on a second signal has its default effect
		signal.Stop(sigs)
		cancel()
		fmt.Fprintf(os.Stderr, "cascade: %s: cleaning up (signal again to exit at once)\n", sig)
	}()
	root := newRoot()
	root.SetOut(closedPipe{os.Stdout, cancel})
	root.SetErr(closedPipe{os.Stderr, cancel})
	err := root.ExecuteContext(ctx)
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

// closedPipe writes to w and, once a write finds w's pipe closed
// (EPIPE: the reader of `cascade ... | head` is gone), cancels the run,
// which then stops and cleans up as on SIGINT instead of working on
// with nobody to read its results.
type closedPipe struct {
	w      io.Writer
	cancel context.CancelFunc
}

func (c closedPipe) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if errors.Is(err, syscall.EPIPE) {
		c.cancel()
	}
	return n, err
}
