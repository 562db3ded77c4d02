#!/usr/bin/env bash
# Fill the local mirror from mirror-packages.txt and seed.d/*.sh, sign it and
# serve it on loopback. Downloads and builds are cached, so a second run only
# re-indexes.
#
#   mirror-seed.sh        everything the tests install (make mirror)
#   mirror-seed.sh demo   only what make demo installs: Debian 13's packages,
#                         the newest toolkit and cri-tools, and the workload
#                         check's images (the node's containerd is Debian's).
#                         A cold demo then stays short (README.md); the
#                         mirror only grows, so a later full seed adds the rest.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(dirname "$0")/env.sh"
here=$(cd "$(dirname "$0")" && pwd)

GPUFLEET_MIRROR_SET=${1:-all}
case "$GPUFLEET_MIRROR_SET" in
  all) suites='*' seeds='*' ;;
  # The demo node's suite (demo.sh: images.sh gpusim debian13), the seeds of
  # the layers it installs and the images its workload check runs (the
  # stand-in module, DCGM and the built containerd serve Molecule scenarios
  # only).
  demo) suites='trixie' seeds='@(10-nvidia-container-toolkit|20-cri-tools|50-workload-images)' ;;
  *) die "usage: $0 [demo]" ;;
esac
export GPUFLEET_MIRROR_SET
shopt -s extglob

fetch_debian_packages() {
  python3 "$here/mirror.py" init
  while read -r suite repo packages; do
    case "$suite" in '' | '#'*) continue ;; esac
    # shellcheck disable=SC2254 # the set's pattern
    case "$suite" in $suites) ;; *) continue ;; esac
    # shellcheck disable=SC2086 # a list of package names
    # (A plain assignment, not < <(...): a failed fetch must stop the seed.)
    fetched=$(python3 "$here/mirror.py" fetch --suite "$suite" $packages)
    mapfile -t debs <<<"$fetched"
    python3 "$here/mirror.py" add-deb --dist "$repo" "$suite" auto "${debs[@]}"
  done <"$here/mirror-packages.txt"
}

index_and_serve() {
  python3 "$here/mirror.py" index
  python3 "$here/mirror.py" serve
}

timed "mirror: Debian packages" fetch_debian_packages
# Content that is built rather than downloaded (Go tools packaged as .debs,
# release tarballs, the stand-in module): each seed script is idempotent and
# caches its work.
for seed in "$here"/seed.d/*.sh; do
  [ -e "$seed" ] || continue
  # shellcheck disable=SC2254 # the set's pattern
  case "$(basename "$seed" .sh)" in $seeds) ;; *) continue ;; esac
  log "seeding: $(basename "$seed")"
  timed "mirror seed: $(basename "$seed" .sh)" bash "$seed"
done
timed "mirror: index, sign, serve" index_and_serve
