#!/usr/bin/env bash
# Regenerate requirements.txt (the full lock) from requirements.in.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install -q -r "$here/requirements.in"
{
  echo "# Pinned tool set of the test ground (full lock, regenerate with tests/harness/lock-requirements.sh)."
  "$tmp/venv/bin/pip" freeze --all --exclude pip --exclude setuptools --exclude wheel
} >"$here/requirements.txt"
