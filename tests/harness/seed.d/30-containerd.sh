#!/usr/bin/env bash
# containerd 2.x from the pinned Go module, for the test node that runs config
# version 3/4 (Debian ships 1.6 in bookworm and 1.7 in trixie). Published like
# the upstream release: files/containerd/<version>/containerd-<x.y.z>-linux-amd64.tar.gz
# holding bin/{containerd,containerd-shim-runc-v2,ctr}, next to the
# containerd.service unit from the module (upstream ships it in the source
# tree, not in the release tarball). The test's prepare installs both.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR/.. source=../env.sh
. "$(dirname "$0")/../env.sh"
harness=$(cd "$(dirname "$0")/.." && pwd)

while read -r version; do
  bin=$("$harness/go-build.sh" containerd "$version")
  src=$(cat "$bin/../module-dir")
  key=$( (sha256sum "$bin"/*; cat "$src/containerd.service" "$0") | sha256sum | cut -c1-12)
  out="$GPUFLEET_CACHE/tarballs-built/containerd-$version-$key"
  name="containerd-${version#v}-linux-amd64.tar.gz"
  if [ ! -d "$out" ]; then
    stage=$(mktemp -d "$GPUFLEET_CACHE/tarballs-built.XXXXXX")
    mkdir -p "$stage/tree/bin"
    install -m 0755 "$bin"/* "$stage/tree/bin/"
    tar -C "$stage/tree" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - bin \
      | gzip -n -6 >"$stage/$name"
    install -m 0644 "$src/containerd.service" "$stage/containerd.service"
    rm -rf "$stage/tree"
    mkdir -p "$(dirname "$out")"
    rm -rf "$GPUFLEET_CACHE/tarballs-built/containerd-$version-"*
    mv "$stage" "$out"
  fi
  python3 "$harness/mirror.py" add-file "containerd/$version" "$out/$name" "$out/containerd.service" >/dev/null
done < <(go_tool_versions containerd)
