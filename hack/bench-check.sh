#!/usr/bin/env bash
# bench-check.sh: the SPIN baseline (make bench-check). Explores the scope
# fanout-N with SPIN (bench/spin/fanout.pml) and with cascade's checker,
# in one run, and prints distinct states, search seconds, distinct states
# per second, CPU seconds, distinct states per CPU-second and peak RSS of
# both, the load average, and the ratios cascade/SPIN of states/s: the
# per-core ratio (cascade with one worker against SPIN's BFS, which uses
# one core) and the two-worker ratio (cascade with its default workers,
# GOMAXPROCS, against the same). The searches run one after the other, so
# the ratios of one round share the machine's load; ROUNDS=N repeats the
# whole measurement N times, a table per round. Exits non-zero when the
# distinct-state counts differ.
#
# The comparison is breadth-first against breadth-first (both find
# shortest counterexamples) and exhaustive against exhaustive, with
# SPIN's speed options on (-O2, -DNOBOUNDCHECK). Partial-order reduction
# is off (-DNOREDUCE): with the model's one process it changes neither
# SPIN's count nor its time. Cascade's search of a preset keeps sleep sets
# to skip the claims (and, where no property can notice, the steps) of
# successors they prove reached elsewhere, every transition still
# counted; its plain search (--no-reduction: every transition applied,
# checked and claimed, as SPIN's) is measured on one worker too, so the
# per-core ratio is printed both ways. SPIN's own default
# search, depth first, is often faster still and is printed too.
#
#   FANOUT=8      the scope's N (1..12; default 8)
#   SPIN_MEMLIM   pan's memory limit in MB (default 16384)
#   SPIN_DFS=0    skip the reference run of SPIN's depth-first search
#   SPIN_PAR=1    also run SPIN's multi-core BFS (-DBFS_PAR, NCORE=nproc)
#   CASCADE_1W=0  skip cascade with one worker (the per-core ratios,
#                 default and plain)
#   CASCADE_EXPECT=0  let cascade's visited table grow from its small
#                 start instead of sizing it for the closed form's count
#                 (--expect-states), as SPIN's hash table is (-w)
#   ROUNDS=1      how many times to measure (SPIN, then cascade)
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
rounds=${ROUNDS:-1}
if ! [[ $rounds =~ ^[0-9]+$ ]] || ((rounds < 1 || rounds > 100)); then
	echo "bench-check: ROUNDS must be 1..100, got '$rounds'" >&2
	exit 2
fi

# Tools: SPIN, GNU time and bc from Debian when missing; gcc and go are given.
missing=()
command -v spin >/dev/null || missing+=(spin)
[[ -x /usr/bin/time ]] || missing+=(time)
command -v bc >/dev/null || missing+=(bc)
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
# CPU seconds (user and system) from a GNU time -v report
cpusecs() { awk -F: '/(User|System) time \(seconds\)/ { s += $2 } END { printf "%.2f", s }' "$1"; }
now() { date +%s.%N; }

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
if [[ ${SPIN_DFS:-1} == 1 ]]; then
	(cd "$work" && gcc "${spin_flags[@]}" -o pan-dfs pan.c 2>gcc-dfs.log) || {
		cat "$work/gcc-dfs.log" >&2
		exit 1
	}
fi
if [[ ${SPIN_PAR:-} == 1 ]]; then
	(cd "$work" && gcc "${spin_flags[@]}" -DBFS_PAR -DNCORE="$(nproc)" -o pan-par pan.c 2>gcc-par.log) || {
		cat "$work/gcc-par.log" >&2
		exit 1
	}
fi
t1=$(now)
compile=$(echo "$t1 - $t0" | bc -l)
go build -o bin/cascade ./cmd/cascade

# runpan NAME: run ./NAME, set NAME's states, seconds, CPU seconds and
# peak RSS.
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
	r_cpu=$(cpusecs "$work/$1.time")
	r_rss=$(peak "$work/$1.time")
}

# runcascade NAME ARGS...: run cascade check, set its states, seconds, CPU
# seconds and peak RSS.
runcascade() {
	local name=$1
	shift
	local sized=(--expect-states "$expect")
	[[ ${CASCADE_EXPECT:-1} == 0 ]] && sized=()
	/usr/bin/time -v -o "$work/$name.time" bin/cascade check --preset "fanout-$n" --json -q --out "$work/counterexamples" "${sized[@]}" "$@" >"$work/$name.json" || {
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
	r_cpu=$(cpusecs "$work/$name.time")
	r_rss=$(peak "$work/$name.time")
}

# A search too short for its clock to tick has no rate: "-".
rate() { if [[ $(echo "$2 > 0" | bc -l) == 1 ]]; then printf '%.0f' "$(echo "$1 / $2" | bc -l)"; else echo -; fi; }
# ratio A B: A/B of two rates, "-" when either is.
ratio() { if [[ $1 != - && $2 != - ]]; then printf '%.4f' "$(echo "$1 / $2" | bc -l)"; else echo -; fi; }
row() { printf '%-28s %15s %9s %18s %7s %18s %13s\n' "$@"; }
# report LABEL STATES SECS CPU RSS: one row of the table.
report() { row "$1" "$2" "$(printf '%.2f' "$3")" "$(rate "$2" "$3")" "$4" "$(rate "$2" "$4")" "$5"; }

status=0
for round in $(seq 1 "$rounds"); do
	load_before=$(cut -d' ' -f1-3 /proc/loadavg)
	# ---- SPIN, then cascade, one right after the other ---------------------
	runpan pan
	spin_states=$r_states spin_secs=$r_secs spin_cpu=$r_cpu spin_rss=$r_rss
	if [[ ${CASCADE_1W:-1} == 1 ]]; then
		runcascade cascade-1w --workers 1
		one_states=$r_states one_secs=$r_secs one_cpu=$r_cpu one_rss=$r_rss
		runcascade cascade-1w-plain --workers 1 --no-reduction
		plain_states=$r_states plain_secs=$r_secs plain_cpu=$r_cpu plain_rss=$r_rss
	fi
	runcascade cascade
	cas_states=$r_states cas_secs=$r_secs cas_cpu=$r_cpu cas_rss=$r_rss
	dfs_states='' par_states=''
	if [[ ${SPIN_DFS:-1} == 1 ]]; then
		runpan pan-dfs
		dfs_states=$r_states dfs_secs=$r_secs dfs_cpu=$r_cpu dfs_rss=$r_rss
	fi
	if [[ ${SPIN_PAR:-} == 1 ]]; then
		runpan pan-par
		par_states=$r_states par_secs=$r_secs par_cpu=$r_cpu par_rss=$r_rss
	fi
	load_after=$(cut -d' ' -f1-3 /proc/loadavg)

	# ---- report ---------------------------------------------------------
	spin_rate=$(rate "$spin_states" "$spin_secs")
	cas_rate=$(rate "$cas_states" "$cas_secs")
	echo
	((rounds == 1)) || echo "round $round of $rounds"
	echo "fanout-$n on $(nproc) cores, load average $load_before before and $load_after after; $(spin -V | head -1); $(go version | cut -d' ' -f3)"
	row tool "distinct states" "search s" "distinct states/s" "CPU s" "states/CPU-s" "peak RSS MiB"
	report "SPIN (BFS, 1 core)" "$spin_states" "$spin_secs" "$spin_cpu" "$spin_rss"
	if [[ ${CASCADE_1W:-1} == 1 ]]; then
		report "cascade (BFS, 1 worker)" "$one_states" "$one_secs" "$one_cpu" "$one_rss"
		report "cascade (1 worker, plain)" "$plain_states" "$plain_secs" "$plain_cpu" "$plain_rss"
	fi
	report "cascade (BFS, $(nproc) workers)" "$cas_states" "$cas_secs" "$cas_cpu" "$cas_rss"
	if [[ -n $dfs_states ]]; then
		report "SPIN (DFS, 1 core; ref.)" "$dfs_states" "$dfs_secs" "$dfs_cpu" "$dfs_rss"
	fi
	if [[ -n $par_states ]]; then
		report "SPIN (BFS_PAR, $(nproc) cores)" "$par_states" "$par_secs" "$par_cpu" "$par_rss"
	fi
	if [[ ${CASCADE_1W:-1} == 1 ]]; then
		echo "per-core ratio, cascade 1 worker/SPIN BFS: $(ratio "$(rate "$one_states" "$one_secs")" "$spin_rate") distinct states/s, $(ratio "$(rate "$one_states" "$one_cpu")" "$(rate "$spin_states" "$spin_cpu")") per CPU-second (load $load_before)"
		echo "per-core ratio, plain search (--no-reduction, every transition applied as SPIN's)/SPIN BFS: $(ratio "$(rate "$plain_states" "$plain_secs")" "$spin_rate") distinct states/s, $(ratio "$(rate "$plain_states" "$plain_cpu")" "$(rate "$spin_states" "$spin_cpu")") per CPU-second"
	fi
	echo "two-worker ratio, cascade $(nproc) workers/SPIN BFS: $(ratio "$cas_rate" "$spin_rate") distinct states/s (load $load_before)"
	if [[ -n $dfs_states ]]; then
		echo "ratio cascade/SPIN DFS, distinct states/s (reference): $(ratio "$cas_rate" "$(rate "$dfs_states" "$dfs_secs")")"
	fi
	if [[ -n $par_states ]]; then
		echo "ratio cascade/SPIN BFS_PAR, distinct states/s: $(ratio "$cas_rate" "$(rate "$par_states" "$par_secs")") (its peak RSS is one process of several)"
	fi
	printf 'search time only: SPIN pan "elapsed time", cascade "seconds"; CPU s is the whole process (GNU time: user + system); spin -a + gcc took %.2f s more\n' "$compile"
	if [[ ${CASCADE_EXPECT:-1} == 0 ]]; then
		echo "hash tables: SPIN's sized for the closed form's $expect states (-w$w); cascade's grown from its start (CASCADE_EXPECT=0)"
	else
		echo "hash tables: both sized for the closed form's $expect states (SPIN -w$w, cascade --expect-states $expect)"
	fi

	agree=1
	for other in "SPIN:$spin_states" ${dfs_states:+"SPIN DFS:$dfs_states"} ${par_states:+"SPIN BFS_PAR:$par_states"} ${one_states:+"cascade 1 worker:$one_states"} ${plain_states:+"cascade plain:$plain_states"}; do
		if [[ ${other#*:} != "$cas_states" ]]; then
			echo "bench-check: FAIL: ${other%%:*} has ${other#*:} states, cascade found $cas_states distinct states" >&2
			status=1 agree=0
		fi
	done
	if ((agree)); then
		echo "distinct states agree: $cas_states"
	fi
	if [[ $cas_states != "$expect" ]]; then
		echo "bench-check: note: the closed form says $expect for fanout-$n (TestFanoutCounts)" >&2
	fi
done
exit $status
