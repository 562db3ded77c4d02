#!/usr/bin/env bash
# Print the path of Debian's real libnvidia-ml.so.1 (bookworm), unpacked from
# the mirror's cache: the unit tests load it on this GPU-less machine to prove
# nvml_info reports "driver not loaded" instead of failing (the Packer case).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(dirname "$0")/env.sh"

deb=$(python3 "$(dirname "$0")/mirror.py" fetch --suite bookworm libnvidia-ml1 | grep '/libnvidia-ml1_')
dest="$GPUFLEET_CACHE/real-libnvml/$(basename "$deb" .deb)"
if [ ! -d "$dest" ]; then
  mkdir -p "$(dirname "$dest")"
  dpkg-deb -x "$deb" "$dest.tmp"
  mv "$dest.tmp" "$dest"
fi
lib="$dest/usr/lib/x86_64-linux-gnu/nvidia/current/libnvidia-ml.so.1"
[ -e "$lib" ] || die "no libnvidia-ml.so.1 in $deb"
echo "$lib"
