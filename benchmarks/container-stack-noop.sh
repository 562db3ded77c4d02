#!/usr/bin/env bash
# How long the container stack layers take when there is nothing to do.
#
# Runs site.yml's container_toolkit, container_runtime, cdi and crictl layers
# against the demo node (`make demo` first), once to converge, then RUNS more
# times, and prints each run's wall time and changed count. A no-op run must
# report changed=0 and should stay in the seconds: the roles skip apt when the
# packages are at the pinned version, skip downloads when crictl is at its
# release, compare configs in memory and restart nothing.
#
#   benchmarks/container-stack-noop.sh [RUNS]      (default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=../tests/harness/env.sh
. tests/harness/env.sh
export PATH="$GPUFLEET_VENV/bin:$PATH" ANSIBLE_COLLECTIONS_PATH="$GPUFLEET_ROOT/build/collections"
runs=${1:-5}
podman container exists gpufleet-demo-node || die "no demo node: run 'make demo' first"
mirror_pins

play() {
  local start end out
  start=$(date +%s.%N)
  out=$(ansible-playbook playbooks/site.yml -i inventory/examples/simulated \
    --tags container_toolkit,container_runtime,cdi,crictl 2>&1) || { echo "$out" >&2; die "site.yml failed"; }
  end=$(date +%s.%N)
  printf '%6.1fs  %s\n' "$(echo "$end - $start" | bc)" "$(echo "$out" | grep -o 'changed=[0-9]*' | head -1)"
}

echo "converge:"
play
echo "no-op runs:"
for _ in $(seq "$runs"); do play; done
