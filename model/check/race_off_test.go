//go:build !race

package check

// raceEnabled: the test binary runs under the race detector.
const raceEnabled = false
