#!/usr/bin/env bash
# make demo: the main job on the embedded default, on a current stack. A
# simulated 8 x A100 node (Debian 13, systemd, simulated NVML), then
# playbooks/site.yml against it, which also installs Debian 13's containerd
# (container_runtime_install) and wires it. The demo fails when Ansible printed a warning: a newcomer reads one as
# "this does not work yet", so each is a bug of ours to fix.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(dirname "$0")/env.sh"
here=$(cd "$(dirname "$0")" && pwd)
inventory=$GPUFLEET_ROOT/inventory/examples/simulated

# Every layer installs from the local mirror: without it the first download
# fails with "Connection refused", which does not say what to start.
if ! python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=10)' \
  "$GPUFLEET_MIRROR_URL/keys/gpufleet-mirror.asc" 2>/dev/null; then
  die "the local mirror does not answer at $GPUFLEET_MIRROR_URL: start it with 'make mirror SET=demo' (make demo does), then run this again"
fi

# Whatever the playbooks print also goes to this log, which is searched for
# warnings at the end.
log_file=$GPUFLEET_ROOT/tests/output/demo.log
mkdir -p "$(dirname "$log_file")"
: >"$log_file"
# Piped into tee, Ansible would drop its colours on a terminal.
[ -t 1 ] && export ANSIBLE_FORCE_COLOR=1
playbook() { ansible-playbook "$@" 2>&1 | tee -a "$log_file"; }

# The driver the inventory pins, from the newest branch the mirror carries
# (Debian 13's); the simulated NVML reports it and its CUDA version.
driver=$(sed -n 's/^driver_version: "\(.*\)"$/\1/p' "$inventory/group_vars/gpu_nodes.yml")
case "$driver" in
  550.*) cuda=12040 ;;
  *) die "demo.sh knows no CUDA version for driver_version '$driver' (inventory/examples/simulated/group_vars/gpu_nodes.yml): add its branch here" ;;
esac

image=$("$here/images.sh" gpusim debian13)
# Privileged, as the `workload` scenario's nodes: the driver facade makes
# device nodes and mounts over /proc, and the workload check's containers run
# under runc inside the node; runc reads the cgroup mounts against
# /proc/self/cgroup (its own cgroup namespace), and overlayfs cannot stack on
# the node's overlay root (containerd's storage on a tmpfs).
timed "demo: node" "$here/node.sh" up gpufleet-demo-node "$image" \
  --privileged --cgroupns=private --tmpfs=/var/lib/containerd:rw,exec,size=2g
# The mirror's key and tarball digests, which the simulated inventory pins.
mirror_pins
cd "$GPUFLEET_ROOT"
log "the node's simulated driver $driver; its container engine comes with site.yml: Debian 13's containerd (container_runtime_install)"
timed "demo: node's simulated driver" playbook "$here/demo-node.yml" -i "$inventory" \
  -e gpufleet_test_root="$GPUFLEET_ROOT" -e demo_driver_version="$driver" -e demo_cuda_version="$cuda"
# The whole site.yml, once (demo-node.yml's apt hook keeps the simulated NVML
# library in place of the driver package's). Reports (per-host JSON,
# fleet-report.html/.md) land in tests/output/demo-reports.
timed "demo: site.yml" playbook playbooks/site.yml -i "$inventory" \
  -e verify_report_dir="$GPUFLEET_ROOT/tests/output/demo-reports" "$@"
log "the running containerd, as crictl info reports it:"
podman exec gpufleet-demo-node crictl info | python3 -c '
import json, sys
config = json.load(sys.stdin)["config"]
containerd = config["containerd"]
for name, runtime in sorted(containerd["runtimes"].items()):
    default = " (default)" if name == containerd["defaultRuntimeName"] else ""
    print("  runtime {0}{1}: {2}".format(name, default, (runtime.get("options") or {}).get("BinaryName") or "runc"))
print("  CDI: " + ("on, specs in " + ", ".join(config.get("cdiSpecDirs") or []) if config.get("enableCDI")
                  else "off; devices come through the nvidia runtime"))' >&2
log "fleet report: $GPUFLEET_ROOT/tests/output/demo-reports/fleet-report.html (and fleet-report.md, gpufleet-demo-node.json)"
# Every [WARNING] fails, and a [DEPRECATION WARNING] from one of our files;
# one a dependency's code raises (a collection of the `ansible` package) is
# named and tolerated (warning-gate.py; docs/test-ground.md lists those seen).
if ! python3 "$here/warning-gate.py" "$log_file" "$GPUFLEET_ROOT" >&2; then
  die "the demo converged, but Ansible printed the warnings above (whole output: $log_file); each is a bug to fix"
fi
log "no Ansible warning of ours (whole output: $log_file)"
