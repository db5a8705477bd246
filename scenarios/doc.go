// Package scenarios is cascade's conformance suite: a Ginkgo v2 suite that
// runs every trace in traces/scenarios and traces/races, one Entry per
// trace, on every target the trace names in its `# targets:` header and
// this run provides: the model always, the upstream kube-controller-manager
// on a real control plane unless -targets leaves it out.
//
//	go test ./scenarios/ -args -targets=model,upstream -ginkgo.junit-report=out/junit.xml
//	go test ./scenarios/ -args -ginkgo.label-filter=foreground
//
// Every entry asserts the trace's expected output stanza by stanza and
// fails with the trace file, the stanza and a line diff.
package scenarios
