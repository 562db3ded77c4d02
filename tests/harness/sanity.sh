#!/usr/bin/env bash
# ansible-test insists on an ansible_collections/<namespace>/<name> tree, so
# copy what git would ship (tracked + new, not ignored) into one under build/.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(dirname "$0")/env.sh"

tree="$GPUFLEET_ROOT/build/sanity/ansible_collections/gpufleet/nvidia"
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
ansible-test sanity --venv --python "$python_version" --color "$@"
