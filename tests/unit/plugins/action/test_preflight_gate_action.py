# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""preflight_gate: the preflight gate's judgement, stop message and AWX stats in one action, with the preflight
role's own rule -> variables table; that Ansible keeps the stats (of a stopping host too) is shown by
tests/unit/playbooks/test_validate.py through validate.yml."""

from __future__ import annotations

import typing as t
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleActionFail
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.playbook.task import Task
from ansible.plugins.loader import connection_loader
from ansible.template import Templar

from ansible_collections.gpufleet.nvidia.plugins.action.preflight_gate import ActionModule

ROOT = Path(__file__).resolve().parents[4]
ROLE_VARS = yaml.safe_load((ROOT / "roles" / "preflight" / "vars" / "main.yml").read_text())
TODAY = "2026-11-22"
VOLTA = {"driver_branch": "590", "driver_gpu_models": ["Tesla V100-SXM2-16GB"]}


def gate(desired: dict[str, t.Any], host: str = "gpu-dev-01", **args: t.Any) -> dict[str, t.Any]:
    """The action's result for one host, run as the task executor runs it (a connection object it never uses)."""
    task = Task()
    task.action = "gpufleet.nvidia.preflight_gate"
    task.args = dict(
        {
            "desired": desired,
            "today": TODAY,
            "rule_variables": ROLE_VARS["__preflight_rule_variables"],
            "layers": {"driver": {"managed": True, "vars": dict(desired, driver_version="")}},
            "values": {"preflight_cuda_versions": ["12.8"]},
            "declared": ROLE_VARS["__preflight_matrix_keys"],
        },
        **args,
    )
    loader = DataLoader()
    context = PlayContext()
    plugin = ActionModule(task, connection_loader.get("local", context), context, loader, Templar(loader=loader), None)
    plugin._load_name = "gpufleet.nvidia.preflight_gate"
    return plugin.run(task_vars={"inventory_hostname": host})


def test_a_stopping_host_gets_the_gate_message_and_its_stats_for_awx() -> None:
    result = gate(VOLTA)
    # The gate never fails the task: Ansible would drop its stats.
    assert "failed" not in result and result["changed"] is False
    assert result["verdict"]["stop"] is True
    assert result["verdict"]["message"] == (
        "The declared versions of gpu-dev-01 do not fit together (preflight_fail_on: error): driver R590 does not "
        'support Volta GPUs ({0}. Variables: driver_version="", driver_branch="590", '
        'driver_gpu_models=["Tesla V100-SXM2-16GB"]. Fix: use driver branch R580 (set driver_branch: "580"). '
        # The host's finding below preflight_fail_on, which a stopped host shows nowhere else.
        "Also on this host: [warning] branch_lifecycle: driver branch R590 (New Feature Branch) reached end of life: "
        "no more bug or security fixes".format(result["verdict"]["failing"][0]["message"].split("Volta GPUs (", 1)[1])
    )
    assert [f["rule"] for f in result["verdict"]["failing"]] == ["architecture_branch"]
    # set_stats' shape (data, per_host, aggregate), host name to judgement.
    assert set(result["ansible_stats"]) == {"data", "per_host", "aggregate"}
    assert result["ansible_stats"]["per_host"] is False and result["ansible_stats"]["aggregate"] is True
    stats = result["ansible_stats"]["data"]["gpufleet_preflight"]
    assert list(stats) == ["gpu-dev-01"]
    assert stats["gpu-dev-01"]["status"] == "fail" and stats["gpu-dev-01"]["summary"]["failed"] is True
    assert all(f["severity"] != "info" for f in stats["gpu-dev-01"]["findings"])
    # The matrix's own result beside the verdict, as version_matrix registers it.
    assert result["messages"] and result["summary"]["error"] >= 1 and result["matrix"]["driver_branch"] == "590"


def test_the_stop_message_names_the_failing_findings_first_then_the_others_and_the_notices() -> None:
    result = gate(VOLTA, cuda_versions=["13.1"], cuda_compat=True, notices=["Not judged: driver_version"])
    message = result["verdict"]["message"]
    failing, also = message.split(". Also on this host: ")
    assert failing.startswith("The declared versions of gpu-dev-01 do not fit together (preflight_fail_on: error): driver R590 does not support Volta")
    assert "branch_lifecycle" not in failing and "CUDA 13.1" not in failing
    # Most severe first, then the caller's notices; each in brief (no fix).
    assert also == "; ".join(
        [
            "[warning] branch_lifecycle: driver branch R590 (New Feature Branch) reached end of life: no more bug or security fixes",
            "[info] cuda_driver: CUDA 13.1 needs driver 590.44.01 or newer; only R590 releases from 590.44.01 on qualify",
            "Not judged: driver_version",
        ]
    )
    # With fail_on: warning the warning is among the failing findings, and only the note is left for the end.
    warned = gate(VOLTA, cuda_versions=["13.1"], cuda_compat=True, fail_on="warning")["verdict"]["message"]
    assert warned.index("does not support Volta") < warned.index("reached end of life") < warned.index(". Also on this host: [info] cuda_driver")
    assert warned.count(". Also on this host: ") == 1 and "[warning]" not in warned


def test_a_stopped_host_with_nothing_else_to_say_keeps_the_message_as_it_was() -> None:
    message = gate(VOLTA, fail_on="warning")["verdict"]["message"]
    assert "Also on this host" not in message
    assert message.endswith('Fix: use driver branch R580 (set driver_branch: "580"); move to a supported branch (R580 LTSB, R620 LTSB)')


def test_fail_on_decides_whether_the_host_stops() -> None:
    past_eol = {"driver_branch": "535"}  # past its end of life: a warning, no error
    assert gate(past_eol)["verdict"] == {"stop": False, "message": "", "failing": []}
    warned = gate(past_eol, fail_on="warning")
    assert warned["verdict"]["stop"] is True and "(preflight_fail_on: warning)" in warned["verdict"]["message"]
    never = gate(VOLTA, fail_on="never")
    assert never["verdict"]["stop"] is False
    stats = never["ansible_stats"]["data"]["gpufleet_preflight"]["gpu-dev-01"]
    assert stats["status"] == "pass" and stats["summary"]["failed"] is False and stats["findings"]


@pytest.mark.parametrize(
    "args, named",
    [
        ({"fail_on": "sometimes"}, "fail_on"),
        ({"eol_warning_days": "soon"}, "eol_warning_days"),
        ({"target": "installed"}, "target"),
        ({"rule_variables": None}, "rule_variables"),
    ],
)
def test_bad_options_fail_naming_the_field(args: dict[str, t.Any], named: str) -> None:
    with pytest.raises(AnsibleActionFail, match=named):
        gate(VOLTA, **args)


def test_a_bad_custom_rule_fails_with_the_matrix_message() -> None:
    with pytest.raises(AnsibleActionFail, match="version_matrix: .*colour"):
        gate(VOLTA, custom_rules=[{"id": "x", "require": {"colour": "red"}}])
