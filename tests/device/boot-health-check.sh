#!/usr/bin/env bash
# Read-only: gpufleet-verify-boot's driver and health checks on a node with a
# real NVIDIA GPU, installed as the verify role installs it (the command and
# the node runtime it imports), judging NVML's health fields, the real kernel
# log (/dev/kmsg, without blocking) and systemd's view of the daemons.
#
#   tests/device/boot-health-check.sh OUTDIR
#
# Writes OUTDIR/report.json (the boot check's report), OUTDIR/gpufleet-health.prom
# (the node-exporter textfile) and OUTDIR/stdout.txt. Nothing on the node
# changes: no MIG, CDI or persistence check is configured, and the boot check
# calls no NVML entry point that sets anything.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${1:?usage: $0 OUTDIR}
py=${PYTHON:-python3}
work=$(mktemp -d)
# The node runtime's layout (gpufleet.nvidia.node_runtime): the files the
# boot check imports, as a package in a versioned directory that the role
# writes into the command. The runtime is a subset of module_utils
# (build_runtime() in plugins/action/node_runtime.py); this copies all of it,
# since there is no Ansible on this machine to compute the subset.
runtime="$work/lib/gpufleet/device-check"
mkdir -p "$out" "$work/sbin" "$runtime/gpufleet_runtime"
cp -r "$repo/plugins/module_utils/." "$runtime/gpufleet_runtime/"
touch "$runtime/gpufleet_runtime/__init__.py"
sed "s|@GPUFLEET_NODE_RUNTIME@|$runtime|" "$repo/roles/verify/files/gpufleet-verify-boot" >"$work/sbin/gpufleet-verify-boot"
cat > "$work/boot.json" <<JSON
{"report": "$out/report.json",
 "driver": {"version": "", "branch": ""},
 "health": {"policy": {}, "gpu_count": null, "kernel_log": "/dev/kmsg",
            "textfile": "$out/gpufleet-health.prom", "persistenced": false, "fabricmanager": false}}
JSON
"$py" "$work/sbin/gpufleet-verify-boot" --config "$work/boot.json" >"$out/stdout.txt" 2>&1
rc=$?
echo "rc=$rc" >>"$out/stdout.txt"
cat "$out/stdout.txt"
exit "$rc"
