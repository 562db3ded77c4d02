#!/usr/bin/env bash
# make demo: the main job on the embedded default. A simulated 8 x A100 node
# (Debian 12, systemd, simulated NVML), then playbooks/site.yml against it.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(dirname "$0")/env.sh"
here=$(cd "$(dirname "$0")" && pwd)

image=$("$here/images.sh" gpusim debian12)
"$here/node.sh" up gpufleet-demo-node "$image"
# nvidia-ctk finds the driver by its versioned library names, as a driver
# install lays them out; the simulated library stands in for them.
podman exec gpufleet-demo-node sh -c '
  set -e; cd /usr/local/lib/x86_64-linux-gnu
  version=$(nvml-simctl show | python3 -c "import json,sys; print(json.load(sys.stdin)[\"system\"][\"driver_version\"])")
  [ -L libnvidia-ml.so.1 ] || { mv libnvidia-ml.so.1 "libnvidia-ml.so.$version"; ln -s "libnvidia-ml.so.$version" libnvidia-ml.so.1; ldconfig; }'
GPUFLEET_MIRROR_FINGERPRINT=$(python3 "$here/mirror.py" status | sed -n 's/^key=//p')
export GPUFLEET_MIRROR_FINGERPRINT
cd "$GPUFLEET_ROOT"
# Reports (per-host JSON, fleet-report.html/.md) land in tests/output/demo-reports.
ansible-playbook playbooks/site.yml -i inventory/examples/simulated \
  -e verify_report_dir="$GPUFLEET_ROOT/tests/output/demo-reports" "$@"
log "the running containerd, as crictl info reports it:"
podman exec gpufleet-demo-node crictl info | python3 -c '
import json, sys
config = json.load(sys.stdin)["config"]
for name, runtime in sorted(config["containerd"]["runtimes"].items()):
    default = " (default)" if name == config["containerd"]["defaultRuntimeName"] else ""
    print("  runtime {0}{1}: {2}".format(name, default, (runtime.get("options") or {}).get("BinaryName") or "runc"))
print("  CDI: " + ("on, specs in " + ", ".join(config.get("cdiSpecDirs") or []) if config.get("enableCDI")
                  else "not in this containerd (1.7+); devices come through the nvidia runtime"))' >&2
