# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""plan_of_mapping, the wrapper of the plan filters (dcgm_plan, node_labels_plan): the playbook sees which filter
refused its input and why, in the filter's own words, and no traceback."""

from __future__ import annotations

import typing as t

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.filter.dcgm import dcgm_plan
from ansible_collections.gpufleet.nvidia.plugins.filter.node_labels import node_labels_plan
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._filters import plan_of_mapping


@pytest.mark.parametrize(
    "plan_filter,request_value,message",
    [
        (dcgm_plan, [], "dcgm_plan: give the role's settings as a mapping, not list"),
        (dcgm_plan, None, "dcgm_plan: give the role's settings as a mapping, not NoneType"),
        (node_labels_plan, "nvml", "node_labels_plan: expects a mapping with nvml, settings and reads, got 'str'"),
    ],
)
def test_a_request_that_is_not_a_mapping_is_refused_naming_the_filter(plan_filter: t.Callable[[object], t.Any], request_value: object, message: str):
    with pytest.raises(AnsibleFilterError) as refused:
        plan_filter(request_value)
    assert str(refused.value) == message


def refuse(request: t.Mapping[str, t.Any]) -> t.NoReturn:
    raise ValueError("driver_branch: '59x' is not a number; give the branch, for example 580")


def test_a_plans_value_error_is_the_filters_error_without_its_traceback():
    with pytest.raises(AnsibleFilterError) as refused:
        plan_of_mapping("driver_plan", refuse, {"driver_branch": "59x"}, "unused {0}")
    assert str(refused.value) == "driver_plan: driver_branch: '59x' is not a number; give the branch, for example 580"
    assert refused.value.__suppress_context__


def test_the_plan_of_a_mapping_is_returned_as_the_plan_function_made_it():
    request = {"gpus": 2}
    assert plan_of_mapping("double_plan", lambda r: {"gpus": r["gpus"] * 2}, request, "unused {0}") == {"gpus": 4}


def test_an_error_that_is_not_a_value_error_is_a_bug_and_stays_one():
    with pytest.raises(KeyError):
        plan_of_mapping("broken_plan", lambda r: r["missing"], {}, "unused {0}")
