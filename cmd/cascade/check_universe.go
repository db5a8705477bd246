package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/cascade-k8s/cascade/model/check"
)

// writeClassTraces writes the shortest counterexample of each violation
// class to DIR/<scope>[-<bugs>]-<class>.trace, the class's parts joined
// by '_'.
func writeClassTraces(dir string, scope check.Scope, res *check.Result) (map[string]string, error) {
	var ts []traceFile
	for _, v := range res.Classes {
		ts = append(ts, traceFile{key: v.Class, suffix: classFileName(v.Class), text: v.Trace})
	}
	return writeTraceFiles(dir, scope, ts)
}

// classFileName spells a violation class as a file name.
func classFileName(class string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.', r == '_':
			return r
		}
		return '-'
	}, strings.ReplaceAll(class, check.ClassSep, "_"))
}

// printClasses prints a universe's violation classes, each with its
// shortest counterexample's length, initial graph and trace file.
func printClasses(w io.Writer, res *check.Result, files map[string]string) error {
	fmt.Fprintf(w, "\n%d initial states; %d violation classes\n", res.Roots, len(res.Classes))
	if len(res.Classes) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROPERTY\tCLASS\tSTEPS\tINITIAL GRAPH\tTRACE")
	for _, v := range res.Classes {
		_, rest, _ := strings.Cut(v.Class, check.ClassSep)
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", v.Property, rest, len(v.Steps), v.Root, files[v.Class])
	}
	return tw.Flush()
}

// listUniverses prints the named universes with their bounds.
func listUniverses(w io.Writer) error {
	for _, u := range check.Universes {
		fmt.Fprintf(w, "%s\n  %s\n", u.Name, u.Doc)
		fmt.Fprintf(w, "    objects     %s\n", strings.Join(u.Objects, "; "))
		shapes := make([]string, len(u.Shapes))
		for i, s := range u.Shapes {
			shapes[i] = s
			if s == "" {
				shapes[i] = "plain"
			}
		}
		refs := "unbounded"
		if u.MaxRefs > 0 {
			refs = fmt.Sprint(u.MaxRefs)
		}
		fmt.Fprintf(w, "    references  shapes %s; self %v; at most %s\n", strings.Join(shapes, ", "), u.Self, refs)
		if len(u.Finalizers) > 0 {
			fmt.Fprintf(w, "    finalizers  %s\n", strings.Join(u.Finalizers, ", "))
		}
		settled := "settled"
		if u.Unsettled {
			settled = "unsettled (informers have delivered nothing)"
		}
		fmt.Fprintf(w, "    graphs      %d up to symmetry (%d labelled), %s\n", len(u.InitialGraphs()), len(u.AllGraphs()), settled)
		fmt.Fprintf(w, "    ops         any %d of %d: %s\n\n", u.OpBudget, len(u.OpAlphabet()), strings.Join(u.Ops, "; "))
	}
	return nil
}
