package scenarios

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	. "github.com/onsi/gomega"

	"github.com/cascade-k8s/cascade/harness/target"
)

// suiteTargets are the targets of the suite, in the order the summary
// lists them.
var suiteTargets = []string{target.Model, target.Upstream, target.Impl, target.ImplStepped, target.UpstreamStepped}

var summaryFlag = flag.String("summary", "", "write the counts per target as JSON to this file instead of printing them (hack/conform reads it)")

// Progress: one line per spec as it ends, on stderr (apart from Ginkgo's
// own report on stdout, which hack/conform keeps in a log; `go test -v`
// shows both as they come), so that a run of several minutes says what it
// does; and after the suite, one table of counts per target and where the
// reports are.
var _ = ReportAfterEach(func(r SpecReport) {
	if line := progressLine(r); line != "" {
		fmt.Fprintln(os.Stderr, line)
	}
})

var _ = ReportAfterSuite("counts per target", func(r Report) {
	_, rc := GinkgoConfiguration()
	all := tally(r)
	if *summaryFlag != "" { // hack/conform prints one table for every target
		Expect(writeSummary(*summaryFlag, all)).To(Succeed())
		return
	}
	printSummary(os.Stderr, all, rc.JUnitReport)
})

// filtered reports whether a spec was left out by -ginkgo.label-filter or
// -ginkgo.focus: skipped without a reason (every skip the suite makes has
// one).
func filtered(r SpecReport) bool {
	return r.State == types.SpecStateSkipped && r.Failure.Message == ""
}

// specTarget is the target a spec runs on: its first label that names one
// ("" for the suite's own checks).
func specTarget(r SpecReport) string {
	for _, l := range r.Labels() {
		if slices.Contains(suiteTargets, l) {
			return l
		}
	}
	return ""
}

// interrupted is the result of a spec a signal (^C) cut short: no
// verdict, and counted nowhere.
const interrupted = "interrupted"

// result names a spec's outcome as cascade conform does: pass, fail, skip;
// an aborted, panicked or timed-out spec is an error; one cut short by a
// signal is interrupted.
func result(s types.SpecState) string {
	switch s {
	case types.SpecStateInterrupted:
		return interrupted
	case types.SpecStatePassed:
		return target.Pass
	case types.SpecStateFailed:
		return target.Fail
	case types.SpecStateSkipped, types.SpecStatePending:
		return target.Skipped
	}
	return target.Error
}

// progressLine is the line printed when a spec ends:
//
//	conform upstream scenario/background: pass (3.2s)
//	conform impl race/kubernetes-26120: skip (it needs ...)
//
// A spec skipped because its target was not selected (-targets) prints
// nothing: the suite says so once per target, in the summary. Nor does a
// spec a filter left out.
func progressLine(r SpecReport) string {
	if r.LeafNodeType != types.NodeTypeIt || filtered(r) {
		return ""
	}
	name := specTarget(r)
	if name == "" {
		name = "suite"
	} else if !enabled(name) {
		return ""
	}
	res := result(r.State)
	if res == interrupted {
		return fmt.Sprintf("conform %s %s: interrupted", name, r.LeafNodeText)
	}
	line := fmt.Sprintf("conform %s %s: %s (%s)", name, r.LeafNodeText, res, r.RunTime.Round(100*time.Millisecond))
	if res != target.Pass && r.Failure.Message != "" {
		msg, _, _ := strings.Cut(r.Failure.Message, "\n")
		line += ": " + msg
	}
	return line
}

// Counts are one target's spec outcomes, as -summary writes them.
type Counts struct {
	Passed  int     `json:"passed"`
	Failed  int     `json:"failed"`
	Errors  int     `json:"errors"`
	Skipped int     `json:"skipped"`
	Seconds float64 `json:"seconds"` // the specs' run time, summed
}

// tally counts the outcomes of the specs of every selected target (a
// target without specs counts zero), leaving out specs a filter left out.
func tally(r Report) map[string]*Counts {
	byTarget := map[string]*Counts{}
	for _, name := range suiteTargets {
		if enabled(name) {
			byTarget[name] = &Counts{}
		}
	}
	for _, s := range r.SpecReports {
		name := specTarget(s)
		if s.LeafNodeType != types.NodeTypeIt || name == "" || filtered(s) {
			continue
		}
		c := byTarget[name]
		if c == nil {
			continue // not selected
		}
		c.Seconds += s.RunTime.Seconds()
		switch result(s.State) {
		case target.Pass:
			c.Passed++
		case target.Fail:
			c.Failed++
		case target.Skipped:
			c.Skipped++
		case interrupted:
		default:
			c.Errors++
		}
	}
	return byTarget
}

// printSummary prints the counts of every target, "not selected" for those
// -targets left out, and where the JUnit report is ("" when none was asked
// for).
func printSummary(w io.Writer, byTarget map[string]*Counts, junit string) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "\nTARGET\tPASSED\tFAILED\tERRORS\tSKIPPED\tSPEC TIME")
	for _, name := range suiteTargets {
		if c := byTarget[name]; c != nil {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.1fs\n", name, c.Passed, c.Failed, c.Errors, c.Skipped, c.Seconds)
		} else {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\tnot selected (-targets)\n", name)
		}
	}
	_ = tw.Flush()
	if junit != "" {
		fmt.Fprintf(w, "JUnit report: %s\n", junit)
	}
}

// writeSummary writes the counts per target as JSON.
func writeSummary(path string, byTarget map[string]*Counts) error {
	data, err := json.MarshalIndent(byTarget, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
