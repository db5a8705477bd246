#!/usr/bin/env bash
# build.sh builds kine $KINE_VERSION (default v0.17.5) from the Go module
# proxy into bin/kine/<version>/kine (or $KINE_BIN_DIR/kine), with cgo, so
# its SQLite driver is github.com/mattn/go-sqlite3 as in k3s.
#
# The module file is hack/kine/go.mod with its go.sum, which pin kine and
# every dependency; KINE_VERSION must be the version it requires (another
# version: edit go.mod and run `go mod tidy` here first, see README.md).
#
# It is idempotent: a binary whose stamp (a hash of go.mod, go.sum, cmd/,
# this script and the Go and C compiler versions) matches is not rebuilt.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=${KINE_VERSION:-v0.17.5}
if [[ ! $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
  echo "kine: KINE_VERSION=$version is not a kine release of the form vX.Y.Z (for example v0.17.5)" >&2
  exit 2
fi
if ! grep -qE "^[[:space:]]*(require[[:space:]]+)?github\.com/k3s-io/kine ${version//./\\.}\$" "$here/go.mod"; then
  echo "kine: KINE_VERSION=$version is not the kine hack/kine/go.mod requires ($(grep -oE 'github\.com/k3s-io/kine v[^ ]+' "$here/go.mod")); edit go.mod and run go mod tidy there first" >&2
  exit 2
fi
cc=${CC:-gcc}
if ! command -v "$cc" >/dev/null; then
  echo "kine: no C compiler ($cc): kine's SQLite driver github.com/mattn/go-sqlite3 needs cgo; install gcc or set CC" >&2
  exit 2
fi
out=${KINE_BIN_DIR:-$root/bin/kine/$version}
mkdir -p "$out"
out=$(cd "$out" && pwd)
bin=$out/kine

stamp=$(cat <(echo "$version") "$here/go.mod" "$here/go.sum" "$here"/cmd/kine/*.go "$here/build.sh" <(go version) <("$cc" --version | head -1) | sha256sum | cut -c1-16)
if [[ -x "$bin" && -f "$bin.stamp" && "$(cat "$bin.stamp")" == "$stamp" ]]; then
  echo "kine: kine $version is up to date ($bin)"
  exit 0
fi

echo "kine: building kine $version with cgo (SQLite from github.com/mattn/go-sqlite3; cold: a few minutes on 2 cores)"
start=$SECONDS
ldflags="-s -w -X github.com/k3s-io/kine/pkg/version.Version=$version -X github.com/k3s-io/kine/pkg/version.GitCommit=module-proxy"
(cd "$here" && CGO_ENABLED=1 CC="$cc" go build -trimpath -ldflags "$ldflags" -o "$bin.tmp" ./cmd/kine)
mv "$bin.tmp" "$bin"
echo "$stamp" > "$bin.stamp"
echo "kine: built $bin in $((SECONDS - start))s"
