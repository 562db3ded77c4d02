# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""playbooks/upgrade.yml stops on bad settings before any node is touched.

The example fleet's hosts are SSH hosts that do not exist: the checks run on
the controller, so a bad setting must fail there, naming the variable and the
fix, with no host unreachable (no contact) and no task of the rolling play
run. The roll itself is tested by the Molecule scenario extensions/molecule/upgrade.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.playbook_run import playbook

ROOT = Path(__file__).resolve().parents[3]
FLEET = str(ROOT / "inventory" / "examples" / "fleet" / "hosts.yml")
RECAP = re.compile(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.MULTILINE)


def unreachable(output: str) -> int:
    return sum(int(m.group(4)) for m in RECAP.finditer(output))


def upgrade(*extra: str):
    return playbook("playbooks/upgrade.yml", "-i", FLEET, *extra)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["-e", "upgrade_serial=0"], "upgrade_serial: '0' is not a positive number of nodes"),
        (["-e", '{"upgrade_serial": [1, "120%"]}'], "upgrade_serial: '120%' is not between 1% and 100%"),
        (["-e", "upgrade_max_fail_percentage=150"], "upgrade_max_fail_percentage: '150' is not a whole percentage from 0 to 100"),
        (["-e", "upgrade_kubeconfig=/nonexistent/kubeconfig"], "upgrade_kubeconfig: /nonexistent/kubeconfig is not a file on the controller"),
        (["-e", "upgrade_slurm=true", "-e", "upgrade_slurm_host=slurmctl"], "upgrade_slurm_host: slurmctl is not in the inventory"),
        (["-e", "upgrade_gpu_process_poll=0"], "upgrade_gpu_process_poll (0) at least 1 second"),
        # Issue 37 (fresh state): the roll resumes only a node drained with its mark, so its drain must set it.
        (
            ["-e", "upgrade_slurm=true", "-e", '{"upgrade_slurm_drain_command": ["scontrol", "update", "NodeName=n", "State=DRAIN", "Reason=maint"]}'],
            'upgrade_slurm_drain_command must drain with the mark of the roll, the argument \\"Reason=gpufleet.nvidia upgrade\\" (upgrade_slurm_drain_reason)',
        ),
    ],
)
def test_bad_settings_stop_the_run_before_any_node(extra, message):
    run = upgrade(*extra)
    assert run.returncode != 0, run.stdout
    assert message in " ".join(run.stdout.split()), run.stdout[-3000:]
    assert "Preflight - judge the declared versions with the node read" not in run.stdout
    assert unreachable(run.stdout) == 0, run.stdout[-3000:]


def test_unknown_layer_is_refused_by_the_argument_spec():
    run = upgrade("-e", '{"upgrade_layers": ["driver", "mig"]}')
    assert run.returncode != 0
    assert "upgrade_layers" in run.stdout and "mig" in run.stdout
    assert "Preflight - judge the declared versions with the node read" not in run.stdout
