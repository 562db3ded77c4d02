#!/usr/bin/env bash
# STAND-INS for DCGM 4 and dcgm-exporter, which cannot be had here (NVIDIA's
# CUDA repository is out of reach, and DCGM needs a real GPU). Packages with
# the real names and versions (datacenter-gpu-manager-4-core, -cuda12/13,
# -proprietary[-cuda12/13] at 1:4.5.3-1) whose programs are the tiny scripts
# of tests/harness/stand-in-dcgm/: nv-hostengine, dcgmi and the packaged
# nvidia-dcgm.service, recording their arguments. Published as flat
# repositories laid out like NVIDIA's CUDA repository:
#   cuda-stand-in/<distro>/x86_64/    (debian12, debian13)
# and the stand-in dcgm-exporter as a release tarball with its .sha256:
#   files/dcgm-exporter/<version>/dcgm-exporter-<version>-linux-amd64.tar.gz
# They prove the dcgm role's logic (names, pins, holds, units, arguments,
# health watches, the diag gate), never DCGM itself (docs/test-ground.md).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../env.sh
. "$(dirname "$0")/../env.sh"
harness=$(cd "$(dirname "$0")/.." && pwd)
src=$harness/stand-in-dcgm
dcgm_version=4.5.3
deb_version=1:$dcgm_version-1
exporter_version=4.5.3-4.8.2

key=$({ cat "$0" "$src"/*; } | sha256sum | cut -c1-16)
cache=$GPUFLEET_CACHE/stand-in-dcgm/$key
build_deb() {  # build_deb <name> <depends> [<file in src> <destination>]...
  local name=$1 depends=$2 work
  shift 2
  work=$(mktemp -d)
  mkdir -p "$work/DEBIAN"
  while [ "$#" -gt 0 ]; do
    install -D -m "$([ -x "$src/$1" ] && echo 0755 || echo 0644)" "$src/$1" "$work/$2"
    shift 2
  done
  {
    echo "Package: $name"
    echo "Version: $deb_version"
    echo "Architecture: all"
    echo "Maintainer: gpufleet test ground <stand-in@gpufleet.invalid>"
    [ -n "$depends" ] && echo "Depends: $depends"
    echo "Section: non-free/utils"
    echo "Priority: optional"
    echo "Description: $name (gpufleet test-ground stand-in, not NVIDIA's package)"
  } >"$work/DEBIAN/control"
  dpkg-deb --root-owner-group -Zgzip --build "$work" "$cache.tmp/${name}_${deb_version#*:}_all.deb" >/dev/null
  rm -rf "$work"
}
if [ ! -d "$cache" ]; then
  log "stand-in DCGM: building packages and the exporter tarball"
  rm -rf "$cache.tmp"
  mkdir -p "$cache.tmp"
  core="datacenter-gpu-manager-4-core (= $deb_version)"
  build_deb datacenter-gpu-manager-4-core "python3" \
    nv-hostengine usr/bin/nv-hostengine dcgmi usr/bin/dcgmi nvidia-dcgm.service usr/lib/systemd/system/nvidia-dcgm.service
  for major in 12 13; do
    build_deb "datacenter-gpu-manager-4-cuda$major" "$core"
    build_deb "datacenter-gpu-manager-4-proprietary-cuda$major" "$core, datacenter-gpu-manager-4-cuda$major (= $deb_version)"
  done
  build_deb datacenter-gpu-manager-4-proprietary "$core"
  stage=$(mktemp -d)
  sed "s/@VERSION@/$exporter_version/" "$src/dcgm-exporter" >"$stage/dcgm-exporter"
  chmod 0755 "$stage/dcgm-exporter"
  tar -C "$stage" --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - dcgm-exporter | gzip -n -9 \
    >"$cache.tmp/dcgm-exporter-$exporter_version-linux-amd64.tar.gz"
  rm -rf "$stage"
  mv "$cache.tmp" "$cache"
fi
for distro in debian12 debian13; do
  python3 "$harness/mirror.py" add-deb --flat "cuda-stand-in/$distro/x86_64" "$cache"/*.deb
done
python3 "$harness/mirror.py" add-file "dcgm-exporter/$exporter_version" "$cache/dcgm-exporter-$exporter_version-linux-amd64.tar.gz" >/dev/null
