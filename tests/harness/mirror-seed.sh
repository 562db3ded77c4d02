#!/usr/bin/env bash
# Fill the local mirror from mirror-packages.txt and seed.d/*.sh, sign it and
# serve it on loopback. Downloads and builds are cached, so a second run only
# re-indexes.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(dirname "$0")/env.sh"
here=$(cd "$(dirname "$0")" && pwd)

fetch_debian_packages() {
  python3 "$here/mirror.py" init
  while read -r suite repo packages; do
    case "$suite" in '' | '#'*) continue ;; esac
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
  log "seeding: $(basename "$seed")"
  timed "mirror seed: $(basename "$seed" .sh)" bash "$seed"
done
timed "mirror: index, sign, serve" index_and_serve
