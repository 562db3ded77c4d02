#!/usr/bin/env bash
# The simulated NVML library and native nvidia-smi (tests/nvml-sim), built
# once per source: the build is kept under $GPUFLEET_CACHE/nvml-sim/<key> (a
# hash of the sources and the Makefile) and copied into tests/nvml-sim/build,
# where the images and the unit tests take it from.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(dirname "$0")/env.sh"

sim=$GPUFLEET_ROOT/tests/nvml-sim
key=$(cd "$sim" && find Makefile src -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
cached=$GPUFLEET_CACHE/nvml-sim/$key
# One build or copy at a time: two makes (make units and make units-oldest
# started apart, or two checkouts) would build into the same directories.
mkdir -p "$GPUFLEET_CACHE/nvml-sim"
exec 9>"$GPUFLEET_CACHE/nvml-sim/.lock"
flock 9
if [ ! -f "$cached/libnvidia-ml.so.1" ]; then
  # A make of its own: under `make --jobs` (make demo, make test) the
  # inherited MAKEFLAGS name a jobserver this script was not handed, and make
  # would warn "jobserver unavailable".
  env -u MAKEFLAGS -u MFLAGS make -s -C "$sim" clean all
  mkdir -p "$cached.tmp"
  cp -a "$sim/build/." "$cached.tmp/"
  rm -rf "$cached"
  mv "$cached.tmp" "$cached"
elif ! cmp -s "$cached/libnvidia-ml.so.1" "$sim/build/libnvidia-ml.so.1" \
    || ! cmp -s "$cached/nvidia-smi" "$sim/build/nvidia-smi"; then
  mkdir -p "$sim/build"
  # New timestamps: a fresh clone's sources are newer than the cached build,
  # and `make -C tests/nvml-sim` must see the copy as up to date.
  cp -P "$cached"/* "$sim/build/"
  touch -h "$sim/build"/*
fi
