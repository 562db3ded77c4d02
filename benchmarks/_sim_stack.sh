# shellcheck shell=bash
# Sourced by fresh_converge.sh and site_noop.sh: a simulated Debian 13 node
# declared like the verify scenario's (every layer of site.yml, installed
# from the signed local mirror), and the test ground's preparation of it.
#
#   sim_stack_inventory DIR NODE...   DIR/hosts.yml and DIR/group_vars/gpu_nodes.yml
#   sim_stack_node NODE DIR           a fresh node, booted, its simulated GPUs
#                                     running the pinned driver (not timed)
# Node names start with $BENCH_PREFIX (default gpufleet-bench-).

BENCH_PREFIX=${BENCH_PREFIX:-gpufleet-bench-}
export PATH="$GPUFLEET_VENV/bin:$PATH" ANSIBLE_COLLECTIONS_PATH="$GPUFLEET_ROOT/build/collections" ANSIBLE_NOCOLOR=1
GPUFLEET_MIRROR_FINGERPRINT=$(python3 "$GPUFLEET_ROOT/tests/harness/mirror.py" status | sed -n 's/^key=//p')
[ -n "$GPUFLEET_MIRROR_FINGERPRINT" ] || die "the local mirror is not running: make mirror"
export GPUFLEET_MIRROR_FINGERPRINT

sim_stack_inventory() {
  local dir=$1 node
  shift
  mkdir -p "$dir/group_vars"
  {
    printf 'all:\n  children:\n    gpu_nodes:\n      hosts:\n'
    for node in "$@"; do printf '        %s:\n' "$node"; done
  } >"$dir/hosts.yml"
  cat >"$dir/group_vars/gpu_nodes.yml" <<YAML
ansible_connection: containers.podman.podman
ansible_python_interpreter: /usr/bin/python3
ansible_become: false
gpufleet_test_root: $GPUFLEET_ROOT
gpufleet_test_mirror_url: $GPUFLEET_MIRROR_URL
# The simulated GPUs (8 x A100-SXM4-40GB) run the pinned driver, as after
# the driver role's reboot into it.
nvml_sim_node: dgx-a100-8x40gb
nvml_sim_driver: {version: "550.163.01", cuda: 12040}
nvml_sim_driver_files: true
preflight_cuda_versions: ["12.2"]
driver_source: distribution
driver_version: "550.163.01"
driver_kernel_module: proprietary
driver_distribution_mirror_url: $GPUFLEET_MIRROR_URL/debian
driver_distribution_key_url: $GPUFLEET_MIRROR_URL/keys/gpufleet-mirror.asc
container_toolkit_apt_repo_url: $GPUFLEET_MIRROR_URL/libnvidia-container/stable/deb
container_toolkit_gpg_key_url: $GPUFLEET_MIRROR_URL/keys/gpufleet-mirror.asc
container_toolkit_gpg_key_fingerprint: $GPUFLEET_MIRROR_FINGERPRINT
container_toolkit_package_set: base
container_runtime_engine: containerd
container_runtime_install: true
container_runtime_cdi: true
cdi_format: yaml
crictl_download_url: $GPUFLEET_MIRROR_URL/files/cri-tools
crictl_checksum_source: release
# MIG declared, and declared off: in a container nvidia-ctk cannot list MIG
# devices, so the CDI layer runs on whole GPUs.
mig_label: all-disabled
mig_config:
  version: v1
  mig-configs:
    all-disabled:
      - devices: all
        mig-enabled: false
device_plugin_config: true
device_plugin_time_slicing: [{name: nvidia.com/gpu, replicas: 4}]
verify_report_dir: $dir/reports
YAML
}

sim_stack_node() {
  local node=$1 dir=$2 image
  image=$("$GPUFLEET_ROOT/tests/harness/images.sh" gpusim debian13)
  podman rm -f "$node" >/dev/null 2>&1 || true
  "$GPUFLEET_ROOT/tests/harness/node.sh" up "$node" "$image"
  ansible-playbook -i "$dir/hosts.yml" --limit "$node" \
    "$GPUFLEET_ROOT/extensions/molecule/_shared/sim-node.yml" >"$dir/prepare-$node.log" 2>&1 \
    || { tail -30 "$dir/prepare-$node.log"; die "preparing $node failed"; }
}

# Seconds since $1 (date +%s.%N), two decimals.
since() { awk -v s="$1" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }'; }

median() { sort -n | awk '{a[NR]=$1} END {printf "%.2f", (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
