# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The recorded health reading of a real H200 (tests/device/h200-reading-2026-11-26.json) as test data.

Taken by tests/device/real-gpu-check.sh (driver 580.159.04, nvidia-ml-py
13.615.71): read_health, pynvml and nvidia-smi agreed on every health leaf.
Here, without a GPU, the comparison is run again on the recorded readings,
and shown to catch a difference it is there for.
"""

from __future__ import annotations

import copy

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils._verify import health as _health
from ansible_collections.gpufleet.nvidia.tests.unit.device.conftest import load_reading


@pytest.fixture(scope="module")
def reading():
    return load_reading("h200-reading-2026-11-26.json")


def _compare_health(check, r):
    result = check.Compare()
    check.compare_health(result, r["health"]["ours"], r["health"]["pynvml"], r["health"]["nvidia_smi"], r["nvidia_smi"]["xml"])
    return result


def test_reading_is_a_healthy_h200(reading):
    gpu = reading["ours"]["devices"][0]
    assert (gpu["name"], gpu["architecture"]) == ("NVIDIA H200", 9)
    health = reading["health"]["ours"]["devices"][0]["health"]
    assert health["ecc"]["mode_current"] is True
    assert health["remapped_rows"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}
    # Hopper remaps rows instead of retiring pages: NVML answers NOT_SUPPORTED.
    assert health["retired_pages"] == {"single_bit_ecc": None, "double_bit_ecc": None, "pending": None}
    assert health["recovery_action"] == 0
    # The only mismatch of that run is the pre-existing memory.reserved rounding (615 vs 616 MiB).
    assert [m["field"] for m in reading["mismatches"]] == ["gpu0.memory.reserved MiB (smi)"]


def test_health_comparison_of_the_recorded_reading_agrees(check, reading):
    result = _compare_health(check, reading)
    assert result.mismatches == []
    assert len(result.matched) == len([m for m in reading["matched"] if ".health." in m])
    # Three ways: pynvml and nvidia-smi both took part.
    assert any(m.endswith("(smi)") for m in result.matched)
    assert "gpu0.health.remapped_rows.pending" in result.matched


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("remapped_rows", "pending"), True),
        (("ecc", "volatile", "uncorrected"), 1),
        (("pcie", "width_current"), 8),
        (("recovery_action",), 2),
        (("temperature", "current_c"), 80),
    ],
)
def test_health_comparison_catches_a_difference(check, reading, path, value):
    changed = copy.deepcopy(reading)
    leaf = changed["health"]["ours"]["devices"][0]["health"]
    for key in path[:-1]:
        leaf = leaf[key]
    leaf[path[-1]] = value
    fields = {m["field"] for m in _compare_health(check, changed).mismatches}
    assert "gpu0.health." + ".".join(path) in fields


def test_the_real_gpu_is_judged_healthy(reading):
    """No false alarm on a real, idle, healthy GPU: the judgement of its recorded reading is a pass."""
    gpu = reading["ours"]["devices"][0]
    facts = {
        "status": "ok",
        "gpus": [{"index": 0, "uuid": "GPU-redacted", "pci": gpu["pci"], "lost": False, "health": reading["health"]["ours"]["devices"][0]["health"]}],
    }
    policy = _health.HealthPolicy.from_vars({"gpu_count_expected": 1})
    assert _health.judge(facts, [], {"nvidia-persistenced": "active"}, policy) == []
