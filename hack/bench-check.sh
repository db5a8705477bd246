#!/usr/bin/env bash
# bench-check.sh: the SPIN baseline (make bench-check). Explores the scope
# fanout-N with SPIN (bench/spin/fanout.pml) and with cascade's checker,
# in one run, and prints distinct states, search seconds, distinct states
# per second and peak RSS of both, and the ratio cascade/SPIN of states/s.
# Exits non-zero when the distinct-state counts differ.
#
# The comparison is breadth-first against breadth-first (both find
# shortest counterexamples) and exhaustive against exhaustive, with
# SPIN's speed options on (-O2, -DNOBOUNDCHECK). Partial-order reduction
# is off (-DNOREDUCE) as cascade has none; with the model's one process
# it changes neither SPIN's count nor its time. SPIN's own default
# search, depth first, is often faster still and is printed too.
#
#   FANOUT=8      the scope's N (1..12; default 8)
#   SPIN_MEMLIM   pan's memory limit in MB (default 16384)
#   SPIN_DFS=0    skip the reference run of SPIN's depth-first search
#   SPIN_PAR=1    also run SPIN's multi-core BFS (-DBFS_PAR, NCORE=nproc)
#   CASCADE_1W=1  also run cascade with one worker (one core)
#   BENCH_DIR     where to build and keep the logs (default: a temp dir)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
n=${FANOUT:-8}
memlim=${SPIN_MEMLIM:-16384}
if ! [[ $n =~ ^[0-9]+$ ]] || ((n < 1 || n > 12)); then
	echo "bench-check: FANOUT must be 1..12, got '$n'" >&2
	exit 2
fi

# Tools: SPIN and GNU time from Debian when missing; gcc and go are given.
missing=()
command -v spin >/dev/null || missing+=(spin)
[[ -x /usr/bin/time ]] || missing+=(time)
if ((${#missing[@]})); then
	echo "bench-check: installing ${missing[*]}"
	sudo=()
	((EUID == 0)) || sudo=(sudo)
	"${sudo[@]}" apt-get update -qq
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

work=${BENCH_DIR:-$(mktemp -d -t bench-check.XXXXXX)}
mkdir -p "$work"
echo "bench-check: fanout-$n, logs in $work"

# The closed form the Go test pins: 2 + sum_j C(n,j) j! 3^(n-j).
expect=$(awk -v n="$n" 'BEGIN {
	s = 2
	for (j = 0; j <= n; j++) {
		c = 1; for (i = 0; i < j; i++) c = c * (n - i) / (i + 1)
		f = 1; for (i = 2; i <= j; i++) f *= i
		s += c * f * 3 ^ (n - j)
	}
	printf "%.0f", s
}')

# peak RSS in MiB from a GNU time -v report
peak() { awk -F: '/Maximum resident set size/ { printf "%.0f", $2 / 1024 }' "$1"; }
now() { date +%s.%N; }

load_before=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- SPIN ---------------------------------------------------------------
# Hash table: the smallest power of two at least twice the state count.
w=10
while (((1 << w) < 2 * expect && w < 34)); do w=$((w + 1)); done
spin_flags=(-O2 -DNOREDUCE -DNOBOUNDCHECK -DSAFETY -DMEMLIM="$memlim")
t0=$(now)
(cd "$work" && spin -DN="$n" -a "$root/bench/spin/fanout.pml" >spin-a.log)
(cd "$work" && gcc "${spin_flags[@]}" -DBFS -o pan pan.c 2>gcc.log) || {
	cat "$work/gcc.log" >&2
	exit 1
}
t1=$(now)
compile=$(echo "$t1 - $t0" | bc -l)
# runpan NAME: run ./NAME, set NAME's states, seconds and peak RSS.
runpan() {
	(cd "$work" && /usr/bin/time -v -o "$1.time" "./$1" -m100000 -w"$w" >"$1.out" 2>&1) || {
		echo "bench-check: $1 failed" >&2
		cat "$work/$1.out" >&2
		exit 1
	}
	local errors
	errors=$(awk '/errors:/ { print $NF; exit }' "$work/$1.out")
	if [[ $errors != 0 ]]; then
		echo "bench-check: SPIN ($1) reports $errors errors" >&2
		cat "$work/$1.out" >&2
		exit 1
	fi
	r_states=$(awk '/states, stored/ { print $1; exit }' "$work/$1.out")
	r_secs=$(awk '/^pan: elapsed time/ { print $4; exit }' "$work/$1.out")
	r_rss=$(peak "$work/$1.time")
}
runpan pan
spin_states=$r_states spin_secs=$r_secs spin_rss=$r_rss

if [[ ${SPIN_DFS:-1} == 1 ]]; then
	(cd "$work" && gcc "${spin_flags[@]}" -o pan-dfs pan.c 2>gcc-dfs.log) || {
		cat "$work/gcc-dfs.log" >&2
		exit 1
	}
	runpan pan-dfs
	dfs_states=$r_states dfs_secs=$r_secs dfs_rss=$r_rss
fi

if [[ ${SPIN_PAR:-} == 1 ]]; then
	(cd "$work" && gcc "${spin_flags[@]}" -DBFS_PAR -DNCORE="$(nproc)" -o pan-par pan.c 2>gcc-par.log) || {
		cat "$work/gcc-par.log" >&2
		exit 1
	}
	runpan pan-par
	par_states=$r_states par_secs=$r_secs par_rss=$r_rss
fi

# ---- cascade --------------------------------------------------------------
go build -o bin/cascade ./cmd/cascade
# runcascade NAME ARGS...: run cascade check, set its states, seconds and
# peak RSS.
runcascade() {
	local name=$1
	shift
	/usr/bin/time -v -o "$work/$name.time" bin/cascade check --preset "fanout-$n" --json -q --out "$work/counterexamples" "$@" >"$work/$name.json" || {
		echo "bench-check: cascade check failed" >&2
		cat "$work/$name.json" >&2
		exit 1
	}
	field() { sed -n "s/^ *\"$1\": *\\([^,]*\\),\\{0,1\\}\$/\\1/p" "$work/$name.json" | head -1; }
	if [[ $(field complete) != true ]]; then
		echo "bench-check: cascade's exploration is not complete" >&2
		exit 1
	fi
	r_states=$(field distinct_states)
	r_secs=$(field seconds)
	r_rss=$(peak "$work/$name.time")
}
runcascade cascade
cas_states=$r_states cas_secs=$r_secs cas_rss=$r_rss
if [[ ${CASCADE_1W:-} == 1 ]]; then
	runcascade cascade-1w --workers 1
	one_states=$r_states one_secs=$r_secs one_rss=$r_rss
fi

# ---- report ---------------------------------------------------------------
# A search too short for its clock to tick has no rate: "-".
rate() { if [[ $(echo "$2 > 0" | bc -l) == 1 ]]; then printf '%.0f' "$(echo "$1 / $2" | bc -l)"; else echo -; fi; }
# ratio A B: A/B of two rates, "-" when either is.
ratio() { if [[ $1 != - && $2 != - ]]; then printf '%.4f' "$(echo "$1 / $2" | bc -l)"; else echo -; fi; }
spin_rate=$(rate "$spin_states" "$spin_secs")
cas_rate=$(rate "$cas_states" "$cas_secs")

echo
echo "fanout-$n on $(nproc) cores, load average $load_before before and $(cut -d' ' -f1-3 /proc/loadavg) after; $(spin -V | head -1); $(go version | cut -d' ' -f3)"
row() { printf '%-28s %15s %10s %18s %13s\n' "$@"; }
row tool "distinct states" "search s" "distinct states/s" "peak RSS MiB"
row "SPIN (BFS, 1 core)" "$spin_states" "$(printf '%.2f' "$spin_secs")" "$spin_rate" "$spin_rss"
if [[ ${SPIN_DFS:-1} == 1 ]]; then
	row "SPIN (DFS, 1 core; ref.)" "$dfs_states" "$(printf '%.2f' "$dfs_secs")" "$(rate "$dfs_states" "$dfs_secs")" "$dfs_rss"
fi
if [[ ${SPIN_PAR:-} == 1 ]]; then
	row "SPIN (BFS_PAR, $(nproc) cores)" "$par_states" "$(printf '%.2f' "$par_secs")" "$(rate "$par_states" "$par_secs")" "$par_rss"
fi
row "cascade (BFS, $(nproc) cores)" "$cas_states" "$(printf '%.2f' "$cas_secs")" "$cas_rate" "$cas_rss"
if [[ ${CASCADE_1W:-} == 1 ]]; then
	row "cascade (BFS, 1 core)" "$one_states" "$(printf '%.2f' "$one_secs")" "$(rate "$one_states" "$one_secs")" "$one_rss"
fi
echo "ratio cascade/SPIN, distinct states/s (BFS against BFS): $(ratio "$cas_rate" "$spin_rate")"
if [[ ${SPIN_DFS:-1} == 1 ]]; then
	echo "ratio cascade/SPIN DFS, distinct states/s (reference): $(ratio "$cas_rate" "$(rate "$dfs_states" "$dfs_secs")")"
fi
if [[ ${SPIN_PAR:-} == 1 ]]; then
	echo "ratio cascade/SPIN BFS_PAR, distinct states/s: $(ratio "$cas_rate" "$(rate "$par_states" "$par_secs")") (its peak RSS is one process of several)"
fi
if [[ ${CASCADE_1W:-} == 1 ]]; then
	echo "ratio cascade 1 core/SPIN, distinct states/s: $(ratio "$(rate "$one_states" "$one_secs")" "$spin_rate")"
fi
printf 'search time only: SPIN pan "elapsed time", cascade "seconds"; spin -a + gcc took %.2f s more\n' "$compile"

status=0
for other in "SPIN:$spin_states" ${dfs_states:+"SPIN DFS:$dfs_states"} ${par_states:+"SPIN BFS_PAR:$par_states"} ${one_states:+"cascade 1 core:$one_states"}; do
	if [[ ${other#*:} != "$cas_states" ]]; then
		echo "bench-check: FAIL: ${other%%:*} has ${other#*:} states, cascade found $cas_states distinct states" >&2
		status=1
	fi
done
if ((status == 0)); then
	echo "distinct states agree: $cas_states"
fi
if [[ $cas_states != "$expect" ]]; then
	echo "bench-check: note: the closed form says $expect for fanout-$n (TestFanoutCounts)" >&2
fi
exit $status
