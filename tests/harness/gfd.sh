#!/usr/bin/env bash
# Print the path of NVIDIA's gpu-feature-discovery, built from the
# k8s-device-plugin line of go-tools.txt (cached by go-build.sh like the other
# Go tools): the real judge of the node_labels role's labels, in the unit
# tests and in the node_labels scenario.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=$(awk '$1 == "k8s-device-plugin" { print $3; exit }' "$here/go-tools.txt")
[ -n "$version" ] || { echo "gfd.sh: no k8s-device-plugin line in go-tools.txt" >&2; exit 1; }
dir=$("$here/go-build.sh" k8s-device-plugin "$version" | tail -n 1)
echo "$dir/gpu-feature-discovery"
