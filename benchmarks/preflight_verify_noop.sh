#!/usr/bin/env bash
# Wall time of the preflight and verify layers on a converged simulated node:
#   benchmarks/preflight_verify_noop.sh [runs]
# Starts its own node (a systemd container of the Debian 12 simulated-GPU
# image, reached through Podman like `make demo`), converges once, then times
# `site.yml --tags preflight,verify` runs that must report 0 changed. Prints
# each run and the median. The Podman connection costs far more per task than
# SSH with pipelining does; compare runs on the same machine only.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=../tests/harness/env.sh
. "$root/tests/harness/env.sh"
runs=${1:-3}
node=gpufleet-bench-matrix
work=$(mktemp -d)
trap 'podman rm -f "$node" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

image=$("$root/tests/harness/images.sh" gpusim debian12)
"$root/tests/harness/node.sh" up "$node" "$image"
mkdir -p "$work/inventory/group_vars"
cat >"$work/inventory/hosts.yml" <<YAML
all:
  children:
    gpu_nodes:
      hosts:
        $node:
YAML
cat >"$work/inventory/group_vars/gpu_nodes.yml" <<YAML
ansible_connection: containers.podman.podman
ansible_python_interpreter: /usr/bin/python3
ansible_become: false
driver_version: "550.127.05"
preflight_cuda_versions: ["12.4"]
verify_report_dir: $work/reports
YAML

cd "$root"
play() { ansible-playbook playbooks/site.yml -i "$work/inventory" --tags preflight,verify; }
play >/dev/null
times=()
for run in $(seq "$runs"); do
  start=$(date +%s%N)
  out=$(play)
  end=$(date +%s%N)
  changed=$(sed -n 's/.*changed=\([0-9]*\).*/\1/p' <<<"$out" | tail -1)
  [ "$changed" = 0 ] || die "run $run changed $changed task(s): not a no-op"
  times+=("$(( (end - start) / 1000000 ))")
  printf 'run %s: %d ms (0 changed)\n' "$run" "${times[-1]}"
done
printf '%s\n' "${times[@]}" | sort -n | awk -v load="$(cut -d' ' -f1-3 /proc/loadavg)" \
  '{a[NR]=$1} END {printf "median of %d: %d ms (load average %s)\n", NR, a[int((NR+1)/2)], load}'
