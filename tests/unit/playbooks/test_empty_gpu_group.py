# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""site.yml, validate.yml and upgrade.yml on a GPU group that matches no host.

A mistyped group used to skip every play and exit 0, so a CI job stayed
green having done nothing. Each playbook must stop naming gpufleet_gpu_group
and the inventory's groups, also under --tags and --limit, and pass only when
the user says the group is empty on purpose. The example fleet's hosts are
SSH hosts that do not exist: any contact would make them unreachable.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.playbooks.test_validate import EXAMPLES, playbook

INVENTORY = str(EXAMPLES / "fleet")
PLAYBOOKS = ("playbooks/site.yml", "playbooks/validate.yml", "playbooks/upgrade.yml")
# Options under which every play after the first would be skipped anyway.
VARIANTS = {"plain": (), "tags": ("--tags", "driver"), "limit": ("--limit", "gpu-trn-01")}
GROUPS = "dev (2 hosts), gpu_nodes (9 hosts), inference (3 hosts), training (4 hosts)"


@pytest.fixture(scope="module")
def runs():
    """Every run of this module side by side (each is mostly ansible-playbook's start-up)."""
    cases = {(book, variant): ("-i", INVENTORY, book, "-e", "gpufleet_gpu_group=gpu_nodez", *args) for book in PLAYBOOKS for variant, args in VARIANTS.items()}
    for book in PLAYBOOKS:
        cases[(book, "allowed")] = ("-i", INVENTORY, book, "-e", "gpufleet_gpu_group=gpu_nodez", "-e", "gpufleet_gpu_group_allow_empty=true")
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {key: pool.submit(playbook, *args) for key, args in cases.items()}
        return {key: future.result() for key, future in futures.items()}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("book", PLAYBOOKS)
def test_a_group_that_matches_no_host_fails_naming_the_variable_and_the_groups(runs, book, variant):
    run = runs[(book, variant)]
    assert run.returncode != 0, run.stdout
    assert (
        "gpu_group: gpufleet_gpu_group is 'gpu_nodez' (default gpu_nodes): 'gpu_nodez' is no group or host "
        "of this inventory, so every play would be skipped. The inventory's groups: " + GROUPS
    ) in run.stdout, run.stdout
    assert "-e gpufleet_gpu_group_allow_empty=true" in run.stdout
    # Stopped before any task: no host was contacted or judged.
    assert "TASK [" not in run.stdout, run.stdout


@pytest.mark.parametrize("book", PLAYBOOKS)
def test_an_empty_group_on_purpose_does_nothing_and_succeeds(runs, book):
    run = runs[(book, "allowed")]
    assert run.returncode == 0, run.stdout
    assert "skipping: no hosts matched" in run.stdout
    assert "TASK [" not in run.stdout, run.stdout
