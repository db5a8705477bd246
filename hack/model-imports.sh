#!/usr/bin/env bash
# model-imports.sh checks the import rules of the README's Layout section:
#  - model/ is the pure state machine and depends on the standard library
#    only (a package path whose first element has no dot) and on model/
#    itself; model/check/ may also depend on traces/;
#  - impl/, the reference GC, never depends on model/, tests included: impl
#    is an independent implementation that the model checks, and one that
#    borrowed the model's code could not disagree with it.
# It prints every offending dependency and exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."
module=$(go list -m)

if [[ ! -d model ]]; then
  echo "model-imports: no model/ yet, nothing to check"
  exit 0
fi

# offenders PACKAGES... ALLOWED-REGEX: non-stdlib dependencies outside ALLOWED.
offenders() {
  local allowed=${!#}
  go list -deps "${@:1:$#-1}" | grep -Ev '^[^./]+(/|$)' | grep -Ev "$allowed" || true
}

mapfile -t all < <(go list ./model/... 2>/dev/null)
core=() check=()
for p in "${all[@]}"; do
  if [[ $p == "$module/model/check" || $p == "$module/model/check/"* ]]; then check+=("$p"); else core+=("$p"); fi
done

bad=""
if ((${#core[@]})); then bad+=$(offenders "${core[@]}" "^$module/model(/|\$)"); fi
if ((${#check[@]})); then bad+=${bad:+$'\n'}$(offenders "${check[@]}" "^$module/(model|traces)(/|\$)"); fi
if [[ -n ${bad//$'\n'/} ]]; then
  echo "model-imports: model/ may import only the standard library (model/check also traces/); found:"
  echo "$bad" | sed '/^$/d' | sort -u | sed 's/^/  /'
  exit 1
fi

# impl: go list -deps -test covers impl's packages and their tests; a
# dependency is printed with the impl package that pulls it in.
mapfile -t impl < <(go list ./impl/... 2>/dev/null)
implbad=""
for p in "${impl[@]}"; do
  hit=$(go list -deps -test "$p" | grep -E "^$module/model(/| |\$)" | sort -u || true)
  if [[ -n $hit ]]; then implbad+="  $p -> ${hit//$'\n'/, }"$'\n'; fi
done
if [[ -n $implbad ]]; then
  echo "model-imports: impl/ must never depend on model/ (tests included); found:"
  printf '%s' "$implbad"
  exit 1
fi
echo "model-imports: ok (${#core[@]} model packages, ${#check[@]} model/check packages; ${#impl[@]} impl packages without model/)"
