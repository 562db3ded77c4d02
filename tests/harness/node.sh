#!/usr/bin/env bash
# Start (or reuse) a simulated GPU node: a systemd container on the host
# network, so it reaches the local mirror on 127.0.0.1 like a real node
# reaches its site mirror.
#   node.sh up NAME IMAGE    -> container NAME running IMAGE, booted
#   node.sh down NAME
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(dirname "$0")/env.sh"

up() {
  local name=$1 image=$2 current
  current=$(podman inspect --format '{{.ImageName}} {{.State.Running}}' "$name" 2>/dev/null || true)
  if [ "$current" != "$image true" ]; then
    podman rm -f "$name" >/dev/null 2>&1 || true
    podman run -d --name "$name" --hostname "$name" --network host --systemd always \
      "$image" /sbin/init >/dev/null
  fi
  # `running` only: a unit that fails at boot is a broken test ground.
  # Right after `podman run` systemd may not answer yet (no bus: empty or
  # "offline"); --wait only helps once it does, so ask again for a while.
  local state="" try
  for try in $(seq 60); do
    state=$(podman exec "$name" systemctl is-system-running --wait 2>/dev/null || true)
    case "$state" in running | degraded | maintenance | stopping) break ;; esac
    [ "$try" -lt 60 ] && sleep 1
  done
  [ "$state" = running ] || {
    podman exec "$name" systemctl --failed --no-pager >&2 || true
    die "node $name did not boot cleanly (state: ${state:-unknown})"
  }
}

case "${1:-}" in
  up) up "${2:?name}" "${3:?image}" ;;
  down) podman rm -f "${2:?name}" >/dev/null ;;
  *) die "usage: $0 up NAME IMAGE | down NAME" ;;
esac
