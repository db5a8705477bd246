#!/usr/bin/env bash
# record-checks.sh: record what the model checker finds for every preset,
# so that a refactoring of model/ or a change to the checker meant only
# for speed can be shown to change nothing.
#
#   hack/record-checks.sh record DIR   build cascade, run every preset (plain,
#                                     under each catalogued bug on its preset,
#                                     owner-swap on v1.33.13, fanout-1..$FANOUT_MAX,
#                                     default 8) and every universe named in
#                                     $UNIVERSES (default "pair scopes"), reduced
#                                     and with --no-reduction, and keep
#                                     the counts, violations, classes and
#                                     counterexample traces under DIR
#   hack/record-checks.sh compare A B  diff two recordings; exit 1 on any
#                                     difference
#
# Timings and rates are dropped from the recording; everything else of
# `cascade check --json --classes` is kept, with the trace files' text.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
command -v jq >/dev/null || {
	echo "record-checks: needs jq (Debian: apt-get install jq)" >&2
	exit 2
}

record() {
	local dir=$1
	mkdir -p "$dir"
	local bin="$dir/cascade"
	(cd "$root" && go build -o "$bin" ./cmd/cascade)
	local runs=()
	local p b
	for p in $("$bin" check --list-presets | grep -E '^[a-z0-9-]+$'); do
		runs+=("preset=$p:--preset $p")
	done
	# each catalogued bug on the preset that breaks it
	while read -r b p; do
		runs+=("bug=$b:--preset $p --bug $b")
	done < <("$bin" check --list-bugs | awk '/^[a-z0-9-]+$/ { b = $1 } /; preset / { print b, $NF }')
	runs+=("owner-swap-v1.33.13:--preset owner-swap --kube-version v1.33.13")
	local f
	for f in $(seq 1 "${FANOUT_MAX:-8}"); do
		runs+=("preset=fanout-$f:--preset fanout-$f")
	done
	for u in ${UNIVERSES-pair scopes}; do
		runs+=("universe=$u:--universe $u")
		runs+=("universe=$u-unreduced:--universe $u --no-reduction")
	done
	local r name args
	for r in "${runs[@]}"; do
		name=${r%%:*} args=${r#*:}
		rm -rf "$dir/$name.traces"
		mkdir -p "$dir/$name.traces"
		# shellcheck disable=SC2086
		"$bin" check $args --classes --json -q --out "$dir/$name.traces" >"$dir/$name.raw" 2>"$dir/$name.err" || true
		jq -S 'del(.seconds, .distinct_states_per_second) | walk(if type == "object" and has("trace_file") then .trace_file |= (split("/") | last) else . end)' \
			"$dir/$name.raw" >"$dir/$name.json"
		rm "$dir/$name.raw"
		printf '%-48s states %10s transitions %10s violations %s\n' "$name" \
			"$(jq .distinct_states "$dir/$name.json")" "$(jq .transitions "$dir/$name.json")" "$(jq '.violations | length' "$dir/$name.json")"
	done
}

compare() {
	local a=$1 b=$2 status=0 f name
	for f in "$a"/*.json; do
		name=$(basename "$f" .json)
		if ! diff -q "$f" "$b/$name.json" >/dev/null 2>&1 || ! diff -rq "$a/$name.traces" "$b/$name.traces" >/dev/null 2>&1; then
			echo "DIFFERS  $name"
			diff "$f" "$b/$name.json" | head -20 || true
			diff -r "$a/$name.traces" "$b/$name.traces" | head -20 || true
			status=1
			continue
		fi
		printf 'same     %-44s states %10s transitions %10s violations %s traces %s\n' "$name" \
			"$(jq .distinct_states "$f")" "$(jq .transitions "$f")" "$(jq '.violations | length' "$f")" "$(ls "$a/$name.traces" | wc -l)"
	done
	for f in "$b"/*.json; do
		[[ -e $a/$(basename "$f") ]] || { echo "ONLY IN $b: $(basename "$f")"; status=1; }
	done
	return $status
}

case ${1:-} in
record) record "$2" ;;
compare) compare "$2" "$3" ;;
*)
	echo "usage: hack/record-checks.sh record DIR | compare A B" >&2
	exit 2
	;;
esac
