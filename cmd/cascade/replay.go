package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cascade-k8s/cascade/traces"
)

func newReplayCmd() *cobra.Command {
	target := "model"
	cmd := &cobra.Command{
		Use:   "replay TRACE... [--target model]",
		Short: "Replay traces and report where they diverge from their expectations",
		Long: `replay runs each trace and compares every stanza's output (failed requests,
property violations, the sorted state dump) with what the file expects. It
names the first stanza that differs with a line diff, and checks that a trace
with a '# property:' header really violates that property.

Only the model target exists yet; real targets (impl, upstream, kubeconfig)
come with the harness.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if target != "model" {
				return usageErr("--target %q: only 'model' is available in this build", target)
			}
			out := cmd.OutOrStdout()
			failed := 0
			for _, path := range args {
				tr, err := traces.ParseFile(path)
				if err != nil {
					return usageErr("%v", err)
				}
				results, _, err := traces.Replay(tr)
				if err == nil {
					err = traces.Diff(tr, results)
				}
				if err == nil {
					err = traces.CheckHeaders(tr, results)
				}
				if err != nil {
					failed++
					fmt.Fprintf(out, "FAIL %s\n%v\n", path, err)
					continue
				}
				fmt.Fprintf(out, "ok   %s (%d stanzas)\n", path, len(tr.Stanzas))
			}
			fmt.Fprintf(out, "%d passed, %d failed\n", len(args)-failed, failed)
			if failed > 0 {
				return errViolation
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&target, "target", target, "where to replay: model")
	return cmd
}
