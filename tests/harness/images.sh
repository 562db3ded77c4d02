#!/usr/bin/env bash
# Build the systemd container images of the test ground, cached under a
# content key: an image is rebuilt only when something that goes into it
# changes (this script, the package list, the simulator, the node fixture).
#
#   images.sh base debian12|debian13          -> prints the image reference
#   images.sh gpusim debian12|debian13 [NODE] -> base + simulated NVML + NODE
#   images.sh kernel debian12|debian13        -> gpusim + a Debian kernel (DKMS)
#
# Both are also tagged :latest, which is what molecule.yml files name.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(dirname "$0")/env.sh"

# Debian packages in every base image: systemd as PID 1, what Ansible needs
# on a target (python3, python3-apt), and what our roles expect on any real
# host (gnupg for repository keys, kmod, procps, iproute2).
BASE_PACKAGES=systemd,systemd-sysv,dbus,python3,python3-apt,ca-certificates,gnupg,iproute2,procps,kmod,less

suite_of() {
  case "$1" in
    debian12) echo bookworm ;;
    debian13) echo trixie ;;
    *) die "unknown platform '$1' (expected debian12 or debian13)" ;;
  esac
}

# The files' contents only, not their paths: every checkout (a worktree, CI's
# fresh clone) then finds the images another one built.
content_key() { sha256sum "$@" | cut -d' ' -f1 | sha256sum | cut -c1-12; }

# Scratch directories are removed on exit, however the script ends.
SCRATCH=()
cleanup() { [ "${#SCRATCH[@]}" -eq 0 ] || rm -rf "${SCRATCH[@]}"; }
trap cleanup EXIT
# scratch_dir VAR: a new scratch directory in VAR, removed when the script
# exits (not `VAR=$(scratch_dir)`: the list would grow in a subshell only).
scratch_dir() { local d; d=$(mktemp -d "$GPUFLEET_CACHE/tmp.XXXXXX"); SCRATCH+=("$d"); printf -v "$1" '%s' "$d"; }

image_exists() { podman image exists "$1"; }

# Remove older builds of the same image so the cache does not grow forever.
prune_old() {
  local name=$1 keep=$2 ref
  for ref in $(podman images --filter "label=gpufleet.image=$name" --format '{{.Repository}}:{{.Tag}}'); do
    case "$ref" in *":$keep" | *":latest") ;; *) podman rmi -f "$ref" >/dev/null 2>&1 || true ;; esac
  done
  podman image prune -f --filter "label=gpufleet.image=$name" >/dev/null 2>&1 || true
}

build_base() {
  local platform=$1 suite key ref rootfs
  suite=$(suite_of "$platform")
  # The key covers what goes into the image: suite, packages, this function.
  key=$( (printf '%s\n' "$suite" "$BASE_PACKAGES"; declare -f build_base) | sha256sum | cut -c1-12)
  ref="$GPUFLEET_IMAGE_PREFIX/$platform:$key"
  if image_exists "$ref"; then
    podman tag "$ref" "$GPUFLEET_IMAGE_PREFIX/$platform:latest"
    echo "$ref"; return
  fi
  log "building $ref with debootstrap ($suite); about a minute"
  scratch_dir rootfs
  debootstrap --variant=minbase --include="$BASE_PACKAGES" "$suite" "$rootfs" \
    "$GPUFLEET_DEBIAN_MIRROR" >"$GPUFLEET_CACHE/debootstrap-$platform.log" 2>&1 \
    || die "debootstrap failed, see $GPUFLEET_CACHE/debootstrap-$platform.log"

  cat >"$rootfs/etc/apt/sources.list" <<SOURCES
deb $GPUFLEET_DEBIAN_MIRROR $suite main
deb $GPUFLEET_DEBIAN_MIRROR $suite-updates main
deb http://deb.debian.org/debian-security $suite-security main
SOURCES
  # An empty machine-id lets systemd give every container its own.
  : >"$rootfs/etc/machine-id"
  rm -f "$rootfs/var/lib/dbus/machine-id"
  # Units that only make sense on a real console or real hardware.
  for unit in getty@tty1.service serial-getty@.service console-getty.service \
    systemd-remount-fs.service sys-kernel-config.mount sys-kernel-debug.mount \
    sys-kernel-tracing.mount; do
    ln -sf /dev/null "$rootfs/etc/systemd/system/$unit"
  done
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/log/*.log

  tar -C "$rootfs" --numeric-owner -c . \
    | podman import --quiet \
      --change 'CMD ["/sbin/init"]' \
      --change 'STOPSIGNAL SIGRTMIN+3' \
      --change "LABEL gpufleet.image=$platform" \
      --change "LABEL gpufleet.key=$key" \
      - "$ref" >/dev/null
  podman tag "$ref" "$GPUFLEET_IMAGE_PREFIX/$platform:latest"
  prune_old "$platform" "$key"
  echo "$ref"
}

build_gpusim() {
  local platform=$1 node=${2:-dgx-a100-8x40gb} base sim key ref ctx name
  base=$(build_base "$platform")
  sim="$GPUFLEET_ROOT/tests/nvml-sim"
  "$GPUFLEET_ROOT/tests/harness/sim.sh"
  key=$(content_key "$sim/build/libnvidia-ml.so.1" "$sim/simctl.py" "$sim/nodes/$node.yml" \
    "$sim"/models/*.yml <(echo "$base"; declare -f build_gpusim))
  name="$platform-gpusim"
  ref="$GPUFLEET_IMAGE_PREFIX/$name:$key"
  if ! image_exists "$ref"; then
    log "building $ref (simulated node: $node)"
    scratch_dir ctx
    cp "$sim/build/libnvidia-ml.so.1" "$sim/simctl.py" "$ctx/"
    "$GPUFLEET_VENV/bin/python" "$sim/simctl.py" render "$sim/nodes/$node.yml" -o "$ctx/state"
    cat >"$ctx/Containerfile" <<CONTAINERFILE
FROM $base
# Where the dynamic loader finds it first, like a driver's libnvidia-ml.so.1.
COPY libnvidia-ml.so.1 /usr/local/lib/x86_64-linux-gnu/libnvidia-ml.so.1
COPY simctl.py /usr/local/lib/nvml-sim/simctl.py
COPY state /var/lib/nvml-sim/state
RUN printf '#!/bin/sh\\nexec python3 /usr/local/lib/nvml-sim/simctl.py "\$@"\\n' >/usr/local/sbin/nvml-simctl \\
 && chmod 0755 /usr/local/sbin/nvml-simctl && chmod 0600 /var/lib/nvml-sim/state && ldconfig
LABEL gpufleet.image=$name gpufleet.key=$key gpufleet.node=$node
CONTAINERFILE
    podman build --quiet --network host -t "$ref" "$ctx" >/dev/null
    prune_old "$name" "$key"
  fi
  podman tag "$ref" "$GPUFLEET_IMAGE_PREFIX/$name:latest"
  echo "$ref"
}

# Debian's current kernel for a platform, as the node's own sources (security
# included) offer it; asked at most every 6 hours, so the kernel image below is
# rebuilt when Debian ships a new kernel and its old headers leave the archive.
current_kernel() {
  local platform=$1 image=$2 file="$GPUFLEET_CACHE/kernel-$1.version"
  if [ ! -s "$file" ] || [ -n "$(find "$file" -mmin +360)" ]; then
    podman run --rm --network host "$image" sh -c \
      'apt-get update -qq >/dev/null && apt-cache policy linux-image-amd64 | sed -n "s/ *Candidate: //p"' \
      >"$file.tmp" || die "could not ask Debian for the current $platform kernel"
    [ -s "$file.tmp" ] || die "Debian offers no linux-image-amd64 for $platform"
    mv "$file.tmp" "$file"
  fi
  cat "$file"
}

# A simulated GPU node with a Debian kernel installed, for roles that build
# kernel modules. Containers run the host's kernel, which has no headers;
# DKMS builds for a node's installed kernels, as on a real host. The kernel
# is installed; its headers are only downloaded, because installing them is
# the driver role's job. ccache stands in for the kernel's compiler (gcc-N),
# with its cache on the host when a scenario mounts $GPUFLEET_CACHE/ccache at
# /var/cache/gpufleet-ccache: DKMS really builds, but rebuilding the same
# driver source is mostly cache hits. The links are in /usr/sbin because
# DKMS runs from package scripts with PATH=/usr/sbin:/usr/bin:/sbin:/bin.
build_kernel() {
  local platform=$1 gpusim kernel key ref ctx name
  gpusim=$(build_gpusim "$platform")
  kernel=$(current_kernel "$platform" "$gpusim")
  mkdir -p "$GPUFLEET_CACHE/ccache"
  key=$( (echo "$gpusim" "$kernel"; declare -f build_kernel) | sha256sum | cut -c1-12)
  name="$platform-gpusim-kernel"
  ref="$GPUFLEET_IMAGE_PREFIX/$name:$key"
  if ! image_exists "$ref"; then
    log "building $ref (linux-image-amd64 $kernel); a few minutes"
    scratch_dir ctx
    cat >"$ctx/ccache.conf" <<'CCACHE'
# gpufleet test ground: DKMS builds of the same driver source hit this cache.
cache_dir = /var/cache/gpufleet-ccache
max_size = 4G
compiler_check = content
hash_dir = false
sloppiness = include_file_mtime,include_file_ctime,time_macros,file_stat_matches
CCACHE
    cat >"$ctx/Containerfile" <<CONTAINERFILE
FROM $gpusim
COPY ccache.conf /etc/ccache.conf
# MODULES=list: an initramfs of the listed modules only (none) takes 1.5 s
# to build instead of 20 s of CPU with Debian's MODULES=most, and every
# driver install regenerates it. Nothing boots these initramfs images; what
# the roles put in them (/etc/modprobe.d) is copied either way.
RUN mkdir -p /etc/initramfs-tools/conf.d \\
 && printf 'MODULES=list\\n' >/etc/initramfs-tools/conf.d/gpufleet-test-ground.conf
RUN export DEBIAN_FRONTEND=noninteractive \\
 && apt-get update -qq \\
 && apt-get install -y -qq --no-install-recommends linux-image-amd64=$kernel ccache >/dev/null \\
 && apt-get install -y -qq --no-install-recommends --download-only "linux-headers-\$(ls /lib/modules)" >/dev/null \\
 && for cc in gcc-12 gcc-13 gcc-14 gcc-15; do \\
      ln -s ../bin/ccache /usr/sbin/\$cc; ln -s ../bin/ccache /usr/sbin/x86_64-linux-gnu-\$cc; \\
    done \\
 && mkdir -p /var/cache/gpufleet-ccache
LABEL gpufleet.image=$name gpufleet.key=$key gpufleet.kernel=$kernel
CONTAINERFILE
    podman build --quiet --network host -t "$ref" "$ctx" >/dev/null
    prune_old "$name" "$key"
  fi
  podman tag "$ref" "$GPUFLEET_IMAGE_PREFIX/$name:latest"
  echo "$ref"
}

case "${1:-}" in
  base) build_base "${2:?platform}" ;;
  gpusim) build_gpusim "${2:?platform}" "${3:-}" ;;
  kernel) build_kernel "${2:?platform}" ;;
  *) die "usage: $0 base|gpusim|kernel debian12|debian13 [node]" ;;
esac
