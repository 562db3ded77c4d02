#!/usr/bin/env bash
# What verify's workload layer adds, per engine, on the simulated nodes:
#   benchmarks/workload_check.sh [runs]
# Brings up the workload Molecule scenario's nodes (containerd 1.7 with a MIG
# layout, containerd 2.2, Docker; created, prepared and converged), then times
# verify alone on each node, with verify_workload off and on, alternating,
# `runs` times each (default 5). Prints the medians and their difference per
# engine: the cost of the workload layer there (its containers, the archive
# check, the judgement). KEEP=1 leaves the nodes up; otherwise they are
# destroyed at the end. Compare figures from the same machine only.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=../tests/harness/env.sh
. "$root/tests/harness/env.sh"
runs=${1:-5}
export PATH="$GPUFLEET_VENV/bin:$PATH" ANSIBLE_COLLECTIONS_PATH="$GPUFLEET_ROOT/build/collections" ANSIBLE_NOCOLOR=1
mirror_pins
[ -n "$GPUFLEET_MIRROR_FINGERPRINT" ] || die "the local mirror is not running: make mirror"
scenario=workload
config=(--base-config .config/molecule/config.yml --base-config "extensions/molecule/$scenario/platforms.podman.yml")
cd "$root"
[ "${KEEP:-}" = 1 ] || trap 'molecule "${config[@]}" destroy -s "$scenario" >/dev/null 2>&1 || true' EXIT
molecule "${config[@]}" converge -s "$scenario" >/dev/null 2>&1 || die "the $scenario scenario did not converge"
# Molecule keeps the scenario's inventory and ansible.cfg in its ephemeral
# directory (the newest one of this scenario).
ephemeral=
for candidate in "${ANSIBLE_LOCAL_TEMP:-$HOME/.ansible/tmp}"/molecule.*."$scenario"; do
  if [ -d "$candidate" ] && { [ -z "$ephemeral" ] || [ "$candidate" -nt "$ephemeral" ]; }; then
    ephemeral=$candidate
  fi
done
[ -f "$ephemeral/inventory/ansible_inventory.yml" ] || die "no inventory of the $scenario scenario found"
export ANSIBLE_CONFIG=$ephemeral/ansible.cfg
inventory=$ephemeral/inventory/ansible_inventory.yml

# Milliseconds of one verify-only run on one host (0 changed required).
timed() {
  local host=$1 workload=$2 start end out changed
  start=$(date +%s%N)
  out=$(ansible-playbook "extensions/molecule/$scenario/verify-only.yml" -i "$inventory" --limit "$host" \
    -e verify_fail_on=error -e "verify_workload=$workload")
  end=$(date +%s%N)
  changed=$(sed -n 's/.*changed=\([0-9]*\).*/\1/p' <<<"$out" | tail -1)
  # Switching the layer on and off changes the reports (three files) and
  # nothing else: no image is imported while timing.
  [ "$changed" -le 3 ] || die "verify on $host (workload $workload) changed $changed task(s): more than its reports"
  echo $(((end - start) / 1000000))
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

for host in workload-containerd17 workload-containerd2 workload-docker; do
  timed "$host" true >/dev/null   # the first run of a kind settles the reports
  timed "$host" false >/dev/null
  on=() off=()
  for _ in $(seq "$runs"); do
    off+=("$(timed "$host" false)")
    on+=("$(timed "$host" true)")
  done
  off_ms=$(printf '%s\n' "${off[@]}" | median)
  on_ms=$(printf '%s\n' "${on[@]}" | median)
  containers=$(podman exec "$host" python3 -c 'import json; r = json.load(open("/var/lib/gpufleet/verify.json")); print(len(next(c for c in r["checks"] if c["layer"] == "workload")["observed"]["runs"]))')
  printf '%-24s verify without the workload layer %6d ms, with it %6d ms: +%d ms for %s container(s) (median of %d)\n' \
    "$host" "$off_ms" "$on_ms" "$((on_ms - off_ms))" "$containers" "$runs"
done
printf 'load average %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
