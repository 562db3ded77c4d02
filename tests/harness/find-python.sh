#!/usr/bin/env bash
# Print the newest CPython >= 3.12 this machine has, the one the main tool
# venv runs on (ansible-core 2.20 and later need 3.12 on the controller);
# print nothing and exit 1 if there is none. Looked for, newest first:
#   python3.14, python3.13, python3.12 on PATH (Debian 13's /usr/bin/python3.13);
#   pyenv's builds, $PYENV_ROOT (default ~/.pyenv)/versions/3.1x.y/bin/python3.
# pyenv's shims are skipped: a shim answers for the selected version only and
# fails for the others, so each candidate must really run and say its version.
set -euo pipefail

minimum=12

runs() {
  "$1" -c "import sys, venv, ssl; sys.exit(sys.version_info[:2] < (3, $minimum))" 2>/dev/null
}

pyenv_root=${PYENV_ROOT:-$HOME/.pyenv}
for minor in 14 13 $minimum; do
  candidates=()
  # Every python3.1x on PATH, not only the first: pyenv's shims come first
  # where pyenv is set up, Debian's /usr/bin after them.
  while IFS= read -r found; do
    [[ $found == "$pyenv_root/shims/"* ]] || candidates+=("$found")
  done < <(type -ap "python3.$minor" || true)
  # The highest patch release of this minor first (3.13.10 after 3.13.9).
  while IFS= read -r dir; do
    candidates+=("$dir/bin/python3")
  done < <(find "$pyenv_root/versions" -mindepth 1 -maxdepth 1 -regex ".*/3\.$minor\.[0-9]+" 2>/dev/null | sort -rV)
  for python in "${candidates[@]}"; do
    if [ -x "$python" ] && runs "$python"; then
      echo "$python"
      exit 0
    fi
  done
done
exit 1
