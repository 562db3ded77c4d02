#!/usr/bin/env bash
# Regenerate a full lock from its top-level list:
#   lock-requirements.sh          requirements.in        -> requirements.txt (the tool venv, .venv)
#   lock-requirements.sh oldest   requirements-oldest.in -> requirements-oldest.txt (.venv-oldest)
# The lock's first lines are the .in file's leading comment, so what the venv
# is for travels with it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
name=requirements${1:+-$1}
[ -f "$here/$name.in" ] || { echo "lock-requirements.sh: no $here/$name.in" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install -q -r "$here/$name.in"
{
  echo "# Full lock of $name.in (regenerate with tests/harness/lock-requirements.sh${1:+ $1})."
  sed -n '/^#/!q; p' "$here/$name.in"
  "$tmp/venv/bin/pip" freeze --all --exclude pip --exclude setuptools --exclude wheel
} >"$here/$name.txt"
