"""What the collection claims about itself is what `make test` tests.

meta/runtime.yml's requires_ansible names the ansible-core minors the
collection supports. `make test` runs sanity and the unit tests on two of
them: the oldest (tests/harness/requirements-oldest.txt, .venv-oldest) and
the newest (tests/harness/requirements.txt, .venv). The claim and the two
locks must move together, or the claim says more than was tested.

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
LOCKS = {"oldest": HARNESS / "requirements-oldest.txt", "newest": HARNESS / "requirements.txt"}
PIN = re.compile(r"^ansible-core==(\d+)\.(\d+)\.(\d+)\s*$", re.MULTILINE)
# One clause of a PEP 440 specifier set, as requires_ansible writes them.
CLAUSE = re.compile(r"^\s*(>=|<)\s*(\d+)\.(\d+)\.(\d+)\s*$")
VERSION_ADDED = re.compile(r"^\s*version_added:\s*['\"]?([^'\"\s#]+)", re.MULTILINE)


def locked_minor(lock: Path) -> tuple[int, int]:
    pins = PIN.findall(lock.read_text())
    assert len(pins) == 1, "{0}: expected one ansible-core==X.Y.Z pin, found {1}".format(lock, pins)
    return int(pins[0][0]), int(pins[0][1])


def claim() -> dict[str, tuple[int, int, int]]:
    """requires_ansible as {operator: version}; only >= and < are used here."""
    text = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())["requires_ansible"]
    clauses = {}
    for part in text.split(","):
        match = CLAUSE.match(part)
        assert match, "meta/runtime.yml requires_ansible: '{0}' is not '>=X.Y.Z' or '<X.Y.Z'".format(part)
        clauses[match.group(1)] = tuple(int(n) for n in match.group(2, 3, 4))
    assert ">=" in clauses, "meta/runtime.yml requires_ansible: no lower bound (>=X.Y.0)"
    return clauses


def test_the_oldest_claimed_minor_is_the_oldest_venvs():
    lower = claim()[">="]
    assert lower[2] == 0, "requires_ansible: the lower bound is a minor's first release (>={0}.{1}.0)".format(*lower)
    assert locked_minor(LOCKS["oldest"]) == lower[:2], (
        "meta/runtime.yml claims ansible-core >= {0}.{1}; tests/harness/requirements-oldest.in pins {2}.{3}: "
        "change the pin and the claim together (tests/harness/lock-requirements.sh oldest)".format(*lower[:2], *locked_minor(LOCKS["oldest"]))
    )


def test_the_newest_claimed_minor_is_the_main_venvs():
    clauses = claim()
    newest = locked_minor(LOCKS["newest"])
    assert newest >= clauses[">="][:2], "the main venv's ansible-core {0}.{1} is below requires_ansible".format(*newest)
    assert "<" in clauses, "requires_ansible has no upper bound: it claims minors no venv tests"
    upper = clauses["<"]
    assert upper[2] == 0 and upper[:2] == (newest[0], newest[1] + 1), (
        "requires_ansible's upper bound must be <{0}.{1}.0, the minor after the newest tested (tests/harness/requirements.txt pins {0}.{2})".format(
            newest[0], newest[1] + 1, newest[1]
        )
    )


def test_every_tested_minor_between_oldest_and_newest():
    oldest, newest = locked_minor(LOCKS["oldest"]), locked_minor(LOCKS["newest"])
    assert oldest[0] == newest[0] and newest[1] - oldest[1] <= 1, (
        "the claim spans {0}.{1} to {2}.{3}: a minor between them is not tested; add a venv for it or narrow requires_ansible".format(*oldest, *newest)
    )


@pytest.mark.parametrize("venv", sorted(LOCKS))
def test_each_tested_minor_has_its_sanity_ignore_file(venv):
    major, minor = locked_minor(LOCKS[venv])
    ignore = ROOT / "tests" / "sanity" / "ignore-{0}.{1}.txt".format(major, minor)
    assert ignore.is_file(), "ansible-test {0}.{1} reads {2}; it is missing".format(major, minor, ignore)


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
