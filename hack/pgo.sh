#!/usr/bin/env bash
# pgo.sh: write cmd/cascade/default.pgo, the CPU profile `go build` uses
# for profile-guided optimisation of the cascade binary (Go's -pgo=auto
# takes default.pgo from the main package's directory; nothing else is
# needed to use it). The profile is of the model checker, where cascade
# spends its CPU: the SPIN baseline fanout-8 on one worker, and the named
# universes adoption and pair searched with reduction, so that what is
# optimised is the checker's work in general, not one benchmark's. The
# harness's time is the control plane's, not cascade's, and is left out.
#
# Run it (make pgo) after a change to model/ or model/check that moves
# the hot paths; a stale profile still builds and only optimises less.
# A failed run leaves the old profile: the new one is written beside it
# and renamed over it (one rename within the directory).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
work=$(mktemp -d -t cascade-pgo.XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "pgo: profiling the checker (fanout-8, universes adoption and pair); about a minute"
go test -c -o "$work/check.test" ./model/check
run() { # NAME BENCH ENV...
	local name=$1 bench=$2
	shift 2
	(cd model/check && env "$@" "$work/check.test" -test.run '^$' -test.bench "$bench" -test.benchtime 2x \
		-test.cpuprofile "$work/$name.prof" >"$work/$name.log") || {
		cat "$work/$name.log" >&2
		echo "pgo: profiling $name failed" >&2
		exit 1
	}
}
run fanout 'Fanout/fanout-8/workers=1$' CASCADE_FANOUT=8
run adoption 'UniverseReduction/adoption/reduction=true$' CASCADE_SCOPE=adoption
run pair 'UniverseReduction/pair/reduction=true$' CASCADE_SCOPE=pair
go tool pprof -proto "$work"/fanout.prof "$work"/adoption.prof "$work"/pair.prof >"$work/default.pgo" 2>"$work/pprof.log" || {
	cat "$work/pprof.log" >&2
	exit 1
}
cp "$work/default.pgo" cmd/cascade/default.pgo.tmp
mv cmd/cascade/default.pgo.tmp cmd/cascade/default.pgo
echo "pgo: wrote cmd/cascade/default.pgo ($(wc -c <cmd/cascade/default.pgo) bytes); rebuild cascade to use it"
