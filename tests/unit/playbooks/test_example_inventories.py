# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The example inventories parse without a warning, given as their directory.

Ansible reads every file in an inventory directory as an inventory source:
a mig-parted config kept there printed six warnings per run ("Skipping
'version' as this is not a valid group definition"), which a newcomer reads
as "this does not work yet". Data files live beside the inventory
directories (inventory/examples/files/<example>/), and the paths pointing at
them must resolve.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.tests.unit.playbook_run import BIN
from ansible_collections.gpufleet.nvidia.tests.unit.playbooks.test_validate import EXAMPLES, ansible_env

INVENTORIES = ("simulated", "fleet", "airgapped")


def inventory_list(directory: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "ansible-inventory"), "-i", str(directory), "--list"],
        env=ansible_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("name", INVENTORIES)
def test_the_example_directory_parses_without_a_warning(name):
    run = inventory_list(EXAMPLES / name)
    assert run.returncode == 0, run.stderr
    assert "WARNING]" not in run.stderr + run.stdout, run.stderr
    assert yaml.safe_load(run.stdout)["_meta"]["hostvars"], run.stdout


def test_a_data_file_inside_the_directory_is_what_the_check_catches(tmp_path):
    """The check above can fail: the old layout, a mig-parted config in files/, warns."""
    copy = tmp_path / "simulated"
    shutil.copytree(EXAMPLES / "simulated", copy)
    (copy / "files").mkdir()
    shutil.copy(EXAMPLES / "files" / "simulated" / "mig-parted-config.yaml", copy / "files")
    run = inventory_list(copy)
    assert "[WARNING]: Skipping 'version' as this is not a valid group definition" in run.stderr, run.stderr


@pytest.mark.parametrize("name", INVENTORIES)
def test_the_examples_hold_inventory_only(name):
    """Files Ansible does not read as inventory: group_vars/, host_vars/, hosts.yml."""
    assert sorted(p.name for p in (EXAMPLES / name).iterdir()) == ["group_vars", "hosts.yml"]


@pytest.mark.parametrize("name", ("fleet", "airgapped"))
def test_the_mig_config_path_resolves_beside_the_inventory(name):
    declared = yaml.safe_load((EXAMPLES / name / "group_vars" / "inference.yml").read_text())["mig_config_src"]
    path = declared.replace("{{ inventory_dir }}", str(EXAMPLES / name))
    assert Path(path).resolve() == (EXAMPLES / "files" / name / "mig-parted-config.yaml").resolve()
    assert Path(path).is_file()
