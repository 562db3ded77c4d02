#!/usr/bin/env bash
# make demo: the main job on the embedded default. A simulated 8 x A100 node
# (Debian 12, systemd, simulated NVML), then playbooks/site.yml against it.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(dirname "$0")/env.sh"
here=$(cd "$(dirname "$0")" && pwd)

image=$("$here/images.sh" gpusim debian12)
"$here/node.sh" up gpufleet-demo-node "$image"
# The node runs the driver the inventory pins (driver_version in
# inventory/examples/simulated/group_vars), as after the driver role's reboot
# into it: a container cannot load a kernel module. nvidia-ctk finds the
# driver by its versioned library names, as a driver install lays them out;
# the simulated library stands in for them.
podman exec gpufleet-demo-node sh -c '
  set -e
  nvml-simctl set driver_version=535.261.03 cuda_driver_version=12020
  # nvidia-persistenced needs device nodes the simulated GPUs lack: a stand-in.
  mkdir -p /etc/systemd/system/nvidia-persistenced.service.d
  printf "[Service]\nType=simple\nExecStart=\nExecStart=/bin/sleep infinity\nExecStopPost=\n" \
    >/etc/systemd/system/nvidia-persistenced.service.d/gpufleet-sim.conf
  cd /usr/local/lib/x86_64-linux-gnu
  real=$(readlink -f libnvidia-ml.so.1)
  if [ "$real" != "$PWD/libnvidia-ml.so.535.261.03" ]; then
    mv "$real" libnvidia-ml.so.535.261.03; ln -sfn libnvidia-ml.so.535.261.03 libnvidia-ml.so.1; ldconfig
  fi'
GPUFLEET_MIRROR_FINGERPRINT=$(python3 "$here/mirror.py" status | sed -n 's/^key=//p')
export GPUFLEET_MIRROR_FINGERPRINT
cd "$GPUFLEET_ROOT"
# The driver layer first: Debian 12's packages point libnvidia-ml.so.1 at the
# real library through an alternative, which nvidia-ctk (the cdi layer) would
# load and find no kernel module; the simulated library stands in for it, as
# it stands in for the loaded driver.
ansible-playbook playbooks/site.yml -i inventory/examples/simulated --tags preflight,facts,driver "$@"
podman exec gpufleet-demo-node sh -c '
  link=/etc/alternatives/nvidia--libnvidia-ml.so.1-x86_64-linux-gnu
  if [ -L "$link" ]; then ln -sfn /usr/local/lib/x86_64-linux-gnu/libnvidia-ml.so.1 "$link"; ldconfig; fi'
# Then the whole site.yml. Reports (per-host JSON, fleet-report.html/.md) land
# in tests/output/demo-reports.
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
log "fleet report: $GPUFLEET_ROOT/tests/output/demo-reports/fleet-report.html (and fleet-report.md, gpufleet-demo-node.json)"
