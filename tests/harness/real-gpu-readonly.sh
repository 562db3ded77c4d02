#!/usr/bin/env bash
# Read-only check of nvml_info on a real GPU machine (the device tool's
# machine): run the module exactly as Ansible would, save its facts to $OUT.
# Nothing here changes the GPU: no MIG, reset, persistence, clock, ECC or
# power calls — nvml_info only queries.
#   ansible-core comes as a carried wheel in .whl/ (no network there).
set -euo pipefail
out=${OUT:-/tmp/real-gpu}
mkdir -p "$out"
site=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --target "$site" .whl/ansible_core-*.whl
mkdir -p "$site/ansible_collections/gpufleet"
ln -sfn "$PWD" "$site/ansible_collections/gpufleet/nvidia"
export PYTHONPATH="$site"
echo '{"ANSIBLE_MODULE_ARGS": {"gather_mig_profiles": true}}' >"$site/args.json"
python3 -m ansible_collections.gpufleet.nvidia.plugins.modules.nvml_info "$site/args.json" >"$out/nvml_info_real.json" \
  || { cat "$out/nvml_info_real.json"; exit 1; }
nvidia-smi -q >"$out/nvidia-smi-q.txt" 2>&1 || true
nvidia-smi mig -lgip >"$out/nvidia-smi-mig-lgip.txt" 2>&1 || true
nvidia-smi mig -lgipp >"$out/nvidia-smi-mig-lgipp.txt" 2>&1 || true
python3 -m json.tool "$out/nvml_info_real.json" | head -80
