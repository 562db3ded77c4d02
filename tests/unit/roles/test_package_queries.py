# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The roles' package reads on the knowledge base's one query format give what their own formats gave.

verify and upgrade each had their own dpkg-query (and rpm) format and parsed it in Jinja (the
container_toolkit role's read is apt_install's own now, in the pinned_packages step). The old formats
and expressions are kept here as the reference: for the same package states, the role's task as it
is now (read from the role's file) must give exactly what the old one gave.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import typing as t
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.tests.unit.playbook_run import local_play

ROOT = Path(__file__).resolve().parents[3]

WANT = {"unknown": "u", "install": "i", "hold": "h", "deinstall": "r", "purge": "p"}
STATUS = {
    "not-installed": "n",
    "config-files": "c",
    "half-installed": "H",
    "unpacked": "U",
    "half-configured": "F",
    "triggers-awaited": "W",
    "triggers-pending": "t",
    "installed": "i",
}

# (package, architecture qualifier, version, want, status, error flag): every case the parsers tell apart.
STATES = [
    ("nvidia-container-toolkit-base", "", "1.17.8-1", "hold", "installed", ""),
    ("libnvidia-container1", ":amd64", "1.17.8-1", "install", "installed", ""),
    ("libnvidia-container-tools", "", "1.17.7-1", "deinstall", "installed", ""),
    ("nvidia-container-toolkit", "", "", "unknown", "not-installed", ""),
    ("nvidia-container-toolkit-operator-extensions", "", "1.17.8-1", "install", "installed", "R"),
    ("docker-ce", "", "5:28.3.0-1~debian.12~bookworm", "install", "installed", ""),
    ("containerd", "", "1.7.24~ds1-6", "install", "half-configured", ""),
    ("cri-tools", "", "1.33.0-1.1", "deinstall", "config-files", ""),
    ("cri-o", "", "1.33.1-1.1", "hold", "unpacked", ""),
]


def dpkg_output(fmt: str) -> str:
    """What dpkg-query -W -f prints for STATES with one of the few fields the formats use."""
    lines = []
    for name, arch, version, want, status, eflag in STATES:
        fields = {
            "${binary:Package}": name + arch,
            "${Package}": name,
            "${Version}": version,
            "${db:Status-Abbrev}": WANT[want] + STATUS[status] + (eflag or " "),
            "${db:Status-Want}": want,
            "${db:Status-Status}": status,
        }
        line = re.sub(r"\$\{[^}]+\}", lambda m: fields[m.group(0)], fmt)
        lines.append(line.replace("\\n", "\n").replace("\\t", "\t"))
    return "".join(lines).rstrip("\r\n")  # as the command module returns it


def knowledge(name: str) -> str:
    from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import packages

    return getattr(packages, name)["value"]


def task(path: str, name_start: str) -> dict[str, t.Any]:
    tasks = yaml.safe_load((ROOT / path).read_text())
    return next(entry for entry in tasks if entry.get("name", "").startswith(name_start))


def play(tmp_path: Path, tasks: list[dict[str, t.Any]], variables: dict[str, t.Any]) -> dict[str, t.Any]:
    """Run tasks on localhost; the last writes {{ result | to_json }} to out.json."""
    out = tmp_path / "out.json"
    tasks = tasks + [{"ansible.builtin.copy": {"dest": str(out), "content": "{{ result | to_json }}", "mode": "0644"}}]
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "vars": variables, "tasks": tasks}]))
    local_play(playbook)
    return json.loads(out.read_text())


# -- verify -------------------------------------------------------------------------------------------------

OLD_VERIFY_DPKG = '${db:Status-Abbrev}{"${Package}": [{"version": "${Version}"}]}\\n'
OLD_VERIFY_KEEP = "{{ __old_stdout.splitlines() | select('match', '^[hi]i ') | map('regex_replace', '^[hi]i\\s+', '') | map('from_json') | combine }}"


def test_verify_reads_the_same_from_dpkg(tmp_path: Path) -> None:
    role_task = task("roles/verify/tasks/declared.yml", "Keep the installed packages' versions")
    result = play(
        tmp_path,
        [role_task, {"ansible.builtin.set_fact": {"result": {"new": "{{ __verify_packages_installed }}", "old": OLD_VERIFY_KEEP}}}],
        {
            "__verify_reads": {"commands": {"dpkg": {"rc": 1, "stdout": dpkg_output(knowledge("DPKG_QUERY_FORMAT"))}, "rpm": {"rc": 127, "stdout": ""}}},
            "__old_stdout": dpkg_output(OLD_VERIFY_DPKG),
        },
    )
    assert result["new"] == result["old"]
    assert sorted(result["new"]) == ["docker-ce", "libnvidia-container1", "nvidia-container-toolkit-base"]


def test_verify_reads_the_same_from_rpm(tmp_path: Path) -> None:
    role_task = task("roles/verify/tasks/declared.yml", "Keep the installed packages' versions")
    new = "nvidia-container-toolkit-base\t0:1.17.8-1\nlibnvidia-container1\t0:1.17.8-1\n"
    old = 'ii {"nvidia-container-toolkit-base": [{"version": "1.17.8-1"}]}\nii {"libnvidia-container1": [{"version": "1.17.8-1"}]}\n'
    result = play(
        tmp_path,
        [role_task, {"ansible.builtin.set_fact": {"result": {"new": "{{ __verify_packages_installed }}", "old": OLD_VERIFY_KEEP}}}],
        {
            "__verify_reads": {"commands": {"dpkg": {"rc": 127, "stdout": ""}, "rpm": {"rc": 0, "stdout": new}}},
            "__old_stdout": old,
        },
    )
    assert result["new"] == result["old"] and len(result["new"]) == 2


def test_verify_queries_the_toolkit_and_matrix_packages(tmp_path: Path) -> None:
    from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import packages

    result = play(
        tmp_path,
        [{"ansible.builtin.include_vars": str(ROOT / "roles/verify/vars/main.yml")}, {"ansible.builtin.set_fact": {"result": "{{ __verify_packages }}"}}],
        {},
    )
    expected = list(packages.toolkit_packages())
    for names in list(packages.version_packages().values())[1:]:
        expected += names
    assert result == expected


# -- upgrade ------------------------------------------------------------------------------------------------

OLD_UPGRADE_SCRIPT = """set -- "$@"
if command -v dpkg-query >/dev/null 2>&1; then
  dpkg-query -W -f='${db:Status-Abbrev}{"${Package}": [{"version": "${Version}"}]}\\n' "$@" 2>/dev/null || true
elif command -v rpm >/dev/null 2>&1; then
  rpm -q --qf 'ii {"%{NAME}": [{"version": "%{VERSION}-%{RELEASE}"}]}\\n' "$@" || true
fi
"""


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="needs dpkg-query")
def test_upgrade_reads_the_same_on_this_machine(tmp_path: Path) -> None:
    """The role's query and parse, run for real, against the old script and parse."""
    plan = (ROOT / "roles/upgrade/tasks/plan.yml").read_text()
    parse = re.search(r"\{'packages': (.*?)\}\n\s*\| gpufleet\.nvidia\.verify_check\('container_toolkit'", plan, re.DOTALL).group(1)
    query = task("roles/upgrade/tasks/plan.yml", "Read the installed versions of the toolkit's packages")
    query["register"] = "__upgrade_package_query"
    old = subprocess.run(
        ["sh", "-c", OLD_UPGRADE_SCRIPT, "sh", "bash", "dpkg", "gpufleet-no-such-package"], stdout=subprocess.PIPE, text=True, check=True
    ).stdout.rstrip("\r\n")
    result = play(
        tmp_path,
        [query, {"ansible.builtin.set_fact": {"result": {"new": "{{ " + parse + " }}", "old": OLD_VERIFY_KEEP}}}],
        {
            "__upgrade_packages": ["bash", "dpkg", "gpufleet-no-such-package"],
            "__old_stdout": old,
        },
    )
    assert result["new"] == result["old"]
    assert sorted(result["new"]) == ["bash", "dpkg"]
