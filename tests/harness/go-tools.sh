#!/usr/bin/env bash
# Build every Go tool of a set into the cache (go-tools.txt's pins, and the
# Kubernetes control plane and nfd-worker for `all`), before the mirror's
# seed scripts and the scenarios ask for them (they then find each build
# cached).
#
#   go-tools.sh [all|demo]    the set, as mirror-seed.sh takes it
#
# A step of its own so that make starts it at once, beside the venv and the
# node images: it needs neither (the system's python3 parses `go mod
# download`'s JSON), and on a cold machine it is the longest part of the
# mirror. One tool at a time: each `go build` already uses every core.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(dirname "$0")/env.sh"
here=$(cd "$(dirname "$0")" && pwd)

GPUFLEET_MIRROR_SET=${1:-all}
case "$GPUFLEET_MIRROR_SET" in all | demo) ;; *) die "usage: $0 [all|demo]" ;; esac
export GPUFLEET_MIRROR_SET

# The mirror's seed order: the toolkit, cri-tools, containerd. The demo's
# node runs Debian 13's own containerd, which site.yml installs
# (container_runtime_install), so the demo builds no containerd.
build_pins() {
  local name version
  for name in "$@"; do
    while read -r version; do
      "$here/go-build.sh" "$name" "$version" >/dev/null
    done < <(go_tool_versions "$name")
  done
}
if [ "$GPUFLEET_MIRROR_SET" = demo ]; then
  build_pins nvidia-container-toolkit cri-tools
  exit 0
fi
build_pins nvidia-container-toolkit cri-tools containerd
# Then what the tests use, in the order they first need it: the Kubernetes
# control plane (kube.sh; the upgrade scenario, among the first Molecule
# starts, needs it a minute in), GFD from k8s-device-plugin (the unit tests'
# judge of node_labels and of the device plugin's config,
# tests/unit/plugins/filter/test_node_labels_gfd.py), and nfd-worker (the
# node_labels scenario's consumer, late in the run; not a go-tools.txt pin).
"$here/kube.sh" build >/dev/null
# helm and the GPU Operator's chart: the verify scenario's handover test.
build_pins helm
"$here/gpu-operator-chart.sh" >/dev/null
build_pins k8s-device-plugin
"$here/nfd-worker.sh" >/dev/null
