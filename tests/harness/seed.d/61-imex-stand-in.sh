#!/usr/bin/env bash
# STAND-INS for NVIDIA's IMEX packages, which cannot be had here (NVIDIA's CUDA
# repository is out of reach, and IMEX needs multi-node NVLink GPUs).
# Packages with the real names and the versions of the simulated drivers the
# imex scenario runs (the IMEX package's version is the driver's):
#   nvidia-imex-570  570.133.20-1  (R550-R575 name; tests/nvml-sim/nodes/hgx-h200-8x141gb.yml)
#   nvidia-imex      580.159.04-1  (R580+ name;     tests/nvml-sim/nodes/hgx-h100-94gb-4x.yml)
# whose programs are the scripts of tests/harness/stand-in-imex/: a daemon that
# reads config.cfg and the nodes file, daemonizes and answers on its command
# socket and port, nvidia-imex-ctl, the packaged unit, and config.cfg as a
# conffile. Published into the flat repositories the DCGM stand-ins use,
# laid out like NVIDIA's CUDA repository:
#   cuda-stand-in/<distro>/x86_64/    (debian12, debian13)
# They prove the imex role's and verify's logic (names, pins, holds, the
# config merge, the unit, the control tool's answers), never IMEX itself
# (docs/imex.md).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../env.sh
. "$(dirname "$0")/../env.sh"
harness=$(cd "$(dirname "$0")/.." && pwd)
src=$harness/stand-in-imex
# name:driver version, one per simulated driver branch the scenario runs.
builds=(nvidia-imex-570:570.133.20 nvidia-imex:580.159.04)

key=$({ cat "$0" "$src"/*; } | sha256sum | cut -c1-16)
cache=$GPUFLEET_CACHE/stand-in-imex/$key
build_deb() {  # build_deb <name> <driver version>
  local name=$1 version=$2-1 work
  work=$(mktemp -d)
  mkdir -p "$work/DEBIAN"
  sed "s/@VERSION@/$2/" "$src/nvidia-imex" >"$work/nvidia-imex.tmp"
  install -D -m 0755 "$work/nvidia-imex.tmp" "$work/usr/bin/nvidia-imex"
  rm "$work/nvidia-imex.tmp"
  install -D -m 0755 "$src/nvidia-imex-ctl" "$work/usr/bin/nvidia-imex-ctl"
  install -D -m 0644 "$src/nvidia-imex.service" "$work/usr/lib/systemd/system/nvidia-imex.service"
  install -D -m 0644 "$src/config.cfg" "$work/etc/nvidia-imex/config.cfg"
  echo /etc/nvidia-imex/config.cfg >"$work/DEBIAN/conffiles"
  {
    echo "Package: $name"
    echo "Version: $version"
    echo "Architecture: all"
    echo "Maintainer: gpufleet test ground <stand-in@gpufleet.invalid>"
    echo "Depends: python3"
    echo "Section: non-free/utils"
    echo "Priority: optional"
    echo "Description: $name (gpufleet test-ground stand-in, not NVIDIA's package)"
  } >"$work/DEBIAN/control"
  dpkg-deb --root-owner-group -Zgzip --build "$work" "$cache.tmp/${name}_${version}_all.deb" >/dev/null
  rm -rf "$work"
}
if [ ! -d "$cache" ]; then
  log "stand-in IMEX: building packages"
  rm -rf "$cache.tmp"
  mkdir -p "$cache.tmp"
  for build in "${builds[@]}"; do
    build_deb "${build%%:*}" "${build#*:}"
  done
  mv "$cache.tmp" "$cache"
fi
for distro in debian12 debian13; do
  python3 "$harness/mirror.py" add-deb --flat "cuda-stand-in/$distro/x86_64" "$cache"/*.deb
done
