# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""version_matrix's action plugin: the module's options, checks and results, on the controller, without a
connection to the host or a module process."""

from __future__ import annotations

import json
import re
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

from ansible_collections.gpufleet.nvidia.plugins.action.version_matrix import ActionModule
from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix import judge as matrix_judge
from ansible_collections.gpufleet.nvidia.tests.unit.playbook_run import ansible_env, playbook
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_runner import run_module

TODAY = "2026-11-22"


def action(args: dict[str, t.Any], check_mode: bool = False) -> dict[str, t.Any]:
    """The action plugin's result for these task args, run as the task executor runs it (a local connection
    object it never uses)."""
    task = Task()
    task.action = "gpufleet.nvidia.version_matrix"
    task.args = args
    task.check_mode = check_mode
    loader = DataLoader()
    context = PlayContext()
    plugin = ActionModule(task, connection_loader.get("local", context), context, loader, Templar(loader=loader), None)
    # As the plugin loader names it.
    plugin._load_name = "gpufleet.nvidia.version_matrix"
    return plugin.run(task_vars={})


CASES = {
    "fits": dict(
        desired={
            "driver_version": "580.95.05",
            "driver_gpu_models": ["H100"],
            "driver_kernel_module": "auto",
            "container_toolkit_version": "1.17.8",
            "container_runtime_engine": "containerd",
            "container_runtime_cdi": True,
            "crictl_kubernetes_version": "1.33",
        },
        cuda_versions=["12.4", "13.0"],
    ),
    "errors": dict(desired={"driver_branch": "590", "driver_kernel_module": "open", "driver_gpu_models": ["Tesla V100-SXM2-16GB"]}),
    "warning fails": dict(desired={"driver_branch": "535"}, fail_on="warning"),
    "tables and rules": dict(
        desired={"driver_version": "615.90.01", "driver_gpu_models": ["B200"]},
        cuda_versions=["13.4"],
        tables={"cuda_drivers": [{"cuda": "13.4", "driver": "615.90.01"}], "branches": [{"branch": "615", "type": "PB", "eol": "2027-09"}]},
        custom_rules=[
            dict(
                id="blackwell-floor",
                severity="error",
                message="Blackwell runs R620",
                fix="set driver_version",
                when={"gpu_architecture": "blackwell"},
                require={"driver_version": ">= 620.0"},
            )
        ],
        ignore_rules=["branch_lifecycle"],
    ),
    "installed": dict(
        target="installed",
        installed={"versions": {"driver": "550.127.05", "containerd": "1.7.24"}, "packages": {"nvidia-container-toolkit": [{"version": "1.16.1"}]}},
        desired={"container_runtime_engine": "containerd"},
        cuda_versions=["12.8"],
        fail_on="never",
    ),
    "bad custom rule": dict(custom_rules=[{"id": "x", "require": {"colour": "red"}}]),
    "bad today": dict(today="next tuesday"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_action_returns_what_the_module_returns(name: str) -> None:
    args = dict(CASES[name], today=CASES[name].get("today", TODAY))
    module = run_module("version_matrix", json.loads(json.dumps(args)))
    result = action(json.loads(json.dumps(args)))
    expected = dict(module["result"])
    expected.pop("invocation", None)
    if module["kind"] == "fail":
        expected["failed"] = True
    assert result == expected
    assert result["changed"] is False


def test_a_failing_finding_fails_the_task_with_every_finding_and_fix() -> None:
    result = action(dict(CASES["errors"], today=TODAY))
    assert result["failed"] is True
    assert result["msg"].startswith("version matrix: 2 errors\n[error] architecture_branch: driver R590 does not support Volta GPUs")
    assert 'fix: use driver branch R580 (set driver_branch: "580")' in result["msg"]
    assert result["summary"] == {"info": 0, "warning": 1, "error": 2, "worst": "error", "failed": True}
    assert "failing" not in result


def test_check_mode_judges_the_same() -> None:
    args = dict(CASES["errors"], today=TODAY)
    assert action(dict(args), check_mode=True) == action(dict(args))


@pytest.mark.parametrize(
    "args,named",
    [
        ({"desired": {"driver_kernel_module": "opne"}}, "value of driver_kernel_module must be one of: auto, open, proprietary, got: opne found in desired"),
        # ansible-core 2.18 writes the type as <class 'str'>, 2.19 as str: the part both say.
        ({"eol_warning_days": "soon"}, "and we were unable to convert to int"),
        ({"fail_on": "sometimes"}, "value of fail_on must be one of: error, warning, never, got: sometimes"),
        ({"desired": {"driver_gpu_models": {"H100": 8}}}, "driver_gpu_models"),
        ({"installed": {"nvml": "loaded"}}, "nvml"),
        ({"colour": "red"}, "Unsupported parameters for (gpufleet.nvidia.version_matrix) module: colour."),
        ({"desired": {"driver_brnach": "580"}}, "desired.driver_brnach"),
    ],
)
def test_bad_options_fail_before_judging_and_name_the_field(args: dict[str, t.Any], named: str) -> None:
    with pytest.raises(AnsibleActionFail) as failure:
        action(args)
    assert named in str(failure.value.message), failure.value.message


PREFLIGHT_DECLARED = yaml.safe_load((Path(__file__).resolve().parents[4] / "roles" / "preflight" / "vars" / "main.yml").read_text())["__preflight_matrix_keys"]


def test_every_variable_the_preflight_gate_declares_is_an_option_the_action_takes() -> None:
    # The gate hands the managed layers' values of these variables to the action as `desired`: one the
    # argument spec lacks fails every run whose inventory manages that layer ("Unsupported parameters").
    assert sorted(set(PREFLIGHT_DECLARED) - set(matrix_judge.DESIRED_OPTIONS)) == []


def test_the_security_floors_of_dcgm_and_the_device_plugin_are_judged_through_the_action() -> None:
    desired = {
        "driver_branch": "580",
        "dcgm_version": "4.2.0",
        "dcgm_exporter": True,
        "dcgm_exporter_version": "4.2.0-4.1.0",
        "device_plugin_version": "v0.17.0",
        "device_plugin_device_list_strategy": "cdi-cri",
    }
    result = action({"desired": desired, "fail_on": "never", "today": TODAY})
    rules = {finding["rule"] for finding in result["findings"]}
    assert any(rule.startswith("dcgm_cve_") for rule in rules), rules
    assert any(rule.startswith("device_plugin_cve_") for rule in rules), rules


@pytest.mark.parametrize(
    "args,message",
    [
        ({"tables": {"cuda_driver": []}}, "version_matrix: tables: unknown table(s) cuda_driver"),
        ({"tables": {"branches": [{"branch": "615", "eol": "next year"}]}}, "version_matrix: tables.branches: `eol` of R615 must be YYYY-MM, 'ended' or null"),
        ({"custom_rules": [{"id": "x", "require": {"colour": "red"}}]}, "version_matrix: custom rule x: unknown field `colour` in `require`"),
        ({"today": "next tuesday"}, "version_matrix: today 'next tuesday' is not a date (YYYY-MM-DD)"),
    ],
)
def test_bad_tables_and_rules_fail_the_task_naming_the_field(args: dict[str, t.Any], message: str) -> None:
    result = action(args)
    assert result["failed"] is True and result["msg"].startswith(message), result


def test_matrices_are_built_once_per_distinct_tables_and_rules() -> None:
    args = dict(CASES["tables and rules"], today=TODAY)
    action(dict(args))
    built = dict(matrix_judge._MATRICES)
    action(dict(args, desired={"driver_version": "615.90.01", "driver_gpu_models": ["H200"]}))
    # Another host, the same tables: no new matrix.
    assert matrix_judge._MATRICES == built
    action(dict(args, tables={}))
    assert len(matrix_judge._MATRICES) == min(len(built) + 1, matrix_judge._MATRICES_KEPT)


def test_the_default_matrix_is_built_when_the_plugin_is_loaded() -> None:
    """The controller loads the plugin before it forks its workers: the built-in tables are parsed once."""
    assert any(key.startswith("[{}, [], ") for key in matrix_judge._MATRICES)


def test_through_ansible_no_host_is_contacted(tmp_path: Path) -> None:
    """Hosts reachable only over SSH at an address that does not answer, with no Python: each is judged on the
    controller (no delegate_to), in check mode too, and a finding fails only its own host."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "all:\n  vars:\n    ansible_connection: ssh\n    ansible_python_interpreter: /nonexistent/python3\n"
        "  hosts:\n"
        + "".join("    node-{0}:\n      ansible_host: 192.0.2.{0}\n".format(n) for n in (1, 2, 3))
        + '    node-3:\n      ansible_host: 192.0.2.3\n      driver_branch: "590"\n'
    )
    playbook_file = tmp_path / "play.yml"
    playbook_file.write_text(
        """
- hosts: all
  gather_facts: false
  tasks:
    - name: Judge
      gpufleet.nvidia.version_matrix:
        desired:
          driver_branch: "{{ driver_branch | default('580') }}"
          driver_gpu_models: [Tesla V100-SXM2-16GB]
        today: "%s"
      register: judged
    - name: Keep
      ansible.builtin.copy:
        content: "{{ judged | to_json }}"
        dest: "%s/{{ inventory_hostname }}.json"
        mode: "0600"
      delegate_to: localhost
"""
        % (TODAY, tmp_path)
    )
    env = ansible_env(ANSIBLE_TIMEOUT="3", ANSIBLE_HOST_KEY_CHECKING="0", ANSIBLE_LOCALHOST_WARNING="0")
    for check in ((), ("--check",)):
        proc = playbook("-i", str(inventory), str(playbook_file), *check, timeout=120, env=env)
        recap = dict(re.findall(r"^(node-\d)\s+: (ok=.*)$", proc.stdout, re.MULTILINE))
        assert set(recap) == {"node-1", "node-2", "node-3"}, proc.stdout
        assert all("unreachable=0" in line for line in recap.values()), proc.stdout
        assert "failed=0" in recap["node-1"] and "failed=0" in recap["node-2"], proc.stdout
        assert "failed=1" in recap["node-3"], proc.stdout
        assert "driver R590 does not support Volta GPUs" in proc.stdout
        if not check:
            good = json.loads((tmp_path / "node-1.json").read_text())
            assert good["summary"]["failed"] is False and good["matrix"]["driver_branch"] == "580"
