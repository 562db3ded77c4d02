"""What the collection claims about itself is what `make test` tests.

meta/runtime.yml's requires_ansible names the oldest ansible-core the
collection supports, with no upper bound. `make test` runs sanity and the
unit tests on two minors: the oldest claimed (tests/harness/requirements-oldest.txt,
.venv-oldest, Python 3.11) and the newest released (tests/harness/requirements.txt,
.venv, Python >= 3.12). Where no Python >= 3.12 is found, .venv is built
from tests/harness/requirements-fallback.txt: the main tools on the oldest
claimed ansible-core. The claim, the three locks, the sanity ignore files
and the README's supported matrix must move together, or the claim says
more than was tested.

version_added of every module, plugin and option names a version of this
collection that exists: a released one (changelogs/changelog.yaml) or the
one being made (galaxy.yml), never a later one.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from ansible.module_utils.compat.version import LooseVersion

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "tests" / "harness"
LOCKS = {
    "oldest": HARNESS / "requirements-oldest.txt",
    "newest": HARNESS / "requirements.txt",
    "fallback": HARNESS / "requirements-fallback.txt",
}
# The Python each lock is made on and must install on (lock-requirements.sh
# writes it into the lock's first line): ansible-core 2.20 and later need
# Python 3.12 on the controller; the oldest and fallback venvs are what a
# bare Debian 12 (Python 3.11) runs.
LOCK_PYTHON = {"oldest": (3, 11), "fallback": (3, 11)}
NEWEST_LOCK_PYTHON_AT_LEAST = (3, 12)
PIN = re.compile(r"^ansible-core==(\d+)\.(\d+)\.(\d+)\s*$", re.MULTILINE)
LOCKED_ON = re.compile(r"^# Full lock of \S+ on Python (\d+)\.(\d+) ")
# requires_ansible as the collection writes it: one lower bound, a minor's
# first release, and no upper bound (a new ansible-core must not warn that
# the collection does not support it).
CLAIM = re.compile(r"^>=(\d+)\.(\d+)\.0$")
IGNORE_FILE = re.compile(r"^ignore-(\d+)\.(\d+)\.txt$")
VERSION_ADDED = re.compile(r"^\s*version_added:\s*['\"]?([^'\"\s#]+)", re.MULTILINE)


def locked_version(lock: Path) -> tuple[int, int, int]:
    pins = PIN.findall(lock.read_text())
    assert len(pins) == 1, "{0}: expected one ansible-core==X.Y.Z pin, found {1}".format(lock, pins)
    return tuple(int(n) for n in pins[0])


def locked_minor(lock: Path) -> tuple[int, int]:
    return locked_version(lock)[:2]


def locked_on(lock: Path) -> tuple[int, int]:
    match = LOCKED_ON.match(lock.read_text())
    assert match, "{0}: the first line does not say which Python it was locked on: re-lock with tests/harness/lock-requirements.sh".format(lock)
    return int(match.group(1)), int(match.group(2))


def claimed_oldest() -> tuple[int, int]:
    text = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())["requires_ansible"]
    match = CLAIM.match(text.strip())
    assert match, "meta/runtime.yml requires_ansible is '{0}': write '>=X.Y.0', the oldest supported minor, with no upper bound".format(text)
    return int(match.group(1)), int(match.group(2))


def test_the_oldest_claimed_minor_is_the_oldest_venvs():
    lower = claimed_oldest()
    assert locked_minor(LOCKS["oldest"]) == lower, (
        "meta/runtime.yml claims ansible-core >= {0}.{1}; tests/harness/requirements-oldest.in pins {2}.{3}: "
        "change the pin and the claim together (tests/harness/lock-requirements.sh oldest)".format(*lower, *locked_minor(LOCKS["oldest"]))
    )


def test_the_fallback_venv_runs_the_oldest_venvs_ansible_core():
    """Without Python 3.12 the main venv is the oldest lane's ansible-core, to the patch release."""
    assert locked_version(LOCKS["fallback"]) == locked_version(LOCKS["oldest"]), (
        "tests/harness/requirements-fallback.in pins ansible-core {0}.{1}.{2}, requirements-oldest.in {3}.{4}.{5}: "
        "pin the same one in both and re-lock both".format(*locked_version(LOCKS["fallback"]), *locked_version(LOCKS["oldest"]))
    )


def test_the_main_venv_is_newer_than_the_oldest():
    newest, oldest = locked_minor(LOCKS["newest"]), locked_minor(LOCKS["oldest"])
    assert newest > oldest, "the main venv's ansible-core {0}.{1} is not newer than the oldest venv's {2}.{3}: one lane would test twice".format(
        *newest, *oldest
    )


@pytest.mark.parametrize("venv", sorted(LOCK_PYTHON))
def test_the_python_3_11_locks_are_made_on_3_11(venv):
    assert locked_on(LOCKS[venv]) == LOCK_PYTHON[venv], (
        "{0} must be locked on Python {1}.{2}, the one it installs on: LOCK_PYTHON=... lock-requirements.sh {3}".format(
            LOCKS[venv].name, *LOCK_PYTHON[venv], venv
        )
    )


def test_the_main_lock_is_made_on_python_3_12_or_later():
    assert locked_on(LOCKS["newest"]) >= NEWEST_LOCK_PYTHON_AT_LEAST, (
        "requirements.txt must be locked on Python >= 3.12 (ansible-core {0}.{1} needs it)".format(*locked_minor(LOCKS["newest"]))
    )


def test_each_claimed_minor_up_to_the_newest_has_its_sanity_ignore_file():
    """ansible-test <minor> reads tests/sanity/ignore-<minor>.txt; none is kept for a minor no longer claimed."""
    oldest, newest = locked_minor(LOCKS["oldest"]), locked_minor(LOCKS["newest"])
    assert oldest[0] == newest[0], "a new ansible-core major: list its minors here"
    wanted = {(oldest[0], minor) for minor in range(oldest[1], newest[1] + 1)}
    present = {tuple(int(n) for n in m.groups()) for m in (IGNORE_FILE.match(p.name) for p in (ROOT / "tests" / "sanity").iterdir()) if m}
    assert present == wanted, "tests/sanity holds ignore files for {0}; the claimed minors up to the newest tested are {1}".format(
        sorted("{0}.{1}".format(*v) for v in present), sorted("{0}.{1}".format(*v) for v in wanted)
    )


def test_the_running_ansible_core_is_a_locked_one():
    """The venv running these tests was built from one of the locks (a stale venv tests another core)."""
    from ansible.release import __version__

    locked = {"{0}.{1}.{2}".format(*locked_version(lock)) for lock in LOCKS.values()}
    assert __version__ in locked, "ansible-core {0} runs the tests; the locks pin {1}: rebuild the venvs (make venv venv-oldest)".format(
        __version__, sorted(locked)
    )


def test_the_readme_states_the_claim_and_the_tested_versions():
    """The README's supported matrix names the claim and the two tested ansible-core releases."""
    readme = (ROOT / "README.md").read_text()
    matrix = readme[readme.index("## Supported matrix") :]
    matrix = matrix[: matrix.index("\n## ", 1)]
    claim = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())["requires_ansible"]
    wanted = ['requires_ansible: "{0}"'.format(claim)] + ["{0}.{1}.{2}".format(*locked_version(LOCKS[venv])) for venv in ("oldest", "newest")]
    missing = [text for text in wanted if text not in matrix]
    assert not missing, "README.md's Supported matrix does not say {0}".format(missing)


def collection_versions() -> tuple[str, set[str]]:
    current = yaml.safe_load((ROOT / "galaxy.yml").read_text())["version"]
    releases = yaml.safe_load((ROOT / "changelogs" / "changelog.yaml").read_text()).get("releases") or {}
    return current, set(releases) | {current}


def documented_files() -> list[Path]:
    plugins = ROOT / "plugins"
    return sorted(p for p in plugins.rglob("*") if p.suffix in (".py", ".yml", ".yaml") and "module_utils" not in p.parts and "plugin_utils" not in p.parts)


def test_version_added_names_a_version_of_this_collection():
    current, known = collection_versions()
    wrong = []
    for path in documented_files():
        for version in VERSION_ADDED.findall(path.read_text()):
            if version not in known or LooseVersion(version) > LooseVersion(current):
                wrong.append("{0}: version_added {1}".format(path.relative_to(ROOT), version))
    assert not wrong, "galaxy.yml's version is {0}, released: {1}; set these to the version that added them:\n{2}".format(
        current, sorted(known - {current}) or "none", "\n".join(wrong)
    )


def test_the_version_added_check_reads_the_plugins():
    """The check above is not vacuous: it finds the modules' version_added."""
    found = [p for p in documented_files() if VERSION_ADDED.search(p.read_text())]
    modules = sorted((ROOT / "plugins" / "modules").glob("*.py"))
    assert modules and set(modules) <= set(found)
