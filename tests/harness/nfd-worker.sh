#!/usr/bin/env bash
# Build nfd-worker (Node Feature Discovery's node agent, the real consumer of
# the node_labels role's feature file) from its Go module, pinned, and print
# the path of the binary. Cached under $GPUFLEET_CACHE/go-tools/ like
# go-build.sh's tools; a second run costs nothing.
#
# Not a go-tools.txt line: NFD's go.mod replaces its own api/nfd module with
# the directory ./api/nfd, which the module zip does not carry, so neither
# `go install ...@version` nor go-build.sh can build it. The replace is
# pointed at the api/nfd module of the same release instead (tagged together
# upstream); every other requirement stays NFD's own go.mod/go.sum.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(dirname "$0")/env.sh"
here=$(cd "$(dirname "$0")" && pwd)

# v0.19.0: the newest release the Go module proxy serves here (go 1.26).
module=sigs.k8s.io/node-feature-discovery
version=v0.19.0
# As NFD's Makefile links it (static, hostpath prefix "/").
ldflags="-s -w -X $module/pkg/version.version=$version -X $module/pkg/utils/hostpath.pathPrefix=/"

# One build at a time: go-tools.sh builds it at the start of `make test`,
# and the node_labels scenario's prepare asks once per node.
go_tool_lock "nfd-worker-$version"

go=$("$here/ensure-go.sh")
key=$( (echo "$module $version $ldflags"; "$go" env GOVERSION; cat "$0"; declare -f go_env) | sha256sum | cut -c1-12)
out="$GPUFLEET_CACHE/go-tools/nfd-worker-$version-$key"
if [ -x "$out/bin/nfd-worker" ]; then
  echo "$out/bin/nfd-worker"
  exit 0
fi

go_env 0 "-trimpath -modcacherw"

log "building nfd-worker $version with $("$go" env GOVERSION) (cached afterwards)"
start=$(date +%s)
child_cpu cpu0
tmp=$(mktemp -d "$GPUFLEET_CACHE/go-tools.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
src=$("$go" mod download -json "$module@$version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
cp -r "$src" "$tmp/src"
chmod -R u+w "$tmp/src"
(
  cd "$tmp/src"
  "$go" mod edit -replace="$module/api/nfd=$module/api/nfd@$version"
  # Adds only the api/nfd module's sums (checked against the checksum database).
  "$go" mod download "$module/api/nfd"
  # Unoptimised, as go-build.sh builds (-N -l: a third less CPU cold).
  "$go" build -mod=mod -o "$tmp/bin/" -gcflags="all=-N -l" -ldflags "$ldflags" ./cmd/nfd-worker
) >&2
mkdir -p "$GPUFLEET_CACHE/go-tools" "$out"
rm -rf "${out:?}/bin"
mv "$tmp/bin" "$out/bin"
go_tool_built nfd-worker "$version" "$out" "$start" "$cpu0"
echo "$out/bin/nfd-worker"
