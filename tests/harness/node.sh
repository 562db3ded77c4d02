#!/usr/bin/env bash
# Start (or reuse) a simulated GPU node: a systemd container on the host
# network, so it reaches the local mirror on 127.0.0.1 like a real node
# reaches its site mirror.
#   node.sh up NAME IMAGE [OPTION...]  -> container NAME running IMAGE, booted;
#                                         OPTIONs go to `podman run` (e.g. --privileged)
#   node.sh down NAME
# A running node is reused only when it runs IMAGE with the same OPTIONs;
# otherwise it is recreated.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(dirname "$0")/env.sh"

up() {
  local name=$1 image=$2 current wanted
  shift 2
  # The options travel in a label: podman inspect does not give them back as written.
  wanted="$image true $*"
  current=$(podman inspect --format '{{.ImageName}} {{.State.Running}} {{index .Config.Labels "gpufleet.node-options"}}' \
    "$name" 2>/dev/null || true)
  if [ "$current" != "$wanted" ]; then
    podman rm -f "$name" >/dev/null 2>&1 || true
    podman run -d --name "$name" --hostname "$name" --network host --systemd always \
      --label "gpufleet.node-options=$*" "$@" "$image" /sbin/init >/dev/null
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
  up) [ $# -ge 3 ] || die "usage: $0 up NAME IMAGE [OPTION...]"; shift; up "$@" ;;
  down) podman rm -f "${2:?name}" >/dev/null ;;
  *) die "usage: $0 up NAME IMAGE [OPTION...] | down NAME" ;;
esac
