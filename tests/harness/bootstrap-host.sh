#!/usr/bin/env bash
# Prepare a Debian 12/13 host (as root) for the test ground: the Debian
# packages the harness needs and a Podman configuration that works on hosts
# whose PID 1 is not systemd and whose cgroups are hybrid (v1 + unified).
# Idempotent and quick when everything is already in place.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(dirname "$0")/env.sh"

[ "$(id -u)" -eq 0 ] || die "run as root: the harness drives rootful Podman and apt-get"

# What the first steps need: the Go builds (cgo), the simulated NVML library
# and the venvs. `bootstrap-host.sh toolchain` installs only these (most
# machines have them), so that those steps need not wait for the rest, which
# a fresh machine downloads meanwhile.
TOOLCHAIN_PACKAGES=(
  gcc make libc6-dev                        # cgo and the simulated NVML library
  python3 python3-venv                      # the tool venvs
)
PACKAGES=(
  "${TOOLCHAIN_PACKAGES[@]}"
  podman runc containernetworking-plugins   # containers (crun fails on hybrid cgroups)
  debootstrap                               # base images
  gnupg apt-utils                           # the signed local apt mirror
)
# What only the tests use; `bootstrap-host.sh demo` (make demo) leaves it out,
# which keeps a fresh machine's demo within its ten minutes (chromium alone
# is a few hundred MB).
TEST_PACKAGES=(
  git rsync shellcheck                      # collection tree for ansible-test
  chromium                                  # renders the fleet report in a test (headless)
  libdpkg-dev rpm                           # dpkg's and rpm's version order, diffed in test_version_order.py
)
case "${1:-all}" in
  all) PACKAGES+=("${TEST_PACKAGES[@]}") ;;
  demo) ;;
  toolchain) PACKAGES=("${TOOLCHAIN_PACKAGES[@]}") ;;
  *) die "usage: $0 [all|demo|toolchain]" ;;
esac

missing=()
for pkg in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

mkdir -p "$GPUFLEET_CACHE"
chmod 0755 "$GPUFLEET_CACHE"
[ "${1:-all}" = toolchain ] && exit 0

# Podman: runc, cgroupfs (PID 1 may not be systemd), and default ulimits at or
# below the host's hard limits, or every container start fails with EPERM.
nofile=$(ulimit -Hn); nproc=$(ulimit -Hu)
[ "$nofile" = unlimited ] && nofile=1048576
[ "$nproc" = unlimited ] && nproc=1048576
[ "$nofile" -gt 1024 ] && nofile=1024
[ "$nproc" -gt 4096 ] && nproc=4096
cgroup_manager=cgroupfs
[ "$(cat /proc/1/comm 2>/dev/null)" = systemd ] && cgroup_manager=systemd

conf=/etc/containers/containers.conf
marker='# managed by gpufleet tests/harness/bootstrap-host.sh'
desired="$marker
[containers]
default_ulimits = [\"nofile=${nofile}:${nofile}\", \"nproc=${nproc}:${nproc}\"]

[engine]
runtime = \"runc\"
cgroup_manager = \"${cgroup_manager}\"
events_logger = \"file\""
if [ ! -f "$conf" ] || [ "$(cat "$conf")" != "$desired" ]; then
  if [ -f "$conf" ] && ! grep -qF "$marker" "$conf"; then
    cp -p "$conf" "$conf.gpufleet-backup"
    log "kept your previous $conf as $conf.gpufleet-backup"
  fi
  mkdir -p /etc/containers
  printf '%s\n' "$desired" >"$conf"
  log "wrote $conf (runc, $cgroup_manager, nofile=$nofile nproc=$nproc)"
fi

# Kernel limits (inotify) the nodes need, or a clear stop now.
"$(dirname "$0")/host-limits.sh"
