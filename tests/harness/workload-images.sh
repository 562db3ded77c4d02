#!/usr/bin/env bash
# The workload check's two test images, built locally with podman (there is no
# registry on the test ground) and saved as OCI archives:
#
#   $GPUFLEET_IMAGE_PREFIX/pause:3.10-gpufleet   a static pause binary FROM scratch,
#                                                containerd's sandbox image in the tests
#   $GPUFLEET_IMAGE_PREFIX/cuda-probe:1.0        no NVML library and no nvidia-smi of
#                                                its own: only what a dynamically linked
#                                                binary mounted by CDI needs to run
#
#   workload-images.sh build      build (cached), print the directory holding the archives
#   workload-images.sh publish    build, then publish on the mirror under files/images/
#   workload-images.sh reproduce  build again from scratch, without any cache, and fail
#                                 unless the manifest digests are the same
#
# Each archive <name>-<tag>.oci.tar comes with <archive>.digest (the image
# manifest digest, what `name@sha256:...` pins and `ctr images ls` shows) and
# <archive>.image-id (the config digest: the image ID `docker load` gives;
# Docker's classic store records no manifest digest for a loaded image).
# mirror.py adds each file's .sha256.
#
# Reproducible: podman build --timestamp 0 (creation time and every file's
# mtime), Debian packages as inputs rather than the host's files, and a
# deterministic repack (workload-images/oci_archive.py). Same inputs -> same
# manifest digest and the same archive bytes.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(dirname "$0")/env.sh"
here=$(cd "$(dirname "$0")" && pwd)
src="$here/workload-images"

PAUSE_REF="$GPUFLEET_IMAGE_PREFIX/pause:3.10-gpufleet"
PROBE_REF="$GPUFLEET_IMAGE_PREFIX/cuda-probe:1.0"
# The probe's C library comes from the Debian release the test nodes run:
# a binary built there (the CDI-mounted nvidia-smi) needs its glibc symbol
# versions, and glibc is backward compatible, so the newest release serves
# the older ones and NVIDIA's own binaries too.
PROBE_SUITE=trixie
# The loader and the libraries glibc splits into (NVIDIA's binaries still link
# libpthread, libdl and librt by name; in glibc >= 2.34 they are stubs).
PROBE_LIBS=(ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1)
# busybox applets the probe offers (a shell and sleep for the default command;
# cat, ls and env to look inside a running probe).
PROBE_APPLETS=(sh sleep cat ls env)
PROBE_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

SCRATCH=()
cleanup() { [ "${#SCRATCH[@]}" -eq 0 ] || rm -rf "${SCRATCH[@]}"; }
trap cleanup EXIT
scratch_dir() { local d; d=$(mktemp -d "$GPUFLEET_CACHE/tmp.XXXXXX"); SCRATCH+=("$d"); echo "$d"; }

# The .debs the probe is made of, from the Debian archive (cached by mirror.py).
probe_debs() {
  local fetched
  fetched=$(python3 "$here/mirror.py" fetch --all --suite "$PROBE_SUITE" libc6 libc-bin busybox-static)
  grep -E '/(libc6|libc-bin|busybox-static)_[^/]*_amd64\.deb$' <<<"$fetched" | sort
}

build_pause_context() {
  local ctx=$1
  gcc -static -O2 -Wall -Wextra -Werror -o "$ctx/pause" "$src/pause.c"
  strip "$ctx/pause"
  cat >"$ctx/Containerfile" <<'EOF'
FROM scratch
COPY pause /pause
ENTRYPOINT ["/pause"]
EOF
}

build_probe_context() {
  local ctx=$1 debs=$2 root=$1/rootfs x x_dir deb lib applet
  x=$(scratch_dir)
  while read -r deb; do dpkg-deb -x "$deb" "$x"; done <<<"$debs"
  mkdir -p "$root"/usr/{bin,sbin,lib/x86_64-linux-gnu,lib64} "$root"/etc/ld.so.conf.d "$root/tmp"
  chmod 1777 "$root/tmp"
  for lib in "${PROBE_LIBS[@]}"; do
    [ -e "$x/usr/lib/x86_64-linux-gnu/$lib" ] || die "probe: $lib is not in $PROBE_SUITE's libc6"
    cp -L "$x/usr/lib/x86_64-linux-gnu/$lib" "$root/usr/lib/x86_64-linux-gnu/$lib"
  done
  # The ELF interpreter path every x86_64 binary names.
  ln -s ../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 "$root/usr/lib64/ld-linux-x86-64.so.2"
  # Statically linked: the CDI update-ldcache hook runs it on the container's root.
  install -m 0755 "$x/usr/sbin/ldconfig" "$root/usr/sbin/ldconfig"
  install -m 0755 "$x/usr/bin/busybox" "$root/usr/bin/busybox"
  for applet in "${PROBE_APPLETS[@]}"; do ln -s busybox "$root/usr/bin/$applet"; done
  # Merged /usr, as in Debian: /bin/sh, /sbin/ldconfig, /lib64/ld-linux... resolve.
  for x_dir in bin sbin lib lib64; do ln -s "usr/$x_dir" "$root/$x_dir"; done
  printf 'include /etc/ld.so.conf.d/*.conf\n' >"$root/etc/ld.so.conf"
  # Where nvidia-ctk's CDI spec mounts libnvidia-ml.so.<version> on Debian.
  printf '/usr/lib/x86_64-linux-gnu\n' >"$root/etc/ld.so.conf.d/x86_64-linux-gnu.conf"
  # A cache from the start, so the probe's own binaries run without the hook.
  "$root/usr/sbin/ldconfig" -r "$root"
  cat >"$ctx/Containerfile" <<EOF
FROM scratch
COPY rootfs/ /
ENV PATH=$PROBE_PATH
CMD ["sleep", "3600"]
EOF
}

# build_image REF CONTEXT OUT: podman build, save, repack to OUT/<name>-<tag>.oci.tar
# with its .digest and .image-id.
build_image() {
  local ref=$1 ctx=$2 out=$3 name tag file saved info
  name=${ref##*/}; tag=${name#*:}; name=${name%%:*}
  file="$out/$name-$tag.oci.tar"
  podman build --quiet --no-cache --timestamp 0 --format oci -t "$ref" "$ctx" >/dev/null
  saved=$(scratch_dir)
  podman save --quiet --format oci-archive -o "$saved/image.tar" "$ref"
  info=$(python3 "$src/oci_archive.py" repack "$saved/image.tar" "$file" "$ref")
  python3 -c 'import json,sys; i=json.loads(sys.argv[1]); print(i["digest"]); print(i["config"], file=sys.stderr)' \
    "$info" >"$file.digest" 2>"$file.image-id"
}

# Everything that goes into the images: a change to any rebuilds them.
content_key() {
  local debs=$1
  {
    sha256sum "$0" "$src/pause.c" "$src/oci_archive.py" | cut -d' ' -f1
    # shellcheck disable=SC2086 # a list of paths
    sha256sum $debs | cut -d' ' -f1
    gcc --version | head -1
    dpkg-query -W -f='${Version}\n' libc6-dev
    podman --version
    echo "$PAUSE_REF $PROBE_REF"
  } | sha256sum | cut -c1-12
}

build_all() {
  local out=$1 debs=$2 ctx
  mkdir -p "$out"
  ctx=$(scratch_dir); build_pause_context "$ctx"; build_image "$PAUSE_REF" "$ctx" "$out"
  ctx=$(scratch_dir); build_probe_context "$ctx" "$debs"; build_image "$PROBE_REF" "$ctx" "$out"
}

# Prints the cached directory of archives, building it when missing.
cached_build() {
  local debs key out stage
  debs=$(probe_debs)
  key=$(content_key "$debs")
  out="$GPUFLEET_CACHE/images-built/workload-$key"
  if [ ! -d "$out" ]; then
    log "building the workload images ($key)"
    stage=$(mktemp -d "$GPUFLEET_CACHE/images-built.XXXXXX")
    chmod 0755 "$stage"
    SCRATCH+=("$stage")
    build_all "$stage" "$debs"
    mkdir -p "$(dirname "$out")"
    rm -rf "$GPUFLEET_CACHE/images-built/workload-"*
    mv "$stage" "$out"
  fi
  echo "$out"
}

case "${1:-}" in
  build)
    cached_build
    ;;
  publish)
    out=$(cached_build)
    for archive in "$out"/*.oci.tar; do
      python3 "$here/mirror.py" add-file images "$archive" "$archive.digest" "$archive.image-id" >/dev/null
      log "files/images/$(basename "$archive") $(cat "$archive.digest")"
    done
    ;;
  reproduce)
    out=$(cached_build)
    again=$(scratch_dir)
    build_all "$again" "$(probe_debs)"
    status=0
    for archive in "$out"/*.oci.tar; do
      name=$(basename "$archive")
      if cmp -s "$archive" "$again/$name"; then
        log "reproduced: $name $(cat "$archive.digest") (same bytes)"
      else
        # The bytes are part of the promise: the mirror and the bundle pin the .sha256.
        log "NOT reproduced: $name $(cat "$archive.digest") then $(cat "$again/$name.digest")$(
          cmp -s "$archive.digest" "$again/$name.digest" && echo ' (same digest, other archive bytes)')"
        status=1
      fi
    done
    exit "$status"
    ;;
  *)
    die "usage: $(basename "$0") build | publish | reproduce"
    ;;
esac
