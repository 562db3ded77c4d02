# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The kernel-module flavour rule on a vGPU guest: NVIDIA recommends the open
modules "wherever possible (Turing or later GPUs, or Ada or later when using
GPU virtualization)", and the open modules gained vGPU guest support with
R550. The node is a vGPU guest by GFD's rule on its PCI functions; the driver
role (driver_info), preflight (node_reads_info's nvidia_pci) and verify read
it; test_kernel_module_rule.py walks every kind x branch x request on a guest
too, where all three must give the rule's answer. Here: the rows, the branch
floor, the messages, and driver_info's read.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.plugins.filter.driver import driver_kernel_module
from ansible_collections.gpufleet.nvidia.plugins.module_utils._driver_state import DriverStateReader
from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix import evaluate as matrix_evaluate
from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix.versions import flavours_for, kernel_module_flavour
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils import test_kernel_module_rule as rule_test
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.test_vgpu_labels import PCI_EXPRESS, config, functions, vgpu_capability

GUEST = rule_test.VGPU_GUEST_PCI
BARE_METAL = functions(config(PCI_EXPRESS))


@pytest.mark.parametrize(
    "architecture,bare_metal,as_vgpu",
    [
        # Spelled out from the sources (see _knowledge.drivers), so that a wrong row cannot pass its own test.
        ("volta", ("proprietary",), ("proprietary",)),
        ("turing", ("open", "proprietary"), ("proprietary",)),
        ("ampere", ("open", "proprietary"), ("proprietary",)),
        ("ada", ("open", "proprietary"), ("open", "proprietary")),
        ("hopper", ("open", "proprietary"), ("open", "proprietary")),
        ("blackwell", ("open",), ("open",)),
    ],
)
def test_gpu_virtualization_takes_the_open_modules_from_ada_on(architecture: str, bare_metal: tuple, as_vgpu: tuple):
    assert flavours_for(architecture) == bare_metal
    assert flavours_for(architecture, vgpu_guest=True) == as_vgpu


@pytest.mark.parametrize(
    "flavours,requested,branch,answer",
    [
        ((("open", "proprietary"),), "auto", 535, ("proprietary", None, ())),  # an L40S vGPU before R550
        ((("open", "proprietary"),), "auto", 550, ("open", None, ())),
        ((("open",),), "auto", 535, (None, "open_too_old", (0,))),
        ((("open", "proprietary"),), "open", 545, (None, "open_too_old", ())),
    ],
)
def test_in_a_vgpu_guest_the_open_modules_start_at_r550(flavours: tuple, requested: str, branch: int, answer: tuple):
    assert tuple(kernel_module_flavour(flavours, requested, branch, vgpu_guest=True)) == answer
    # On bare metal the same branches ship them.
    assert kernel_module_flavour(flavours, requested, branch).flavour == (requested if requested != "auto" else flavours[0][0])


def _preflight_errors(model: str, branch: int, requested: str) -> list[dict[str, str]]:
    return rule_test._preflight_errors(model, branch, requested, GUEST)


def _verify_errors(model: str, architecture: str, branch: int, requested: str, loaded_flavour: str) -> list[str]:
    return rule_test._verify_errors(model, architecture, branch, requested, loaded_flavour, GUEST)


def test_an_ampere_vgpu_guest_is_proprietary_where_bare_metal_is_open():
    assert driver_kernel_module(["A100"], "auto", "580", "driver_gpu_models")["flavour"] == "open"
    guest = driver_kernel_module(["A100"], "auto", "580", "driver_gpu_models", True)
    assert guest["flavour"] == "proprietary" and guest["error"] is None
    refused = driver_kernel_module(["A100"], "open", "580", "driver_gpu_models", True)
    assert refused["flavour"] is None
    assert "run only the proprietary kernel modules as vGPUs (a vGPU guest)" in refused["error"], refused
    # Preflight says why, and verify expects the proprietary modules there.
    (error,) = _preflight_errors("NVIDIA A100-SXM4-80GB", 580, "open")
    assert "needs the proprietary modules as a vGPU" in error["message"], error
    assert _verify_errors("NVIDIA A100-SXM4-80GB", "ampere", 580, "auto", "proprietary") == []


def test_an_l40s_vgpu_guest_on_r535_has_no_open_modules():
    refused = driver_kernel_module(["L40S"], "open", "535", "driver_gpu_models", True)
    assert refused["error"].startswith("driver_kernel_module: open needs driver branch 550 or later in a vGPU guest, but the branch is 535"), refused
    (error,) = _preflight_errors("NVIDIA L40S", 535, "open")
    assert "in a vGPU guest the open kernel modules drive vGPUs from R550 on" in error["message"] and error["fix"].startswith("use driver branch R550"), error


def test_a_bare_metal_node_read_is_no_vgpu_guest():
    found = matrix_evaluate.Matrix().evaluate(
        {"driver_branch": "580", "driver_kernel_module": "open", "driver_gpu_models": ["A100"]}, {"nvidia_pci": BARE_METAL}, (), "desired", False
    )[1]
    assert [f for f in found if f["rule"] == "kernel_module"] == []


def _function(root: Path, address: str, space: bytes) -> None:
    device = root / "sys" / "bus" / "pci" / "devices" / address
    device.mkdir(parents=True)
    (device / "vendor").write_text("0x10de\n")
    (device / "class").write_text("0x030200\n")
    (device / "config").write_bytes(space)


@pytest.mark.parametrize(
    "space,guest",
    [
        (bytes.fromhex(config(PCI_EXPRESS, vgpu_capability())) + bytes(3840), True),
        (bytes.fromhex(config(PCI_EXPRESS)) + bytes(3840), False),
        # An unprivileged read gives 64 bytes: nothing is known.
        (bytes(64), None),
    ],
    ids=["vgpu-guest", "bare-metal", "unprivileged"],
)
def test_driver_info_reads_whether_the_node_is_a_vgpu_guest(tmp_path: Path, space: bytes, guest: bool | None):
    _function(tmp_path, "0000:07:00.0", space)
    assert DriverStateReader(lambda argv: (127, "", ""), root=str(tmp_path)).vgpu_guest() is guest
