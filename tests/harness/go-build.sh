#!/usr/bin/env bash
# Build one pinned line of go-tools.txt from its Go module and print the
# directory holding its binaries (../module-dir names the module's source). The result is cached under
# $GPUFLEET_CACHE/go-tools/<name>-<version>-<key>, the key covering the line,
# the Go version and this script, so a second run costs nothing.
#
#   go-build.sh NAME VERSION      e.g. go-build.sh cri-tools v1.36.0
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(dirname "$0")/env.sh"
here=$(cd "$(dirname "$0")" && pwd)

name=${1:?usage: go-build.sh NAME VERSION}
version=${2:?usage: go-build.sh NAME VERSION}
line=$(awk -v n="$name" -v v="$version" '$1 == n && $3 == v' "$here/go-tools.txt")
[ -n "$line" ] || die "no '$name $version' line in go-tools.txt"
read -r _ module _ cgo packages ldflags <<<"$line"

# One build of a pin at a time: a seed waits for the pin go-tools.sh is
# building, while a pin already built is packaged as the next one builds.
go_tool_lock "$name-$version"

go=$("$here/ensure-go.sh")
key=$( (echo "$line"; "$go" env GOVERSION; cat "$0"; declare -f go_env) | sha256sum | cut -c1-12)
out="$GPUFLEET_CACHE/go-tools/$name-$version-$key"
if [ -d "$out/bin" ]; then
  "$here/phase.sh" record "Go tools: $name $version (cached)" "$(date +%s)" "$(date +%s)" ok
  echo "$out/bin"
  exit 0
fi

go_env "$cgo" "-trimpath -modcacherw -mod=readonly"
# nvml.h marks calls deprecated that go-nvml still wraps: hundreds of warnings.
[ "$cgo" = 0 ] || export CGO_CFLAGS="-O2 -Wno-deprecated-declarations"

log "building $name $version with $("$go" env GOVERSION) (cached afterwards): $packages"
tmp=$(mktemp -d "$GPUFLEET_CACHE/go-tools.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
child_cpu cpu0
# `go install module/pkg@version` would be one step, but it also asks the
# proxy for the module's version list (deprecation notices), which the proxy
# here refuses for some modules (cri-tools: 403). `go mod download` fetches
# the same zip, checked against the checksum database; building inside it
# uses the module's own go.mod/go.sum, as go install would (-mod=readonly:
# module zips carry no vendor/ tree, and nothing may be re-resolved).
src=$("$go" mod download -json "$module@$version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
IFS=, read -r -a pkgs <<<"$packages"
# go splits -ldflags itself, honouring the quotes around -extldflags.
# Without the compiler's optimisation and inlining (-N -l): about a third
# less CPU on a cold machine (cri-tools: 149 s to 108 s), for binaries that
# behave the same and run for seconds on the test nodes.
(cd "$src" && "$go" build -o "$tmp/bin/" -gcflags="all=-N -l" -ldflags "$ldflags" "${pkgs[@]/#/./}") >&2
# Seed scripts package files from the module too (units, packaging metadata).
echo "$src" >"$tmp/module-dir"
mkdir -p "$(dirname "$out")"
rm -rf "$out"
mv "$tmp" "$out"
go_tool_built "$name" "$version" "$out" "$start" "$cpu0"
echo "$out/bin"
