# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""knowledge: the lookup roles read the knowledge base's tables with."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ansible.errors import AnsibleLookupError

from ansible_collections.gpufleet.nvidia.plugins.lookup.knowledge import LookupModule, modules, table
from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import packages

ROOT = Path(__file__).resolve().parents[4]


def test_a_table_comes_back_as_plain_lists() -> None:
    rows = table("packages.TOOLKIT_PACKAGE_SETS")
    assert isinstance(rows, list) and isinstance(rows[0]["sets"], list)
    assert [row["package"] for row in rows] == list(packages.toolkit_packages())
    assert table("packages.DPKG_QUERY_FORMAT")["value"] == packages.DPKG_QUERY_FORMAT["value"]


def test_a_caller_cannot_change_the_table() -> None:
    table("packages.COMPONENT_PACKAGES")[0]["packages"].append("changed")
    assert "changed" not in packages.COMPONENT_PACKAGES[0]["packages"]


def test_several_terms_give_several_tables() -> None:
    result = LookupModule().run(["packages.RPM_QUERY_FORMAT", "packages.DPKG_QUERY_FORMAT"])
    expected = [packages.RPM_QUERY_FORMAT["value"], packages.DPKG_QUERY_FORMAT["value"]]
    assert [entry["value"] for entry in result] == expected


@pytest.mark.parametrize(
    "term, message",
    [
        ("packages.NOPE", "knowledge: 'packages.NOPE' names no table of packages; its tables: packages.COMPONENT_PACKAGES, packages.DPKG_QUERY_FORMAT"),
        ("packages.toolkit_packages", "names no table of packages"),  # a function, not a table
        ("packages._TABLE", "names no table of packages"),
        (
            "nope.TABLE",
            "knowledge: 'nope.TABLE' names no module of the knowledge base; use <module>.<TABLE> with a "
            "module of: cuda, drivers, engines, gfd_labels, gpus, health, kubernetes, packages, toolkit",
        ),
        ("packages", "names no table of packages"),
    ],
)
def test_unknown_names_are_refused_with_what_exists(term: str, message: str) -> None:
    with pytest.raises(AnsibleLookupError) as caught:
        table(term)
    assert message in str(caught.value)


def test_no_term_is_refused() -> None:
    with pytest.raises(AnsibleLookupError, match="name a table as <module>.<TABLE>"):
        LookupModule().run([])


def test_modules_are_the_package_s_public_modules() -> None:
    assert "packages" in modules()
    assert all(not name.startswith("_") for name in modules())


def test_a_play_reads_a_table(tmp_path: Path) -> None:
    """Through ansible-playbook, as a role reads it: lookup() gives the table itself."""
    playbook = tmp_path / "play.yml"
    out = tmp_path / "out.json"
    playbook.write_text(
        """
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.copy:
        dest: %s
        content: >-
          {{ {'full': lookup('gpufleet.nvidia.knowledge', 'packages.TOOLKIT_PACKAGE_SETS')
                      | selectattr('sets', 'contains', 'full') | map(attribute='package') | list,
              'format': lookup('gpufleet.nvidia.knowledge', 'packages.DPKG_QUERY_FORMAT').value} | to_json }}
        mode: "0644"
"""
        % out
    )
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / "build" / "collections"))
    proc = subprocess.run(
        [
            str(Path(sys.executable).with_name("ansible-playbook")),
            "-i",
            "localhost,",
            "-c",
            "local",
            str(playbook),
            "-e",
            "ansible_python_interpreter={0}".format(sys.executable),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout.decode()
    assert json.loads(out.read_text()) == {"full": list(packages.toolkit_packages("full")), "format": packages.DPKG_QUERY_FORMAT["value"]}
