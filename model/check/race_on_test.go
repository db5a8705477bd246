//go:build race

package check

// raceEnabled: the test binary runs under the race detector, which makes
// a search about ten times slower (see exhaustive).
const raceEnabled = true
