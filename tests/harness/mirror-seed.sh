#!/usr/bin/env bash
# Fill the local mirror from mirror-packages.txt, sign it and serve it on
# loopback. Downloads are cached, so a second run only re-indexes.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(dirname "$0")/env.sh"
here=$(cd "$(dirname "$0")" && pwd)

python3 "$here/mirror.py" init
while read -r suite repo packages; do
  case "$suite" in '' | '#'*) continue ;; esac
  # shellcheck disable=SC2086 # a list of package names
  mapfile -t debs < <(python3 "$here/mirror.py" fetch --suite "$suite" $packages)
  python3 "$here/mirror.py" add-deb --dist "$repo" "$suite" auto "${debs[@]}"
done <"$here/mirror-packages.txt"
python3 "$here/mirror.py" index
python3 "$here/mirror.py" serve
