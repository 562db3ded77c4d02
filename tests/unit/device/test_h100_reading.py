# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The recorded reading of a real H100 (tests/device/h100-reading-2026-11-23.json) as test data.

The reading was taken by tests/device/nvml_real_check.py through our binding,
pynvml and nvidia-smi. Here it checks, without a GPU, that the MIG catalogue
(_mig/profiles.py) and the simulator's H100 model still say what the real GPU
said, and that the comparison itself finds the differences it is there for.
"""

from __future__ import annotations

import copy
import os

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.tests.unit.device.conftest import ROOT as _ROOT
from ansible_collections.gpufleet.nvidia.tests.unit.device.conftest import load_reading


@pytest.fixture(scope="module")
def reading():
    return load_reading("h100-reading-2026-11-23.json")


def _compare(check, r):
    return check.compare(r["ours"], r["pynvml"], r["nvidia_smi"], check.binding(), r["collector"], r["ansible_nvml_info"])


def test_reading_is_an_h100_with_its_profiles(reading):
    gpu = reading["ours"]["devices"][0]
    assert (gpu["name"], gpu["pci"]["pci_device_id"], gpu["architecture"]) == ("NVIDIA H100 80GB HBM3", 0x233010DE, 9)
    assert gpu["uuid"] == gpu["serial"] == "<redacted>"
    assert sorted(gpu["gpu_instance_profiles_listed"]) == [0, 5, 9, 14, 15, 19, 20]
    assert reading["mismatches"] == []


def test_comparison_of_the_recorded_reading_agrees(check, reading):
    result = _compare(check, reading)
    assert result.mismatches == []
    assert len(result.matched) == reading["matched_count"] - 1  # less the --expect-pid check


@pytest.mark.parametrize(
    ("source", "path", "value"),
    [
        ("pynvml", ("devices", 0, "memory", "total"), 1),
        ("pynvml", ("devices", 0, "gpu_instance_profiles", "9", "id"), 1),
        ("ours", ("devices", 0, "placements", "15", 0, "start"), 1),
        ("nvidia_smi", ("query_gpu", 0, "memory.reserved"), "481"),
    ],
)
def test_comparison_finds_a_changed_field(check, reading, source, path, value):
    r = copy.deepcopy(reading)
    node = r[source]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = node[path[-1]] + value if isinstance(value, int) else value
    assert len(_compare(check, r).mismatches) >= 1


def test_mig_catalogue_matches_the_real_h100(check, reading):
    found = check.known_model_differences(_ROOT, reading["ours"]["devices"][0])
    assert found == {"known_model": "H100 80GB", "differences": []}


def test_simulated_h100_model_matches_the_real_h100(check, reading):
    gpu = reading["ours"]["devices"][0]
    with open(os.path.join(_ROOT, "tests/nvml-sim/models/h100-sxm5-80gb.yml"), encoding="utf-8") as f:
        model = yaml.safe_load(f)
    assert check.sim_differences(model, gpu, check.binding()) == []
