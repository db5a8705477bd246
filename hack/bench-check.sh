#!/usr/bin/env bash
# bench-check.sh: the SPIN baseline (make bench-check). Explores the scope
# fanout-N with SPIN (bench/spin/fanout.pml) and with cascade's checker,
# in one run, and prints distinct states, search seconds, distinct states
# per second and peak RSS of both, and the ratio cascade/SPIN of states/s.
# Exits non-zero when the two distinct-state counts differ.
#
#   FANOUT=8      the scope's N (1..12; default 8)
#   SPIN_MEMLIM   pan's memory limit in MB (default 16384)
#   SPIN_PAR=1    also run SPIN's multi-core BFS (-DBFS_PAR, NCORE=nproc)
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

# ---- SPIN ---------------------------------------------------------------
# Hash table: the smallest power of two at least twice the state count.
w=10
while (((1 << w) < 2 * expect && w < 34)); do w=$((w + 1)); done
t0=$(now)
(cd "$work" && spin -DN="$n" -a "$root/bench/spin/fanout.pml" >spin-a.log)
(cd "$work" && gcc -O2 -DNOREDUCE -DBFS -DSAFETY -DMEMLIM="$memlim" -o pan pan.c 2>gcc.log) || {
	cat "$work/gcc.log" >&2
	exit 1
}
t1=$(now)
compile=$(echo "$t1 - $t0" | bc -l)
(cd "$work" && /usr/bin/time -v -o pan.time ./pan -m100000 -w"$w" >pan.out 2>&1) || {
	echo "bench-check: pan failed" >&2
	cat "$work/pan.out" >&2
	exit 1
}
spin_states=$(awk '/states, stored/ { print $1; exit }' "$work/pan.out")
spin_secs=$(awk '/^pan: elapsed time/ { print $4; exit }' "$work/pan.out")
spin_errors=$(awk '/errors:/ { print $NF; exit }' "$work/pan.out")
spin_rss=$(peak "$work/pan.time")
if [[ $spin_errors != 0 ]]; then
	echo "bench-check: SPIN reports $spin_errors errors" >&2
	cat "$work/pan.out" >&2
	exit 1
fi

if [[ ${SPIN_PAR:-} == 1 ]]; then
	(cd "$work" && gcc -O2 -DNOREDUCE -DBFS_PAR -DNCORE="$(nproc)" -DSAFETY -DMEMLIM="$memlim" -o pan-par pan.c 2>gcc-par.log) || {
		cat "$work/gcc-par.log" >&2
		exit 1
	}
	(cd "$work" && /usr/bin/time -v -o pan-par.time ./pan-par -m100000 -w"$w" >pan-par.out 2>&1) || {
		echo "bench-check: pan (BFS_PAR) failed" >&2
		cat "$work/pan-par.out" >&2
		exit 1
	}
	par_states=$(awk '/states, stored/ { print $1; exit }' "$work/pan-par.out")
	par_secs=$(awk '/^pan: elapsed time/ { print $4; exit }' "$work/pan-par.out")
	par_rss=$(peak "$work/pan-par.time")
fi

# ---- cascade --------------------------------------------------------------
go build -o bin/cascade ./cmd/cascade
/usr/bin/time -v -o "$work/cascade.time" bin/cascade check --preset "fanout-$n" --json -q --out "$work/counterexamples" >"$work/cascade.json" || {
	echo "bench-check: cascade check failed" >&2
	cat "$work/cascade.json" >&2
	exit 1
}
field() { sed -n "s/^ *\"$1\": *\\([^,]*\\),\\{0,1\\}\$/\\1/p" "$work/cascade.json" | head -1; }
cas_states=$(field distinct_states)
cas_secs=$(field seconds)
cas_complete=$(field complete)
cas_rss=$(peak "$work/cascade.time")
if [[ $cas_complete != true ]]; then
	echo "bench-check: cascade's exploration is not complete" >&2
	exit 1
fi

# ---- report ---------------------------------------------------------------
# A search too short for its clock to tick has no rate: "-".
rate() { if [[ $(echo "$2 > 0" | bc -l) == 1 ]]; then printf '%.0f' "$(echo "$1 / $2" | bc -l)"; else echo -; fi; }
spin_rate=$(rate "$spin_states" "$spin_secs")
cas_rate=$(rate "$cas_states" "$cas_secs")
ratio=-
if [[ $spin_rate != - && $cas_rate != - ]]; then
	ratio=$(printf '%.4f' "$(echo "$cas_rate / $spin_rate" | bc -l)")
fi

echo
echo "fanout-$n on $(nproc) cores (load average $(cut -d' ' -f1-3 /proc/loadavg)); $(spin -V | head -1); $(go version | cut -d' ' -f3)"
row() { printf '%-25s %15s %10s %18s %13s\n' "$@"; }
row tool "distinct states" "search s" "distinct states/s" "peak RSS MiB"
row "SPIN (BFS, 1 core)" "$spin_states" "$(printf '%.2f' "$spin_secs")" "$spin_rate" "$spin_rss"
if [[ ${SPIN_PAR:-} == 1 ]]; then
	row "SPIN (BFS_PAR, $(nproc) cores)" "$par_states" "$(printf '%.2f' "$par_secs")" "$(rate "$par_states" "$par_secs")" "$par_rss"
fi
row "cascade ($(nproc) cores)" "$cas_states" "$(printf '%.2f' "$cas_secs")" "$cas_rate" "$cas_rss"
echo "ratio cascade/SPIN, distinct states/s: $ratio"
if [[ ${SPIN_PAR:-} == 1 ]]; then
	par_rate=$(rate "$par_states" "$par_secs")
	if [[ $par_rate != - && $cas_rate != - ]]; then
		printf 'ratio cascade/SPIN (BFS_PAR), distinct states/s: %.4f (its peak RSS is one process of several)\n' "$(echo "$cas_rate / $par_rate" | bc -l)"
	fi
fi
printf 'search time only: SPIN pan "elapsed time", cascade "seconds"; spin -a + gcc took %.2f s more\n' "$compile"

status=0
if [[ $spin_states != "$cas_states" ]]; then
	echo "bench-check: FAIL: SPIN stored $spin_states states, cascade found $cas_states distinct states" >&2
	status=1
elif [[ ${SPIN_PAR:-} == 1 && $par_states != "$cas_states" ]]; then
	echo "bench-check: FAIL: SPIN (BFS_PAR) stored $par_states states, cascade found $cas_states" >&2
	status=1
else
	echo "distinct states agree: $cas_states"
fi
if [[ $cas_states != "$expect" ]]; then
	echo "bench-check: note: the closed form says $expect for fanout-$n (TestFanoutCounts)" >&2
fi
exit $status
