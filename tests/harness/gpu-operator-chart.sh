#!/usr/bin/env bash
# Print the directory of NVIDIA's GPU Operator Helm chart (its templates,
# CRDs and the node-feature-discovery subchart it vendors), the judge of the
# values playbooks/operator_values.yml writes. NVIDIA's chart repository and
# GitHub cannot be reached here; the Go module proxy serves the operator's
# repository as a module, chart included, at one pseudo-version only (its
# tags are not served): the commit below, of 2025-09-17. `go mod download`
# checks the zip against the checksum database; it is kept in the Go module
# cache under $GPUFLEET_CACHE like the Go tools' sources.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(dirname "$0")/env.sh"
here=$(cd "$(dirname "$0")" && pwd)
module=github.com/NVIDIA/gpu-operator
version=v0.0.0-20250917190837-d73a0086a6ba
go=$("$here/ensure-go.sh")
go_env 0 "-modcacherw"
src=$("$go" mod download -json "$module@$version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
[ -f "$src/deployments/gpu-operator/Chart.yaml" ] || die "$module@$version carries no deployments/gpu-operator chart"
echo "$src/deployments/gpu-operator"
