#!/usr/bin/env bash
# build.sh builds etcd, kube-apiserver and kube-controller-manager from the Go
# module proxy into bin/kube/<version>/. It is idempotent: a binary whose
# stamp (a hash of this module's go.mod, go.sum, this script and the Go
# version) matches is not rebuilt, so a second run does no work.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=${KUBE_VERSION:-v1.36.3}
out=${KUBE_BIN_DIR:-$root/bin/kube/$version}
mkdir -p "$out"

stamp=$(cat "$here/go.mod" "$here/go.sum" "$here/build.sh" <(go version) | sha256sum | cut -c1-16)

major=${version#v}; major=${major%%.*}
minor=${version#v*.}; minor=${minor%%.*}
date=$(date -u -d @"${SOURCE_DATE_EPOCH:-0}" +%Y-%m-%dT%H:%M:%SZ)
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitCommit=0000000000000000000000000000000000000000 -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date"
done

build() { # name package
  local name=$1 pkg=$2 bin="$out/$1"
  if [[ -x "$bin" && -f "$bin.stamp" && "$(cat "$bin.stamp")" == "$stamp" ]]; then
    echo "kube: $name $version is up to date ($bin)"
    return
  fi
  echo "kube: building $name $version from $pkg (cold: several minutes on 2 cores)"
  local start=$SECONDS
  (cd "$here" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$bin.tmp" "$pkg")
  mv "$bin.tmp" "$bin"
  echo "$stamp" > "$bin.stamp"
  echo "kube: built $name in $((SECONDS - start))s"
}

total=$SECONDS
build etcd ./cmd/etcd
build kube-apiserver ./cmd/kube-apiserver
build kube-controller-manager ./cmd/kube-controller-manager
echo "kube: binaries in $out ($((SECONDS - total))s)"
