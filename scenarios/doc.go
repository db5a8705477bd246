// Package scenarios is cascade's conformance suite: a Ginkgo v2 suite that
// runs every trace in traces/scenarios and traces/races, one entry per
// trace, on every target (model, upstream, impl, impl-stepped, upstream-stepped) that the
// trace's headers and commands fit and -targets selects. The targets are
// started and the traces replayed by harness/target, as `cascade conform`
// does, so the suite and the CLI run and skip the same traces.
//
//	go test ./scenarios/ -args -targets=model,upstream -ginkgo.junit-report=out/junit.xml
//	go test ./scenarios/ -args -ginkgo.label-filter=foreground
//
// Every entry asserts the trace's expected output stanza by stanza and
// fails with the trace file, the stanza and a line diff.
package scenarios
