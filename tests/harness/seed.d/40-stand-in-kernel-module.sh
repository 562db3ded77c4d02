#!/usr/bin/env bash
# A second Debian-style repository, debian-stand-in, with Debian 12's driver
# packages (bookworm and bookworm-backports, as in mirror-packages.txt) where
# the DKMS source packages carry the test ground's stand-in module
# (tests/harness/stand-in-module/) instead of the NVIDIA module.
#
# Why: a DKMS build of the NVIDIA module takes minutes on two cores; the
# stand-in builds in seconds against the same real kernel headers, under the
# same DKMS name, version and destination, so the driver role's install,
# upgrade, second-kernel and rollback paths run unchanged and cheaply. The
# open-module package's stand-in fails to compile, on purpose: the real
# failure (Debian 12's open modules against its current kernel) is what the
# rollback test needs. The driver scenario builds the real module once, on
# its other node.
#
# Every other package is the one Debian ships, copied as is. The repacked
# .debs are cached under a key of their inputs (this script, the module's
# source and the original .debs).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../env.sh
. "$(dirname "$0")/../env.sh"
harness=$(cd "$(dirname "$0")/.." && pwd)
module_src=$harness/stand-in-module
repository=debian-stand-in

# The packages of the `debian` repository's bookworm suites, from the data file.
declare -A packages
while read -r suite repo names; do
  case "$suite" in bookworm | bookworm-backports) ;; *) continue ;; esac
  [ "$repo" = debian ] && packages[$suite]+=" $names"
done <"$harness/mirror-packages.txt"

repack() {  # repack <original .deb> <output dir>
  local deb=$1 out=$2 work name version upstream src fail=''
  work=$(mktemp -d)
  dpkg-deb -R "$deb" "$work/pkg"
  name=$(sed -n 's/^DKMS_NAME=//p' "$work/pkg/DEBIAN/postinst")
  [ -n "$name" ] || die "$deb: no DKMS_NAME in its postinst"
  version=$(dpkg-deb -f "$deb" Version)
  upstream=${version#*:}
  upstream=${upstream%%-*}
  src=$work/pkg/usr/src/$name-$upstream
  [ -f "$src/dkms.conf" ] || die "$deb: no $src/dkms.conf"
  rm -rf "$src"
  mkdir -p "$src"
  case "$name" in
    *-open) fail='#error "gpufleet test-ground stand-in: the open module fails to build here on purpose"' ;;
  esac
  sed -e "s|@NAME@|$name|" -e "s|@VERSION@|$upstream|" "$module_src/dkms.conf.in" >"$src/dkms.conf"
  sed -e "s|@VERSION@|$upstream|" -e "s|@FAIL@|$fail|" "$module_src/nvidia.c.in" >"$src/nvidia.c"
  cp "$module_src/Kbuild" "$src/Kbuild"
  sed -i -e '/^Description:/s/$/ (gpufleet test-ground stand-in)/' \
    -e "s/^Installed-Size: .*/Installed-Size: $(du -sk --exclude=DEBIAN "$work/pkg" | cut -f1)/" \
    "$work/pkg/DEBIAN/control"
  (cd "$work/pkg" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | sort -z | xargs -0 md5sum >DEBIAN/md5sums)
  dpkg-deb --root-owner-group -Zgzip --build "$work/pkg" "$out/$(basename "$deb")" >/dev/null
  rm -rf "$work"
}

depends_on_dkms='(^|[ ,])dkms([ ,(]|$)'
for suite in bookworm bookworm-backports; do
  # shellcheck disable=SC2086 # a list of package names
  fetched=$(python3 "$harness/mirror.py" fetch --suite "$suite" ${packages[$suite]})
  mapfile -t debs <<<"$fetched"
  dkms_debs=() other_debs=()
  for deb in "${debs[@]}"; do
    # A DKMS source package depends on dkms (its control file is quick to read).
    if [[ $(dpkg-deb -f "$deb" Depends) =~ $depends_on_dkms ]]; then dkms_debs+=("$deb"); else other_debs+=("$deb"); fi
  done
  [ "${#dkms_debs[@]}" -gt 0 ] || die "no DKMS source package among $suite's driver packages"
  key=$({ cat "$0" "$module_src"/*; sha256sum "${dkms_debs[@]}"; } | sha256sum | cut -c1-16)
  cache=$GPUFLEET_CACHE/stand-in-module/$key/$suite
  if [ ! -d "$cache" ]; then
    log "stand-in module: repacking ${#dkms_debs[@]} DKMS package(s) of $suite"
    mkdir -p "$cache.tmp"
    for deb in "${dkms_debs[@]}"; do repack "$deb" "$cache.tmp"; done
    mv "$cache.tmp" "$cache"
  fi
  python3 "$harness/mirror.py" add-deb --dist "$repository" "$suite" auto "$cache"/*.deb "${other_debs[@]}"
done
