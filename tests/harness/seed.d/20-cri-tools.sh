#!/usr/bin/env bash
# crictl from the pinned cri-tools Go module, published like the upstream
# release assets: files/cri-tools/<version>/crictl-<version>-linux-amd64.tar.gz
# (+ .sha256 holding only the digest, as cri-tools' release script writes it),
# so the crictl role's download URL can point at the mirror unchanged.
#
# Also a tampered copy under files/cri-tools-tampered/ (one byte appended to
# the binary, its own matching .sha256): the tests pin the genuine digest and
# expect the role to refuse it.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR/.. source=../env.sh
. "$(dirname "$0")/../env.sh"
harness=$(cd "$(dirname "$0")/.." && pwd)

# Byte-identical archives from identical binaries: the digest is then stable
# across runs and machines with the same build. One member, `crictl`, at the
# top, as in the upstream tarballs.
reproducible_tar() {
  local dir=$1 out=$2
  tar -C "$dir" --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - crictl | gzip -n -6 >"$out"
}

while read -r version; do
  bin=$("$harness/go-build.sh" cri-tools "$version")
  key=$( (sha256sum "$bin/crictl"; cat "$0") | sha256sum | cut -c1-12)
  out="$GPUFLEET_CACHE/tarballs-built/cri-tools-$version-$key"
  name="crictl-$version-linux-amd64.tar.gz"
  if [ ! -d "$out" ]; then
    stage=$(mktemp -d "$GPUFLEET_CACHE/tarballs-built.XXXXXX")
    mkdir -p "$stage/genuine" "$stage/tampered"
    install -m 0755 "$bin/crictl" "$stage/genuine/crictl"
    reproducible_tar "$stage/genuine" "$stage/$name"
    install -m 0755 "$bin/crictl" "$stage/tampered/crictl"
    printf '\0' >>"$stage/tampered/crictl"
    mkdir -p "$stage/out-tampered"
    reproducible_tar "$stage/tampered" "$stage/out-tampered/$name"
    rm -rf "$stage/genuine" "$stage/tampered"
    mkdir -p "$(dirname "$out")"
    rm -rf "$GPUFLEET_CACHE/tarballs-built/cri-tools-$version-"*
    mv "$stage" "$out"
  fi
  python3 "$harness/mirror.py" add-file "cri-tools/$version" "$out/$name" >/dev/null
  python3 "$harness/mirror.py" add-file "cri-tools-tampered/$version" "$out/out-tampered/$name" >/dev/null
done < <(go_tool_versions cri-tools)
