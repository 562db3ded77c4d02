# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""preflight_verdict: whether the gate stops a host, and the message's findings, variables and fixes, from real
version_matrix results and the preflight role's own rule -> variables table."""

from __future__ import annotations

import typing as t
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.filter.preflight import (
    FilterModule,
    effective_values,
    involved_variables,
    named,
    preflight_desired,
    preflight_verdict,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix.judge import argument_spec, judge

ROOT = Path(__file__).resolve().parents[4]
ROLE_VARS = yaml.safe_load((ROOT / "roles" / "preflight" / "vars" / "main.yml").read_text())
RULE_VARIABLES = ROLE_VARS["__preflight_rule_variables"]
DECLARED = ROLE_VARS["__preflight_matrix_keys"]


def matrix(desired: dict[str, t.Any], **options: t.Any) -> dict[str, t.Any]:
    """version_matrix's result as the gate registers it (fail_on: never)."""
    params = {name: spec.get("default") for name, spec in argument_spec().items()}
    params.update(options, desired=desired, fail_on="never", today="2026-11-22")
    result, failure = judge(params)
    assert failure is None
    return result


def layers(**values: t.Any) -> dict[str, t.Any]:
    """A declared_layers answer: the driver layer holds the given values, the mig layer an inline config."""
    return {"driver": {"managed": True, "vars": values}, "mig": {"managed": False, "vars": {"mig_label": "", "mig_config": {"version": "v1"}}}}


def test_a_volta_host_on_r590_names_the_variables_behind_each_finding_with_their_values() -> None:
    declared = {"driver_branch": "590", "driver_gpu_models": ["Tesla V100-SXM2-16GB"]}
    verdict = preflight_verdict(
        matrix(declared),
        "error",
        RULE_VARIABLES,
        layers(**declared, driver_version=""),
        extra={"preflight_cuda_versions": ["12.8"], "preflight_cuda_compat": False},
        declared=DECLARED,
    )
    assert verdict["failed"] is True
    assert [f["rule"] for f in verdict["failing"]] == ["architecture_branch"]
    assert verdict["messages"].startswith("driver R590 does not support Volta GPUs")
    # architecture_branch reads driver_version, driver_branch, driver_gpu_models: in that order, with values.
    assert verdict["variables"] == 'driver_version="", driver_branch="590", driver_gpu_models=["Tesla V100-SXM2-16GB"]'
    assert verdict["fixes"] == 'use driver branch R580 (set driver_branch: "580")'
    assert verdict["stats"]["status"] == "fail" and verdict["stats"]["summary"]["failed"] is True
    assert all(f["severity"] != "info" for f in verdict["stats"]["findings"])


def test_the_findings_below_fail_on_are_the_others_most_severe_first_in_brief() -> None:
    result = matrix({"driver_branch": "590", "driver_gpu_models": ["Tesla V100-SXM2-16GB"]}, cuda_versions=["13.1"], cuda_compat=True)
    verdict = preflight_verdict(result, "error", RULE_VARIABLES, {})
    assert [f["rule"] for f in verdict["failing"]] == ["architecture_branch"]
    assert [(f["severity"], f["rule"]) for f in verdict["others"]] == [("warning", "branch_lifecycle"), ("info", "cuda_driver")]
    assert verdict["also"] == (
        "[warning] branch_lifecycle: driver branch R590 (New Feature Branch) reached end of life: no more bug or security fixes; "
        "[info] cuda_driver: CUDA 13.1 needs driver 590.44.01 or newer; only R590 releases from 590.44.01 on qualify"
    )
    assert not [f["fix"] for f in verdict["others"] if f["fix"] in verdict["also"]]  # in brief: no fixes
    # Every finding is failing or among the others, never both.
    assert len(verdict["failing"]) + len(verdict["others"]) == len(result["findings"])
    alone = preflight_verdict(matrix({"driver_branch": "580"}), "error", RULE_VARIABLES, {})
    assert (alone["others"], alone["also"]) == ([], "")


def test_fail_on_decides_and_the_summary_says_so() -> None:
    result = matrix({"driver_branch": "535"})  # past its end of life: a warning, no error
    assert preflight_verdict(result, "error", RULE_VARIABLES, {})["failed"] is False
    stopped = preflight_verdict(result, "warning", RULE_VARIABLES, {})
    assert stopped["failed"] is True and stopped["stats"]["summary"]["failed"] is True
    assert stopped["stats"]["summary"]["warning"] == result["summary"]["warning"]
    never = preflight_verdict(matrix({"driver_branch": "590", "driver_gpu_models": ["V100"]}), "never", RULE_VARIABLES, {})
    assert never == dict(never, failed=False, failing=[], messages="", variables="", fixes="")
    assert never["stats"]["status"] == "pass"


def test_each_variable_is_named_once_and_fixes_once() -> None:
    failing = [
        {"rule": "cuda_driver", "subject": "CUDA 13.0", "fix": "f"},
        {"rule": "cuda_driver", "subject": "CUDA 12.9", "fix": "f"},
        {"rule": "branch_lifecycle", "subject": "R550", "fix": "g"},
    ]
    assert involved_variables(failing, RULE_VARIABLES, DECLARED) == ["driver_version", "driver_branch", "preflight_cuda_versions"]


def test_custom_rules_cve_floors_and_variable_subjects_map_to_their_entries() -> None:
    failing = [
        {"rule": "custom:hopper-floor", "subject": "site rule"},
        {"rule": "ctk_cve_2024_0132", "subject": "Container Toolkit 1.16.1"},
        {"rule": "declaration", "subject": "crictl_version"},
        {"rule": "declaration", "subject": "cuda_versions"},
        {"rule": "declaration", "subject": "not_a_variable"},
    ]
    assert involved_variables(failing, RULE_VARIABLES, DECLARED) == [
        "preflight_matrix_rules",
        "container_toolkit_version",
        "crictl_version",
        "preflight_cuda_versions",
    ]


def test_a_rule_missing_from_the_table_names_no_variable_but_keeps_its_finding() -> None:
    assert involved_variables([{"rule": "new_rule", "subject": "driver_branch"}], {}, DECLARED) == ["driver_branch"]


def test_values_are_the_layers_then_extra_and_mappings_are_named_not_printed() -> None:
    values = effective_values(layers(driver_branch="580"), {"driver_branch": "590", "preflight_cuda_compat": True})
    assert values == {"driver_branch": "590", "mig_label": "", "preflight_cuda_compat": True}
    assert named(["driver_branch", "mig_config", "preflight_cuda_compat"], values) == 'driver_branch="590", mig_config, preflight_cuda_compat=true'


@pytest.mark.parametrize(
    "result,fail_on,message",
    [
        ({"findings": [], "summary": {}}, "sometimes", "preflight_fail_on must be error, warning or never"),
        ({"msg": "failed"}, "error", "the input must be the registered result of gpufleet.nvidia.version_matrix"),
        ({"findings": [{"severity": "fatal"}], "summary": {}}, "error", "findings with unknown severity fatal"),
    ],
)
def test_bad_input_is_named(result: dict[str, t.Any], fail_on: str, message: str) -> None:
    with pytest.raises(AnsibleFilterError, match=message):
        preflight_verdict(result, fail_on, RULE_VARIABLES, {})


def test_registered_as_a_filter() -> None:
    assert FilterModule().filters() == {"preflight_desired": preflight_desired, "preflight_verdict": preflight_verdict}


def test_desired_takes_the_managed_layers_matrix_variables_and_the_read_mig_config() -> None:
    declared = {
        "driver": {"managed": True, "vars": {"driver_branch": "580", "driver_version": None, "driver_source": "cuda"}},
        "crictl": {"managed": False, "vars": {"crictl_version": "v1.33.0"}},
        "mig": {"managed": True, "vars": {"mig_label": "inference", "mig_config": {}, "mig_config_src": "/srv/mig.yaml"}},
    }
    assert preflight_desired(declared, DECLARED) == {"driver_branch": "580", "mig_label": "inference", "mig_config": {}}
    read = {"version": "v1", "mig-configs": {"inference": []}}
    assert preflight_desired(declared, DECLARED, read)["mig_config"] == read
    assert preflight_desired(declared, DECLARED, {})["mig_config"] == {}


def test_desired_names_bad_input() -> None:
    with pytest.raises(AnsibleFilterError, match="declared_layers lookup's answer"):
        preflight_desired(["driver"], DECLARED)
