# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The verify role's MIG check, through Ansible, on simulated nodes.

mig_config's assert runs under `failed_when: false` so that its failure is a
finding instead of a failed host. Ansible then registers `failed: false`, so
these tests run the role's own task files (mig_check.yml) rather than feeding
the filter a hand-made result: what is judged is what a node would report.
"""

from __future__ import annotations

import json
import sys
import typing as t
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.tests.unit.playbook_run import ansible_env, local_play
from ansible_collections.gpufleet.nvidia.tests.unit.plugins import mig_expected, nvml_sim

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[3]
DISABLED = mig_expected.config("all-disabled", {"devices": "all", "mig-enabled": False})


def gpu0_1g() -> dict[str, t.Any]:
    """GPU 0 split into its smallest instances, the rest off (A100 40GB: 7 x 1g.5gb)."""
    return mig_expected.config(
        "gpu0-1g", {"devices": [0], "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}, {"devices": [1, 2, 3, 4, 5, 6, 7], "mig-enabled": False}
    )


# name: (MIG state set by hand on GPU 0 or None, label, config)
CASES: dict[str, tuple[tuple[str, ...] | None, str, dict[str, t.Any]]] = {
    "as_declared": (None, "all-disabled", DISABLED),
    "mig_switched_on_by_hand": (("mig_current=1", "mig_pending=1"), "all-disabled", DISABLED),
    "mig_enable_pending_by_hand": (("mig_current=0", "mig_pending=1"), "all-disabled", DISABLED),
    "mig_disable_awaits_reset": (("mig_current=1", "mig_pending=0"), "all-disabled", DISABLED),
    "mig_declared_on_found_off": (None, "gpu0-1g", gpu0_1g()),
    "label_not_in_config": (None, "all-1g.5gb", DISABLED),
}


@pytest.fixture(scope="module")
def checks(tmp_path_factory: pytest.TempPathFactory, sim_library: Path) -> dict[str, dict[str, t.Any]]:
    work = tmp_path_factory.mktemp("verify-mig")
    hosts = {}
    for name, (by_hand, label, config) in CASES.items():
        node = nvml_sim.SimNode(work / name, "dgx-a100-8x40gb")
        if by_hand:
            node.set(*by_hand, gpu=0)
        hosts[name] = {
            "ansible_connection": "local",
            "ansible_python_interpreter": sys.executable,
            "case_library_dir": str(sim_library.parent),
            "case_state": str(node.state),
            "case_rundir": str(node.rundir),
            "case_label": label,
            "case_config": config,
            "out_dir": str(work),
        }
    inventory = work / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    env = ansible_env(ANSIBLE_FORKS="4")
    env.pop("NVML_SIM_EUID", None)
    local_play(HERE / "mig_check.yml", hosts=str(inventory), env=env)
    return {name: json.loads((work / (name + ".json")).read_text()) for name in CASES}


def findings(check: dict[str, t.Any]) -> list[tuple[str, str, str, str]]:
    return [(f["severity"], f["subject"], f["message"], f["fix"]) for f in check["findings"]]


def test_the_declared_layout_passes(checks: dict[str, dict[str, t.Any]]) -> None:
    check = checks["as_declared"]
    assert (check["status"], check["findings"]) == ("pass", []), check
    assert check["observed"]["differences"] == []


def test_mig_switched_on_by_hand_names_the_gpu_and_the_fix(checks: dict[str, dict[str, t.Any]]) -> None:
    check = checks["mig_switched_on_by_hand"]
    assert check["status"] == "fail", check
    assert findings(check) == [
        (
            "error",
            "GPU 0",
            "MIG layout 'all-disabled' is not applied: GPU 0: expected MIG disabled, found MIG enabled, no GPU instances",
            "disable MIG on GPU 0: run the mig layer (--tags mig)",
        )
    ]


def test_an_enable_pending_by_hand_is_a_difference_too(checks: dict[str, dict[str, t.Any]]) -> None:
    """Not active yet, but the next reset or reboot would bring MIG up against the declaration."""
    check = checks["mig_enable_pending_by_hand"]
    assert check["status"] == "fail", check
    assert findings(check) == [
        (
            "error",
            "GPU 0",
            "MIG layout 'all-disabled' is not applied: GPU 0: expected MIG disabled, found MIG disabled (enable pending until a GPU reset or reboot)",
            "disable MIG on GPU 0: run the mig layer (--tags mig)",
        )
    ]


def test_the_declared_mode_waiting_for_a_reset_is_a_warning(checks: dict[str, dict[str, t.Any]]) -> None:
    check = checks["mig_disable_awaits_reset"]
    assert check["status"] == "warn", check
    assert findings(check) == [
        (
            "warning",
            "GPU 0",
            "MIG layout 'all-disabled' waits for a GPU reset or reboot: GPU 0: expected MIG disabled, found MIG "
            "enabled (disable pending until a GPU reset or reboot), no GPU instances",
            "reset GPU 0 (nvidia-smi --gpu-reset -i 0) or reboot the node to finish the MIG mode change",
        )
    ]


def test_mig_declared_on_but_off_names_the_gpu(checks: dict[str, dict[str, t.Any]]) -> None:
    check = checks["mig_declared_on_found_off"]
    assert check["status"] == "fail", check
    assert findings(check) == [
        (
            "error",
            "GPU 0",
            "MIG layout 'gpu0-1g' is not applied: GPU 0: expected MIG enabled: 7 x 1g.5gb, found MIG disabled",
            "enable MIG on GPU 0 and create the declared instances: run the mig layer (--tags mig)",
        )
    ]


def test_an_assert_that_could_not_compare_is_never_a_pass(checks: dict[str, dict[str, t.Any]]) -> None:
    check = checks["label_not_in_config"]
    assert check["status"] == "fail", check
    [(severity, subject, message, _fix)] = findings(check)
    assert (severity, subject) == ("error", "all-1g.5gb")
    assert message.startswith("MIG layout 'all-1g.5gb' was not asserted: invalid MIG config: label 'all-1g.5gb' is not in the config"), message
