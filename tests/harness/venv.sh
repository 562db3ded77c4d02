#!/usr/bin/env bash
# The tool venv, built once per set of inputs and shared by every checkout:
# it lives under $GPUFLEET_CACHE/venv/<key> (the key hashes the Python, the
# locked requirements and this script) and $GPUFLEET_VENV (.venv) links to
# it. A fresh clone whose requirements are unchanged starts with a venv.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(dirname "$0")/env.sh"
here=$(cd "$(dirname "$0")" && pwd)

python=${1:?usage: venv.sh PYTHON [oldest]}
flavour=${2:-}
case "$flavour" in
  "") link=$GPUFLEET_VENV ;;
  oldest) link=$GPUFLEET_VENV_OLDEST ;;
  *) die "venv.sh: unknown venv '$flavour' (none, or oldest)" ;;
esac
requirements=$here/requirements${flavour:+-$flavour}.txt
# ansible-core 2.20 and later need Python 3.12 on the controller. Where the
# Makefile found none (tests/harness/find-python.sh), the main venv is the
# same tools on the oldest claimed ansible-core (requirements-fallback.txt).
if [ -z "$flavour" ] && ! "$python" -c 'import sys; sys.exit(sys.version_info[:2] < (3, 12))'; then
  requirements=$here/requirements-fallback.txt
  log "no Python >= 3.12 here: the tool venv is ansible-core $(sed -n 's/^ansible-core==//p' "$requirements") on $("$python" -c 'import sys; print("Python %d.%d" % sys.version_info[:2])') (requirements-fallback.txt); install python3.13 for ansible-core $(sed -n 's/^ansible-core==//p' "$here/requirements.txt")"
fi
key=$({ "$python" -c 'import sys; print(sys.version)'; cat "$requirements" "$0"; } | sha256sum | cut -c1-16)
target=$GPUFLEET_CACHE/venv/$key

# uv installs the lock into the venv: it downloads in parallel and does not
# byte-compile ansible's 20,000 files up front. Measured on the 2-core
# machine, cold caches, beside a test run: 41 s for requirements.txt (and
# 13 s to bootstrap uv once) where pip took 181 s; the venv was a cold
# demo's longest path. uv is pinned here (this script is part of the key)
# and installed by pip once per pin into the cache; its downloads are cached
# there too, so removing $GPUFLEET_CACHE makes every run cold again.
UV_VERSION=0.13.9
uv_home=$GPUFLEET_CACHE/uv/$UV_VERSION
export UV_CACHE_DIR=$GPUFLEET_CACHE/uv/cache

mkdir -p "$GPUFLEET_CACHE/venv" "$GPUFLEET_CACHE/uv"
(
  exec 8>"$uv_home.lock"
  flock 8
  if [ ! -x "$uv_home/bin/uv" ]; then
    rm -rf "$uv_home"
    "$python" -m venv "$uv_home"
    "$uv_home/bin/pip" install --quiet --disable-pip-version-check "uv==$UV_VERSION"
  fi
)
exec 9>"$target.lock"
flock 9
if [ ! -f "$target/.installed" ]; then
  log "building the ${flavour:-tool} venv $target"
  # A venv is not relocatable: build it where it stays, from scratch. It
  # keeps its own pip (ansible-test and users expect one).
  rm -rf "$target"
  "$python" -m venv "$target"
  "$uv_home/bin/uv" pip install --quiet --python "$target/bin/python" -r "$requirements"
  touch "$target/.installed"
fi
# Replace an old in-checkout venv (a directory) or a link to another key.
if [ -d "$link" ] && [ ! -L "$link" ]; then rm -rf "$link"; fi
ln -sfn "$target" "$link"
