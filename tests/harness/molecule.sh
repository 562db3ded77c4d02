#!/usr/bin/env bash
# Run Molecule scenarios (all under extensions/molecule/ by default) one after another
# and print how long each took. MOLECULE_DRIVER=docker selects the Docker
# driver where a Docker engine exists.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(dirname "$0")/env.sh"
here=$(cd "$(dirname "$0")" && pwd)
cd "$GPUFLEET_ROOT"
# Scenarios pin the mirror's throwaway signing key as a site pins its own.
GPUFLEET_MIRROR_FINGERPRINT=$(python3 "$here/mirror.py" status | sed -n 's/^key=//p')
export GPUFLEET_MIRROR_FINGERPRINT

base_config=()
if [ "${MOLECULE_DRIVER:-podman}" = docker ]; then
  base_config=(--base-config .config/molecule/config.yml --base-config "$here/molecule-docker.yml")
  for platform in debian12 debian13; do
    podman save "$GPUFLEET_IMAGE_PREFIX/$platform-gpusim:latest" | docker load >/dev/null
  done
fi

scenarios=("$@")
if [ "${#scenarios[@]}" -eq 0 ]; then
  for file in extensions/molecule/*/molecule.yml; do
    scenarios+=("$(basename "$(dirname "$file")")")
  done
fi

summary=()
status=0
for scenario in "${scenarios[@]}"; do
  # Scenarios that pull images from a registry run only where one is at hand.
  if [ -f "extensions/molecule/$scenario/REQUIRES_REGISTRY" ] && [ "${GPUFLEET_WITH_REGISTRY:-}" != 1 ]; then
    summary+=("$(printf '%-22s %-7s %4s' "$scenario" skipped "(needs GPUFLEET_WITH_REGISTRY=1)")")
    continue
  fi
  start=$(date +%s)
  # A scenario that needs other nodes than the shared two keeps them in
  # platforms.<driver>.yml (layered like a base config, so each driver gets
  # its own keys); its molecule.yml then carries no platforms.
  extra=()
  platforms="extensions/molecule/$scenario/platforms.${MOLECULE_DRIVER:-podman}.yml"
  if [ -f "$platforms" ]; then
    [ "${#base_config[@]}" -gt 0 ] || base_config=(--base-config .config/molecule/config.yml)
    extra=(--base-config "$platforms")
  fi
  if molecule "${base_config[@]}" "${extra[@]}" test -s "$scenario"; then result=passed; else result=FAILED; status=1; fi
  summary+=("$(printf '%-22s %-7s %4ss' "$scenario" "$result" "$(($(date +%s) - start))")")
  [ "$status" -eq 0 ] || [ -n "${GPUFLEET_KEEP_GOING:-}" ] || break
done
log "Molecule summary:"
printf '  %s\n' "${summary[@]}" >&2
exit "$status"
