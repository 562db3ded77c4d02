#!/usr/bin/env bash
# Regenerate a full lock from its top-level list, on the Python it is for:
#   lock-requirements.sh           requirements.in          -> requirements.txt (.venv; the newest
#                                  Python >= 3.12, tests/harness/find-python.sh)
#   lock-requirements.sh oldest    requirements-oldest.in   -> requirements-oldest.txt (.venv-oldest)
#   lock-requirements.sh fallback  requirements-fallback.in -> requirements-fallback.txt (.venv where
#                                  no Python >= 3.12 is found)
# The last two on Python 3.11 (Debian 12's /usr/bin/python3.11), the oldest
# they must install on. LOCK_PYTHON=/path/to/python overrides the choice.
# The lock's first lines are the .in file's leading comment, so what the venv
# is for travels with it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
name=requirements${1:+-$1}
[ -f "$here/$name.in" ] || { echo "lock-requirements.sh: no $here/$name.in" >&2; exit 2; }
case "${1:-}" in
  "") python=${LOCK_PYTHON:-$("$here/find-python.sh")} \
    || { echo "lock-requirements.sh: no Python >= 3.12 found (find-python.sh); set LOCK_PYTHON" >&2; exit 2; } ;;
  *) python=${LOCK_PYTHON:-/usr/bin/python3.11}
    [ -x "$python" ] || { echo "lock-requirements.sh: no $python; set LOCK_PYTHON to a Python 3.11" >&2; exit 2; } ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$python" -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install -q --disable-pip-version-check -r "$here/$name.in"
{
  echo "# Full lock of $name.in on $("$python" -c 'import sys; print("Python %d.%d" % sys.version_info[:2])') (regenerate with tests/harness/lock-requirements.sh${1:+ $1})."
  sed -n '/^#/!q; p' "$here/$name.in"
  "$tmp/venv/bin/pip" freeze --all --exclude pip --exclude setuptools --exclude wheel
} >"$here/$name.txt"
