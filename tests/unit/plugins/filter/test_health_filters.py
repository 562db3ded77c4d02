# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The health filters hand the roles the judgement of _verify/health.py, with errors named after the filter."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.filter import health
from ansible_collections.gpufleet.nvidia.plugins.module_utils._kernel_log import parse_kernel_log
from ansible_collections.gpufleet.nvidia.plugins.module_utils._verify import health as _health
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.test_health import DMESG_XID_79, gpu, nvml


def test_the_filters_are_registered() -> None:
    assert sorted(health.FilterModule().filters()) == ["health_metrics", "health_policy_errors"]


def test_metrics_of_a_sick_node() -> None:
    facts = nvml(gpu(0, "00000000:91:00.0", pcie={"width_current": 8}))
    policy = _health.HealthPolicy.from_vars({"pcie_width": "warn"})
    found = _health.judge(facts, parse_kernel_log(DMESG_XID_79), {"nvidia-persistenced": "active"}, policy)
    assert [(f["check"], f["severity"], f["action"]) for f in found] == [("pcie_width", "warn", "reseat"), ("xid", "critical", "reboot")]
    text = health.health_metrics(facts, found, DMESG_XID_79)
    assert 'gpufleet_gpu_xid_events{bus_id="00000000:91:00.0",gpu="0",uuid="GPU-00000000-aaaa-bbbb-cccc-dddddddddddd",xid="79"} 1' in text
    assert text.endswith("gpufleet_node_health_status 2\n")


def test_errors_name_the_filter_and_the_variable() -> None:
    assert health.health_policy_errors({"pcie_width": "x"}, "upgrade_health_") == [
        "upgrade_health_pcie_width: 'x' is not a severity: set ignore, warn or critical"
    ]
    with pytest.raises(AnsibleFilterError, match="^health_metrics: expected the list of health findings"):
        health.health_metrics(nvml(), "none")
