#!/usr/bin/env bash
# check-counts.sh: a fingerprint of what cascade's checker establishes on
# every preset (with and without each catalogued bug that names it), on
# fanout-1..FANOUT_MAX and on the universes in UNIVERSES, for comparing
# two builds of the checker: a change meant only to make the checker
# faster must leave this output byte for byte as it was.
#
# One line per search: the scope, distinct states, transitions, depth,
# completeness, and a hash of the rest of the JSON result (violations,
# classes, counterexample steps and the trace files' text), with the
# timings and the output directory taken out.
#
#   CASCADE=bin/cascade    the binary to run (default: built from here)
#   FANOUT_MAX=8           the largest fanout preset (default 8)
#   UNIVERSES="pair"       universes to search (default: pair scopes)
#
# Usage: hack/check-counts.sh >before.txt; ...; hack/check-counts.sh | diff before.txt -
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
out=$(mktemp -d -t check-counts.XXXXXX)
trap 'rm -rf "$out"' EXIT
bin=${CASCADE:-}
if [[ -z $bin ]]; then
	bin=$out/cascade
	go build -o "$bin" ./cmd/cascade
fi

# search NAME ARGS...: one line for cascade check ARGS.
search() {
	local name=$1
	shift
	rm -rf "$out/ce"
	# exit 1 is a failed property or a vacuous scope: part of the result
	local rc=0
	"$bin" check "$@" --json -q --out "$out/ce" >"$out/r.json" || rc=$?
	if ((rc > 1)); then
		echo "check-counts: cascade check $* exited $rc" >&2
		exit 1
	fi
	local traces=none
	if [[ -d $out/ce ]]; then
		traces=$(cd "$out/ce" && find . -type f | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-16)
	fi
	local rest
	rest=$(jq -S 'del(.seconds, .distinct_states_per_second) | walk(if type == "object" then del(.trace_file) else . end)' "$out/r.json" | sha256sum | cut -c1-16)
	jq -r --arg name "$name" --arg rc "$rc" --arg rest "$rest" --arg traces "$traces" \
		'"\($name) exit=\($rc) distinct=\(.distinct_states) transitions=\(.transitions) skipped=\(.transitions_skipped) depth=\(.depth) complete=\(.complete) result=\($rest) traces=\($traces)"' "$out/r.json"
}

presets=$("$bin" check --list-presets | grep -v '^ ' | grep -v '^$')
for p in $presets; do
	search "$p" --preset "$p"
done
# each catalogued bug on the preset that shows it
"$bin" check --list-bugs | awk '/^[a-z]/ { bug = $1 } /; preset / { print bug, $NF }' | while read -r bug preset; do
	search "$preset+$bug" --preset "$preset" --bug "$bug"
done
for n in $(seq 1 "${FANOUT_MAX:-8}"); do
	search "fanout-$n" --preset "fanout-$n"
done
for u in ${UNIVERSES-pair scopes}; do
	search "universe $u" --universe "$u"
	search "universe $u unreduced" --universe "$u" --no-reduction
done
