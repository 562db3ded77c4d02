#!/usr/bin/env bash
# Run Molecule scenarios (all under extensions/molecule/ by default) and print
# how long each took. MOLECULE_DRIVER=docker selects the Docker driver where a
# Docker engine exists.
#
# Scenarios run in GPUFLEET_MOLECULE_JOBS lanes at once (default 2). Most of a
# scenario's time is Ansible waiting on round trips to its node, so two lanes
# share two cores well; every scenario has its own node names, and the mirror
# is only read. Each scenario's output goes to a log that is printed whole
# when it ends, so lanes never interleave lines. The longest scenarios start
# first so that the lanes end together.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(dirname "$0")/env.sh"
here=$(cd "$(dirname "$0")" && pwd)
cd "$GPUFLEET_ROOT"
# Scenarios pin the mirror's throwaway signing key, and the digests of its
# own builds of crictl and dcgm-exporter, as a site pins its own (env.sh).
mirror_pins

# Measured alone on a 2-core machine with two lanes (tests/output/phases.tsv):
# driver 565 s (the one real NVIDIA build), upgrade 361, workload 336, verify
# 328, slurm_gres 189, mig 142, container_runtime 129, bake 116, cdi 107,
# bundle 104, imex 85-116 (measured beside another lane), the rest 34-73.
# The lanes are CPU-bound, so a third lane gains little; the order decides
# how evenly they end. Scenarios not listed run
# last: a long one there leaves one lane working alone at the end (slurm_gres
# did, 207 s of a 2194 s run). upgrade comes after workload and verify: it
# needs the Kubernetes control plane (kube.sh), the last long Go build of
# go-tools, which a cold machine finishes well after Molecule starts.
# kernel_roll (436 s alone, 118 CPU-s: most of it apt and Debian's archive) after workload.
LONGEST_FIRST=(driver workload kernel_roll verify upgrade slurm_gres mig container_runtime bake cdi bundle imex dcgm container_toolkit crictl)

base_config=()
if [ "${MOLECULE_DRIVER:-podman}" = docker ]; then
  base_config=(--base-config .config/molecule/config.yml --base-config "$here/molecule-docker.yml")
  MOLECULE_DOCKER_PLAYBOOKS=$(python3 -c 'import os, molecule_plugins.docker as d; print(os.path.join(os.path.dirname(d.__file__), "playbooks"))')
  export MOLECULE_DOCKER_PLAYBOOKS
  for platform in debian12 debian13; do
    podman save "$GPUFLEET_IMAGE_PREFIX/$platform-gpusim:latest" | docker load >/dev/null
  done
fi

scenarios=("$@")
if [ "${#scenarios[@]}" -eq 0 ]; then
  for scenario in "${LONGEST_FIRST[@]}"; do
    [ -f "extensions/molecule/$scenario/molecule.yml" ] && scenarios+=("$scenario")
  done
  for file in extensions/molecule/*/molecule.yml; do
    scenario=$(basename "$(dirname "$file")")
    [[ " ${LONGEST_FIRST[*]} " == *" $scenario "* ]] || scenarios+=("$scenario")
  done
fi

logs=$GPUFLEET_ROOT/tests/output/molecule
rm -rf "$logs"
mkdir -p "$logs"

# One scenario: its log, then one summary line in $logs/<scenario>.result.
# Exit status 255 stops xargs from starting more scenarios.
# shellcheck disable=SC2317 # called by xargs' shells
run_scenario() {
  local scenario=$1 start cpu0 cpu result extra=() platforms
  local output="$logs/$scenario.log" config=("${base_config[@]}")
  if [ -f "extensions/molecule/$scenario/REQUIRES_REGISTRY" ] && [ "${GPUFLEET_WITH_REGISTRY:-}" != 1 ]; then
    # Scenarios that pull images from a registry run only where one is at hand.
    printf '%-22s %-7s %4s\n' "$scenario" skipped "(needs GPUFLEET_WITH_REGISTRY=1)" >"$logs/$scenario.result"
    return 0
  fi
  # A scenario that needs other nodes than the shared two keeps them in
  # platforms.<driver>.yml (layered like a base config, so each driver gets
  # its own keys); its molecule.yml then carries no platforms.
  platforms="extensions/molecule/$scenario/platforms.${MOLECULE_DRIVER:-podman}.yml"
  if [ -f "$platforms" ]; then
    [ "${#config[@]}" -gt 0 ] || config=(--base-config .config/molecule/config.yml)
    extra=(--base-config "$platforms")
  fi
  log "molecule: $scenario started"
  start=$(date +%s)
  "$GPUFLEET_ROOT/tests/harness/phase.sh" begin "molecule: $scenario" "$start"
  child_cpu cpu0
  if molecule "${config[@]}" "${extra[@]}" test -s "$scenario" >"$output" 2>&1; then result=passed; else result=FAILED; fi
  cpu_since cpu "$cpu0"
  printf '%-22s %-7s %4ss  CPU %4ss\n' "$scenario" "$result" "$(($(date +%s) - start))" "$cpu" >"$logs/$scenario.result"
  "$GPUFLEET_ROOT/tests/harness/phase.sh" record "molecule: $scenario" "$start" "$(date +%s)" "$result" "$cpu" "$output"
  {
    flock 9
    printf '\n===== molecule %s: %s =====\n' "$scenario" "$result"
    cat "$output"
  } 9>"$logs/.print"
  [ "$result" = passed ] || [ -n "${GPUFLEET_KEEP_GOING:-}" ] || return 255
}
# Arrays do not cross into xargs' shells: the base config goes as words.
base_config_str="${base_config[*]}"
export -f run_scenario log child_cpu cpu_since
export logs base_config_str

status=0
# shellcheck disable=SC2016 # expanded by the lane's shell, not here
printf '%s\n' "${scenarios[@]}" \
  | xargs -P "${GPUFLEET_MOLECULE_JOBS:-2}" -I{} bash -c \
    'set -uo pipefail; read -ra base_config <<<"$base_config_str"; run_scenario "$1"' _ {} \
  || status=1

log "Molecule summary:"
for scenario in "${scenarios[@]}"; do
  if [ -f "$logs/$scenario.result" ]; then
    sed 's/^/  /' "$logs/$scenario.result" >&2
  else
    printf '  %-22s %s\n' "$scenario" "not run" >&2
  fi
done
grep -q FAILED "$logs"/*.result 2>/dev/null && status=1
exit "$status"
