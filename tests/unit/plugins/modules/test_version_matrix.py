# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""version_matrix as Ansible runs it: options, fail_on, return shape, and
GPUs read by nvml_info from the simulated NVML."""

from __future__ import annotations

import typing as t

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_runner import run_module

TODAY = "2026-11-22"


def run(**args: t.Any) -> dict[str, t.Any]:
    args.setdefault("today", TODAY)
    return run_module("version_matrix", args)


def test_good_declaration_passes_and_never_changes_anything():
    outcome = run(desired={"driver_version": "580.95.05", "driver_gpu_models": ["H100"], "driver_kernel_module": "auto"}, cuda_versions=["12.4", "13.0"])
    assert outcome["kind"] == "exit", outcome
    result = outcome["result"]
    assert result["changed"] is False
    assert result["summary"]["error"] == 0 and result["summary"]["failed"] is False
    assert result["matrix"]["gpus"][0]["architecture"] == "hopper"
    assert result["matrix"]["gpu_source"] == "declared"
    assert "cuda_driver" in result["rules"]


def test_errors_fail_with_every_finding_and_fix_in_the_message():
    outcome = run(desired={"driver_branch": "590", "driver_kernel_module": "open", "driver_gpu_models": ["Tesla V100-SXM2-16GB"]})
    assert outcome["kind"] == "fail"
    msg = outcome["result"]["msg"]
    assert msg.startswith("version matrix: 2 errors")
    assert "architecture_branch" in msg and "kernel_module" in msg and "fix: " in msg
    assert outcome["result"]["summary"]["failed"] is True


@pytest.mark.parametrize("fail_on,kind", [("error", "exit"), ("warning", "fail"), ("never", "exit")])
def test_fail_on(fail_on: str, kind: str):
    # R535 is past its end of life on TODAY: a warning, no error.
    outcome = run(desired={"driver_branch": "535"}, fail_on=fail_on)
    assert outcome["kind"] == kind
    assert outcome["result"]["summary"]["warning"] >= 1


def test_choices_are_enforced_with_the_field_named():
    outcome = run(desired={"driver_kernel_module": "opne"})
    assert outcome["kind"] == "fail"
    assert "driver_kernel_module" in outcome["result"]["msg"]


def test_invalid_custom_rule_fails_before_judging():
    outcome = run(custom_rules=[{"id": "x", "require": {"colour": "red"}}])
    assert outcome["kind"] == "fail"
    assert outcome["result"]["msg"].startswith("version_matrix: custom rule x: unknown field `colour`")


def test_invalid_today():
    outcome = run(today="next tuesday")
    assert outcome["kind"] == "fail" and "YYYY-MM-DD" in outcome["result"]["msg"]


def test_tables_and_ignore_rules():
    outcome = run(
        desired={"driver_version": "615.90.01", "driver_gpu_models": ["B200"]},
        cuda_versions=["13.4"],
        tables={"cuda_drivers": [{"cuda": "13.4", "driver": "615.90.01"}], "branches": [{"branch": "615", "type": "PB", "eol": "2027-09"}]},
    )
    assert outcome["kind"] == "exit", outcome
    assert outcome["result"]["findings"] == []
    outcome = run(desired={"driver_branch": "535"}, ignore_rules=["branch_lifecycle"], fail_on="warning")
    assert outcome["kind"] == "exit"


@pytest.mark.parametrize(
    "fixture,declared,rule",
    [
        ("v100-8x", {"driver_branch": "590"}, "architecture_branch"),
        ("hgx-h100-8x80gb", {"driver_branch": "580", "driver_kernel_module": "proprietary"}, None),
        ("l40s-4x", {"driver_branch": "580", "mig_label": "all-1g.5gb"}, "mig_supported"),
    ],
)
def test_gpus_read_through_nvml(sim_node, fixture: str, declared: dict[str, t.Any], rule: str | None):
    """The GPUs come from nvml_info's real output on the simulated node."""
    node = sim_node(fixture)
    facts = node.run("nvml_info")
    assert facts["kind"] == "exit", facts
    outcome = run(desired=declared, installed={"nvml": facts["result"]["nvml"]})
    result = outcome["result"]
    assert result["matrix"]["gpu_source"] == "nvml"
    assert len(result["matrix"]["gpus"]) == facts["result"]["nvml"]["gpu_count"]
    errors = [f["rule"] for f in result["findings"] if f["severity"] == "error"]
    if rule is None:
        assert outcome["kind"] == "exit" and errors == []
    else:
        assert outcome["kind"] == "fail" and set(errors) == {rule}


def test_installed_target_judges_the_loaded_driver(sim_node):
    facts = sim_node("dgx-a100-mig-mixed").run("nvml_info")["result"]["nvml"]
    outcome = run(target="installed", installed={"nvml": facts}, cuda_versions=["12.4", "12.8"])
    result = outcome["result"]
    assert result["matrix"]["driver"] == facts["driver_version"]
    by_subject = {f["subject"]: f["severity"] for f in result["findings"] if f["rule"] == "cuda_driver"}
    # 550.127.05 fully supports 12.4 and runs 12.8 through minor version compatibility.
    assert by_subject == {"CUDA 12.8": "warning"}


def test_cuda_compat_turns_a_too_new_cuda_into_forward_compatibility():
    declared = {"driver_version": "535.288.01", "driver_gpu_models": ["H100"]}
    refused = run(desired=declared, cuda_versions=["13.0"])
    assert refused["kind"] == "fail" and "cuda_driver" in refused["result"]["msg"]
    accepted = run(desired=declared, cuda_versions=["13.0"], cuda_compat=True)
    assert accepted["kind"] == "exit", accepted
    rules = {f["rule"]: f["severity"] for f in accepted["result"]["findings"]}
    assert rules.get("cuda_forward_compat") == "info" and "cuda_driver" not in rules
    assert accepted["result"]["matrix"]["cuda_compat"] is True


def test_a_toolkit_cve_is_dropped_only_by_its_own_rule_id():
    declared = {"container_toolkit_version": "1.17.7"}
    general = run(desired=declared, ignore_rules=["container_toolkit"])
    assert general["kind"] == "fail" and "CVE-2025-23266" in general["result"]["msg"]
    own = run(desired={"container_toolkit_version": "1.19.0"}, ignore_rules=["ctk_cve_2026_24260"])
    assert own["kind"] == "exit", own
