#!/usr/bin/env bash
# make demo: the main job on the embedded default. A simulated 8 x A100 node
# (Debian 12, systemd, simulated NVML), then playbooks/site.yml against it.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(dirname "$0")/env.sh"
here=$(cd "$(dirname "$0")" && pwd)

image=$("$here/images.sh" gpusim debian12)
"$here/node.sh" up gpufleet-demo-node "$image"
cd "$GPUFLEET_ROOT"
# Reports (per-host JSON, fleet-report.html/.md) land in tests/output/demo-reports.
ansible-playbook playbooks/site.yml -i inventory/examples/simulated \
  -e verify_report_dir="$GPUFLEET_ROOT/tests/output/demo-reports" "$@"
