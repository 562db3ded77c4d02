# shellcheck shell=bash
# Sourced by fresh_converge.sh and site_noop.sh: a simulated Debian 13 node
# declared like the verify scenario's (every layer of site.yml, installed
# from the signed local mirror), and the test ground's preparation of it.
#
#   sim_stack_inventory DIR NODE...   DIR/hosts.yml and DIR/group_vars/gpu_nodes.yml
#   sim_stack_node NODE DIR           a fresh node, booted, its simulated GPUs
#                                     running the pinned driver (not timed)
#   sim_stack_access NODE DIR         (ssh) the node's sshd on its port, with
#                                     this run's key; part of sim_stack_node,
#                                     again for a node kept from an earlier run
# Node names start with $BENCH_PREFIX (default gpufleet-bench-).
#
# BENCH_TRANSPORT picks how Ansible reaches the node, for every play of a
# run alike (preparation, the timed plays and the plays they are compared
# with):
#   ssh (default)  SSH with pipelining and Ansible's default ControlPersist,
#                  as fleets run: the node's own sshd on 127.0.0.1, port
#                  BENCH_SSH_PORT_BASE (default 2222) + the node's position
#                  in sim_stack_inventory. The nodes share the host's network
#                  (node.sh), where a host's own sshd usually has port 22.
#   podman         the containers.podman.podman connection: no pipelining, a
#                  `podman mount` and several `podman exec` per module call,
#                  so every task costs far more than over SSH.
BENCH_PREFIX=${BENCH_PREFIX:-gpufleet-bench-}
export PATH="$GPUFLEET_VENV/bin:$PATH" ANSIBLE_COLLECTIONS_PATH="$GPUFLEET_ROOT/build/collections" ANSIBLE_NOCOLOR=1
mirror_pins
[ -n "$GPUFLEET_MIRROR_FINGERPRINT" ] || die "the local mirror is not running: make mirror"
BENCH_TRANSPORT=${BENCH_TRANSPORT:-ssh}
# BENCH_IMAGE picks the node image: gpusim (default; no kernel, so nothing
# builds a kernel module) or kernel (Debian's kernel and, once the driver
# role installs them, its headers: the driver's DKMS build really runs).
BENCH_IMAGE=${BENCH_IMAGE:-gpusim}
case "$BENCH_IMAGE" in
  gpusim | kernel) ;;
  *) die "BENCH_IMAGE='$BENCH_IMAGE': expected gpusim or kernel" ;;
esac
BENCH_SSH_PORT_BASE=${BENCH_SSH_PORT_BASE:-2222}
# BENCH_TRANSPORT_NAME: for the summary lines of the scripts that source this.
# shellcheck disable=SC2034
case "$BENCH_TRANSPORT" in
  ssh) BENCH_TRANSPORT_NAME="ssh (pipelining)" ;;
  podman) BENCH_TRANSPORT_NAME="podman (no pipelining)" ;;
  *) die "BENCH_TRANSPORT='$BENCH_TRANSPORT': expected ssh or podman" ;;
esac
if ! [[ "$BENCH_SSH_PORT_BASE" =~ ^[1-9][0-9]{0,4}$ ]] || [ "$BENCH_SSH_PORT_BASE" -gt 65000 ]; then
  die "BENCH_SSH_PORT_BASE='$BENCH_SSH_PORT_BASE': expected a TCP port number (1-65000)"
fi
# What ssh is told besides Ansible's defaults (which keep -C, ControlMaster
# and ControlPersist=60s): every fresh node has new host keys on a reused
# port, so there is nothing to check them against.
BENCH_SSH_OPTS=(-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR)

sim_stack_inventory() {
  local dir=$1 node port=$BENCH_SSH_PORT_BASE
  shift
  mkdir -p "$dir/group_vars"
  : >"$dir/ssh-ports"
  {
    printf 'all:\n  children:\n    gpu_nodes:\n      hosts:\n'
    for node in "$@"; do
      printf '        %s:\n' "$node"
      if [ "$BENCH_TRANSPORT" = ssh ]; then
        printf '          ansible_port: %s\n' "$port"
        printf '%s %s\n' "$node" "$port" >>"$dir/ssh-ports"
        port=$((port + 1))
      fi
    done
  } >"$dir/hosts.yml"
  if [ "$BENCH_TRANSPORT" = ssh ]; then
    # A key of this run only, gone with its work directory.
    [ -f "$dir/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C gpufleet-bench -f "$dir/id_ed25519"
    # The control sockets of this run only: another run's node on the same
    # port is another host.
    cat >"$dir/group_vars/gpu_nodes.yml" <<YAML
ansible_connection: ansible.builtin.ssh
ansible_host: 127.0.0.1
ansible_user: root
ansible_ssh_private_key_file: $dir/id_ed25519
ansible_ssh_common_args: "${BENCH_SSH_OPTS[*]}"
ansible_ssh_pipelining: true
ansible_control_path_dir: $dir/cp
YAML
  else
    echo "ansible_connection: containers.podman.podman" >"$dir/group_vars/gpu_nodes.yml"
  fi
  cat >>"$dir/group_vars/gpu_nodes.yml" <<YAML
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
driver_distribution_key_fingerprint: $GPUFLEET_MIRROR_FINGERPRINT
container_toolkit_apt_repo_url: $GPUFLEET_MIRROR_URL/libnvidia-container/stable/deb
container_toolkit_gpg_key_url: $GPUFLEET_MIRROR_URL/keys/gpufleet-mirror.asc
container_toolkit_gpg_key_fingerprint: $GPUFLEET_MIRROR_FINGERPRINT
container_toolkit_package_set: base
container_runtime_engine: containerd
container_runtime_install: true
container_runtime_cdi: true
crictl_download_url: $GPUFLEET_MIRROR_URL/files/cri-tools
# The mirror's own build, pinned as a site pins its own; plain HTTP on loopback.
crictl_checksums: $GPUFLEET_CRICTL_CHECKSUMS
crictl_allow_insecure_transport: true
container_runtime_allow_insecure_transport: true
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
  image=$("$GPUFLEET_ROOT/tests/harness/images.sh" "$BENCH_IMAGE" debian13)
  podman rm -f "$node" >/dev/null 2>&1 || true
  "$GPUFLEET_ROOT/tests/harness/node.sh" up "$node" "$image"
  [ "$BENCH_TRANSPORT" != ssh ] || sim_stack_access "$node" "$dir"
  # The preparation goes over the run's transport too: it only copies files
  # and runs commands.
  ansible-playbook -i "$dir/hosts.yml" --limit "$node" \
    "$GPUFLEET_ROOT/extensions/molecule/_shared/sim-node.yml" >"$dir/prepare-$node.log" 2>&1 \
    || { tail -30 "$dir/prepare-$node.log"; die "preparing $node failed"; }
}

sim_stack_access() {
  local node=$1 dir=$2 port try
  port=$(awk -v n="$node" '$1 == n { print $2 }' "$dir/ssh-ports")
  [ -n "$port" ] || die "$node is not in $dir/hosts.yml (sim_stack_inventory first)"
  # The port first, so that sshd never tries port 22, usually the host's own.
  podman exec -i "$node" sh -c "mkdir -p /etc/ssh/sshd_config.d && cat >/etc/ssh/sshd_config.d/gpufleet-bench.conf" <<CONF
# gpufleet benchmark: the node shares the host's network; port 22 is usually the host's.
Port $port
ListenAddress 127.0.0.1
PermitRootLogin prohibit-password
CONF
  # A node kept from an earlier run (site_noop.sh KEEP=1) holds the port itself.
  podman exec "$node" systemctl stop ssh.service ssh.socket >/dev/null 2>&1 || true
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    die "127.0.0.1:$port is taken (another benchmark's node?): set BENCH_SSH_PORT_BASE to a free range"
  fi
  # From the node's own Debian sources. Its package lists are refreshed for
  # it, on every node alike, before any clock starts.
  if ! podman exec "$node" test -x /usr/sbin/sshd; then
    podman exec -e DEBIAN_FRONTEND=noninteractive "$node" sh -c \
      'apt-get update -q && apt-get install -y -q --no-install-recommends openssh-server' \
      >"$dir/sshd-$node.log" 2>&1 || { tail -20 "$dir/sshd-$node.log"; die "installing openssh-server in $node failed"; }
  fi
  podman exec -i "$node" sh -c 'install -d -m 0700 /root/.ssh && cat >/root/.ssh/authorized_keys && chmod 0600 /root/.ssh/authorized_keys' \
    <"$dir/id_ed25519.pub"
  # Socket activation would listen where ssh.socket says, not on the port above.
  if podman exec "$node" systemctl cat ssh.socket >/dev/null 2>&1; then
    podman exec "$node" systemctl disable --now ssh.socket >/dev/null 2>&1
  fi
  podman exec "$node" systemctl enable ssh.service >/dev/null 2>&1
  podman exec "$node" systemctl restart ssh.service
  for try in $(seq 30); do
    ssh -i "$dir/id_ed25519" -p "$port" "${BENCH_SSH_OPTS[@]}" -o BatchMode=yes -o ConnectTimeout=5 \
      -o ControlMaster=no root@127.0.0.1 true 2>/dev/null && return 0
    [ "$try" -lt 30 ] && sleep 1
  done
  podman exec "$node" journalctl -u ssh.service -n 20 --no-pager >&2 || true
  die "$node does not answer ssh on 127.0.0.1:$port"
}

# Seconds since $1 (date +%s.%N), two decimals.
since() { awk -v s="$1" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }'; }

median() { sort -n | awk '{a[NR]=$1} END {printf "%.2f", (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
