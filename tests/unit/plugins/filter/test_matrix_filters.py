# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The matrix filters, and that each has its YAML sidecar."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.filter import matrix as f

FILTER_DIR = Path(f.__file__).parent


@pytest.mark.parametrize("name", sorted(f.FilterModule().filters()))
def test_every_filter_has_a_sidecar(name: str):
    doc = yaml.safe_load((FILTER_DIR / "{0}.yml".format(name)).read_text())
    assert doc["DOCUMENTATION"]["name"] == name
    assert doc["EXAMPLES"] and doc["RETURN"]["_value"]


def test_cuda_min_driver():
    assert f.cuda_min_driver("12.4") == "550.54.14"
    assert f.cuda_min_driver("12.4.1") == "550.54.15"
    assert f.cuda_min_driver("13.0", compat="minor") == "580"
    assert f.cuda_min_driver("13.4", tables={"cuda_drivers": [{"cuda": "13.4", "driver": "615.1.1"}]}) == "615.1.1"
    with pytest.raises(AnsibleFilterError, match="^cuda_min_driver: CUDA 13.9 is not in the matrix"):
        f.cuda_min_driver("13.9")
    with pytest.raises(AnsibleFilterError, match="^cuda_min_driver: "):
        f.cuda_min_driver("twelve")


def test_driver_branch():
    assert f.driver_branch("550.127.05") == "550"
    assert f.driver_branch("535.261.03-1~deb12u1") == "535"
    with pytest.raises(AnsibleFilterError, match="^driver_branch: "):
        f.driver_branch("latest")


def test_driver_max_cuda():
    assert f.driver_max_cuda("550.127.05") == "12.4"
    assert f.driver_max_cuda("535.261.03") == "12.2"


@pytest.mark.parametrize(
    "driver,gpu,expected",
    [
        ("590", "V100", False),
        ("580.95.05", "volta", True),
        ("470", "Tesla K80", True),
        ("535", "K80", False),
        ("565.57.01", "B200", False),
        ("570", "B200", True),
        ("515.43.04", "hopper", False),
    ],
)
def test_driver_supports_arch(driver: str, gpu: str, expected: bool):
    assert f.driver_supports_arch(driver, gpu) is expected


def test_driver_supports_arch_rejects_unknown_gpus():
    with pytest.raises(AnsibleFilterError, match="^driver_supports_arch: 'Q9000' is neither"):
        f.driver_supports_arch("580", "Q9000")


def test_driver_branch_info():
    info = f.driver_branch_info("535.261.03", today="2026-07-01")
    assert info["type"] == "LTSB" and info["status"] == "eol"
    assert f.driver_branch_info("580", today="2026-07-01")["status"] == "supported"
    assert f.driver_branch_info("545")["status"] == "unknown"


def test_gpu_architecture():
    assert f.gpu_architecture("NVIDIA H100 80GB HBM3") == "hopper"
    assert f.gpu_architecture("Quantum Q9000") == "unknown"


def test_kernel_module_flavour():
    assert f.kernel_module_flavour(["B200"]) == "open"
    assert f.kernel_module_flavour(["V100", "T4"]) == "proprietary"
    nvml = {"gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "architecture": "hopper"}]}
    assert f.kernel_module_flavour(nvml) == "open"
    assert f.kernel_module_flavour(nvml["gpus"], "proprietary") == "proprietary"
    with pytest.raises(AnsibleFilterError, match="^kernel_module_flavour: no single kernel module flavour"):
        f.kernel_module_flavour(["V100", "B200"])
    with pytest.raises(AnsibleFilterError, match="needs the open modules"):
        f.kernel_module_flavour("GB200", "proprietary")


def test_ctk_features():
    features = f.ctk_features("1.17.8-1")
    assert features["containerd_config_v3"] is True and features["cdi_refresh_units"] is False
