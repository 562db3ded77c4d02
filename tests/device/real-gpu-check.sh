#!/usr/bin/env bash
# Read-only check of the collection's NVML reading on a node with a real NVIDIA
# GPU (see docs/test-ground.md, "Checked on a real GPU").
#
#   tests/device/real-gpu-check.sh OUTDIR [WHEELDIR]
#
# WHEELDIR: wheels of ansible-core and its needs, installed into a scratch
# directory when the node has no ansible (then nvml_info and driver_info also
# run as real Ansible modules). With PyTorch on the node, a CUDA process holds
# 256 MiB while the GPUs are read, so the process list is not empty.
# The report also holds every GPU's health read three ways (our binding, pynvml
# when importable -- put nvidia-ml-py's pynvml.py on PYTHONPATH on a node
# without network -- and nvidia-smi) and what the health reads add to
# nvml_info's collector (health.nvml_info_added_by_health).
# Exit status: nvml_real_check.py's (1 on any mismatch).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${1:?usage: $0 OUTDIR [WHEELDIR]}
wheels=${2:-}
py=${PYTHON:-python3}
work=$(mktemp -d)
mkdir -p "$out"

if [ -n "$wheels" ]; then
  "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$work/site" "$wheels"/*.whl || exit 2
  export PYTHONPATH="$work/site${PYTHONPATH:+:$PYTHONPATH}"
fi

holder=
expect=()
if "$py" -c 'import torch' 2>/dev/null; then
  "$py" -c 'import time, torch; x = torch.empty(256 << 20, dtype=torch.uint8, device="cuda"); time.sleep(300)' &
  holder=$!
  expect=(--expect-pid "$holder")
  for _ in $(seq 60); do
    nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -qx "$holder" && break
    sleep 1
  done
fi

if "$py" -c 'import ansible.cli.adhoc' 2>/dev/null; then
  mkdir -p "$work/collections/ansible_collections/gpufleet"
  ln -s "$repo" "$work/collections/ansible_collections/gpufleet/nvidia"
  for module in nvml_info driver_info; do
    args=
    [ "$module" = nvml_info ] && args=gather_mig_profiles=true
    ANSIBLE_COLLECTIONS_PATH=$work/collections ANSIBLE_STDOUT_CALLBACK=minimal ANSIBLE_LOAD_CALLBACK_PLUGINS=1 \
      ANSIBLE_PYTHON_INTERPRETER=$(command -v "$py") ANSIBLE_LOCALHOST_WARNING=0 LC_ALL=C.UTF-8 \
      "$py" -m ansible.cli.adhoc localhost -i localhost, -c local -m "gpufleet.nvidia.$module" -a "$args" \
      >"$out/ansible-$module.json"
    echo "ansible gpufleet.nvidia.$module: rc $?"
  done
fi

"$py" "$here/nvml_real_check.py" --repo "$repo" "${expect[@]}" --ansible-json "$out/ansible-nvml_info.json" \
  --output "$out/report.json" --redacted-output "$out/report-redacted.json" >/dev/null
rc=$?
[ -n "$holder" ] && kill "$holder"
exit "$rc"
