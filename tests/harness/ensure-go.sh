#!/usr/bin/env bash
# Print the path of a `go` that can build every module in go-tools.txt.
#
# A local Go at least as new as the pinned toolchain is used as it is (PATH,
# /usr/local/go, Debian's /usr/lib/go-*). Otherwise the pinned toolchain is
# downloaded once from the Go module proxy (golang.org/toolchain, the module
# `GOTOOLCHAIN=auto` itself would fetch), checked against the sha256 in
# go-tools.txt and unpacked under $GPUFLEET_CACHE/go/toolchain.
#
# Why not Debian's golang packages: bookworm (the test host) has Go 1.19 and
# bookworm-backports 1.23, older than the go directives of containerd 2.3 (1.26.8)
# and the toolkit 1.20 (1.25); trixie-backports has 1.26/1.27, but only for
# Debian 13 hosts. The proxy path works on both with nothing installed by hand.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(dirname "$0")/env.sh"
here=$(cd "$(dirname "$0")" && pwd)

read -r _ want digest < <(grep '^toolchain ' "$here/go-tools.txt")
proxy=${GPUFLEET_GOPROXY:-https://proxy.golang.org}

# go1.26.8 -> 1.26.8, so `sort -V` compares versions.
new_enough() {
  local have
  have=$("$1" env GOVERSION 2>/dev/null) || return 1
  have=${have#go}; have=${have%%[ -]*}
  [ "$(printf '%s\n%s\n' "${want#go}" "$have" | sort -V | head -n1)" = "${want#go}" ]
}

cached="$GPUFLEET_CACHE/go/toolchain/$want/bin/go"
for candidate in "$cached" "$(command -v go || true)" /usr/local/go/bin/go /usr/lib/go-*/bin/go; do
  if [ -z "$candidate" ] || [ ! -x "$candidate" ]; then continue; fi
  if new_enough "$candidate"; then echo "$candidate"; exit 0; fi
done

dest="$GPUFLEET_CACHE/go/toolchain"
mkdir -p "$dest"
# make starts Go builds from two places (go-tools.sh and the mirror's
# seeds): one downloads, the other waits and finds it cached.
exec 8>"$dest/.download.lock"
flock 8
if new_enough "$cached"; then echo "$cached"; exit 0; fi
log "no local Go >= ${want#go}; downloading $want from $proxy (about 70 MB, once)"
zip=$(mktemp "$dest/.download.XXXXXX")
trap 'rm -f "$zip"' EXIT
curl -fsSL --retry 3 -o "$zip" "$proxy/golang.org/toolchain/@v/v0.0.1-$want.linux-amd64.zip" \
  || die "could not download $want from $proxy; set GPUFLEET_GOPROXY to a reachable Go module proxy"
echo "$digest  $zip" | sha256sum -c --quiet - || die "$want toolchain zip does not match the sha256 in go-tools.txt"
# Module zips keep each file's Unix mode; zipfile.extractall does not restore it.
python3 - "$zip" "$dest/$want" <<'PY'
import os, shutil, sys, zipfile
archive, target = sys.argv[1], sys.argv[2]
tmp = target + ".tmp"
shutil.rmtree(tmp, ignore_errors=True)
with zipfile.ZipFile(archive) as zf:
    for info in zf.infolist():
        # golang.org/toolchain@v0.0.1-goX.linux-amd64/<path>
        parts = info.filename.split("/", 2)
        if len(parts) < 3 or not parts[2] or info.is_dir():
            continue
        rel = parts[2]
        path = os.path.join(tmp, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with zf.open(info) as src, open(path, "wb") as dst:
            shutil.copyfileobj(src, dst)
        mode = (info.external_attr >> 16) & 0o777
        os.chmod(path, mode or 0o644)
shutil.rmtree(target, ignore_errors=True)
os.rename(tmp, target)
PY
new_enough "$cached" || die "the downloaded toolchain at $cached does not run"
echo "$cached"
