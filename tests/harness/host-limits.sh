#!/usr/bin/env bash
# The kernel limits the test ground needs, set once when the host is set up
# (bootstrap-host.sh), so that a shortage fails here, at the start, with the
# command that fixes it, not half an hour later inside a scenario.
#
# Every node is a rootful container running systemd, journald, dbus and an
# engine (containerd's CRI plugin, dockerd), and each of them takes inotify
# instances from root's one per-user pool. With the demo node up beside two
# Molecule lanes, Debian's default of 128 instances ran out: containerd 1.7's
# CRI plugin did not load ("failed to create fsnotify watcher: too many open
# files"). The values below leave room for both lanes, the demo node and the
# fleet benchmark's nodes; the kernel's defaults are kept where the host
# already allows more.
#
# The drop-in is ours (/etc/sysctl.d/60-gpufleet-test-ground.conf) so a boot
# applies it again, and removing the file gives the host back its defaults.
# GPUFLEET_SYSCTL_DIR and GPUFLEET_PROC_SYS move both places (for the tests).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(dirname "$0")/env.sh"

sysctl_dir=${GPUFLEET_SYSCTL_DIR:-/etc/sysctl.d}
proc_sys=${GPUFLEET_PROC_SYS:-/proc/sys}
drop_in=$sysctl_dir/60-gpufleet-test-ground.conf

# name minimum, one a line.
NEEDED="fs.inotify.max_user_instances 1024
fs.inotify.max_user_watches 524288"

lines=()
short=()
while read -r name minimum; do
  path=$proc_sys/${name//.//}
  current=$(cat "$path" 2>/dev/null) || die "cannot read $path: is /proc/sys mounted?"
  wanted=$((current > minimum ? current : minimum))
  lines+=("$name = $wanted")
  [ "$current" -ge "$minimum" ] || short+=("$name")
  if [ "$current" -lt "$minimum" ] && ! (printf '%s\n' "$wanted" >"$path") 2>/dev/null; then
    die "$name is $current; the test ground needs at least $minimum (rootful nodes run systemd and an engine, each taking inotify instances).
Raise it as root on the host, then run make again:
  sysctl -w $name=$minimum"
  fi
done <<<"$NEEDED"

desired=$(printf '# managed by gpufleet tests/harness/host-limits.sh: what the test ground needs\n'
  printf '%s\n' "${lines[@]}")
if [ ! -f "$drop_in" ] || [ "$(cat "$drop_in")" != "$desired" ]; then
  mkdir -p "$sysctl_dir"
  printf '%s\n' "$desired" >"$drop_in"
  log "wrote $drop_in"
fi
[ "${#short[@]}" -eq 0 ] || log "raised ${short[*]} to what $drop_in says"
