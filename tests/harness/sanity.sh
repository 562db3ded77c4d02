#!/usr/bin/env bash
# ansible-test insists on an ansible_collections/<namespace>/<name> tree, so
# copy what git would ship (tracked + new, not ignored) into one under build/.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(dirname "$0")/env.sh"

# --changed-from BASE: only the files that differ from BASE (committed,
# staged, unstaged or untracked), for the inner loop (make check).
targets=()
if [ "${1:-}" = --changed-from ]; then
  base=$(cd "$GPUFLEET_ROOT" && git merge-base "${2:?usage: sanity.sh --changed-from BASE}" HEAD) \
    || die "sanity: no common history with $2; set GPUFLEET_BASE to the branch you started from"
  shift 2
  mapfile -t targets < <(cd "$GPUFLEET_ROOT" && { git diff --name-only "$base"; git ls-files -o --exclude-standard; } \
    | sort -u | while read -r path; do [ -f "$path" ] && echo "$path"; done)
  if [ "${#targets[@]}" -eq 0 ]; then
    log "sanity: no file differs from $base; nothing to check"
    exit 0
  fi
  log "sanity: ${#targets[@]} changed file(s)"
fi

# The ansible-test that runs is the first python's on PATH (make sanity: the
# tool venv's; make sanity-oldest: .venv-oldest's). One tree per ansible-core
# minor, so that both can run side by side.
core_minor=$(python -c 'import ansible.release as r; print(".".join(r.__version__.split(".")[:2]))')
log "sanity: ansible-core $core_minor"
# ansible-test keeps its venvs and caches under ~/.ansible/test and deletes
# and remakes a venv it finds stale: two ansible-tests sharing that tree
# (make test runs sanity and sanity-oldest side by side) break each other's
# venvs half-made. So each ansible-core minor gets its own HOME, kept in the
# cache so that its venvs outlive `make clean`, and one run at a time uses
# it (two checkouts, or the fallback venv, whose minor is the oldest's).
home=$GPUFLEET_CACHE/ansible-test/$core_minor
mkdir -p "$home"
exec 8>"$home.lock"
if ! flock -n 8; then
  log "sanity: waiting for the other ansible-test $core_minor run ($home.lock)"
  flock 8
fi
export HOME=$home
tree="$GPUFLEET_ROOT/build/sanity/$core_minor/ansible_collections/gpufleet/nvidia"
mkdir -p "$tree"
(cd "$GPUFLEET_ROOT" && git ls-files -co --exclude-standard -z) \
  | rsync -a --delete --from0 --files-from=- "$GPUFLEET_ROOT/" "$tree/"
# rsync --files-from does not delete; drop files git no longer lists.
(cd "$tree" && comm -13 <(cd "$GPUFLEET_ROOT" && git ls-files -co --exclude-standard | sort) \
  <(find . -type f -not -path './tests/output/*' -printf '%P\n' | sort) | xargs -r rm -f)
cd "$tree"
git init -q . 2>/dev/null || true
git add -A >/dev/null
python_version=$(python -c 'import sys; print("%d.%d" % sys.version_info[:2])')
# ansible-test --venv bootstraps pip with a script from a host we cannot
# reach; give it our stand-in (see ansible-test-get-pip.py) under the name it
# looks for.
pip_version=$(python - <<'PY'
from ansible_test._internal.python_requirements import get_venv_packages
from ansible_test._internal.host_configs import NativePythonConfig
print(get_venv_packages(NativePythonConfig(version="%d.%d" % __import__("sys").version_info[:2]))["pip"])
PY
)
cache="$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py"
mkdir -p "$(dirname "$cache")"
cp "$GPUFLEET_ROOT/tests/harness/ansible-test-get-pip.py" "$cache"
ansible-test sanity --venv --python "$python_version" --color yes "$@" "${targets[@]}"
