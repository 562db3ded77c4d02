# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The kernel-module flavour rule on a vGPU guest: NVIDIA recommends the open
modules "wherever possible (Turing or later GPUs, or Ada or later when using
GPU virtualization)", and the open modules gained vGPU guest support with
R550. The node is a vGPU guest by GFD's rule on its PCI functions; the driver
role (driver_info), preflight (node_reads_info's nvidia_pci) and verify read
it, and all three must give the rule's answer.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.plugins.filter.driver import driver_kernel_module
from ansible_collections.gpufleet.nvidia.plugins.filter.matrix import kernel_module_flavour as flavour_filter
from ansible_collections.gpufleet.nvidia.plugins.module_utils._driver_state import DriverStateReader
from ansible_collections.gpufleet.nvidia.plugins.module_utils.matrix import evaluate as matrix_evaluate
from ansible_collections.gpufleet.nvidia.plugins.module_utils.matrix.versions import flavours_for, kernel_module_flavour
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _verify
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.test_kernel_module_rule import BRANCHES, KINDS, PROC, REQUESTS
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.test_vgpu_labels import PCI_EXPRESS, config, functions, vgpu_capability

GUEST = functions(config(PCI_EXPRESS, vgpu_capability()))
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
    declared = {"driver_branch": str(branch), "driver_kernel_module": requested, "driver_gpu_models": [model]}
    found = matrix_evaluate.Matrix().evaluate(declared, {"nvidia_pci": GUEST}, (), "desired", False)[1]
    return [f for f in found if f["rule"] == "kernel_module" and f["severity"] == "error"]


def _verify_errors(model: str, architecture: str, branch: int, requested: str, loaded_flavour: str) -> list[str]:
    version = "{0}.100.01".format(branch)
    nvml = {
        "status": "ok",
        "driver_loaded": True,
        "driver_version": version,
        "gpu_count": 1,
        "gpus": [{"index": 0, "name": model, "architecture": architecture}],
    }
    declared = {"managed": True, "reason": "test", "vars": {"driver_kernel_module": requested}}
    check = _verify.check_driver(declared, nvml, PROC[loaded_flavour].format(version), GUEST)
    return [f["subject"] for f in check["findings"] if f["severity"] == "error"]


@pytest.mark.parametrize("model,architecture,grace", KINDS, ids=[kind[0] for kind in KINDS])
@pytest.mark.parametrize("branch", BRANCHES)
def test_role_preflight_and_verify_give_the_rules_answer_in_a_vgpu_guest(model: str, architecture: str, grace: bool, branch: int):
    matrix = matrix_evaluate.Matrix()
    gpu = matrix.gpu_from_name(model, model)
    for requested in REQUESTS:
        choice, reasons = matrix.kernel_module_for([gpu], requested, branch, vgpu_guest=True)
        role = driver_kernel_module([model], requested, str(branch), "driver_gpu_models", True)
        where = "{0} R{1} {2} (vGPU): {3} / {4}".format(model, branch, requested, choice, role)
        assert role["flavour"] == choice.flavour, where
        assert (role["error"] is None) == (choice.flavour is not None), where
        assert (reasons == []) == (choice.flavour is not None), where
        assert bool(_preflight_errors(model, branch, requested)) == (choice.flavour is None), where
        if choice.flavour is None:
            with pytest.raises(Exception, match="kernel_module_flavour: no"):
                flavour_filter([model], requested, branch=branch, vgpu_guest=True)
            continue
        assert flavour_filter([model], requested, branch=branch, vgpu_guest=True) == choice.flavour, where
        other = "open" if choice.flavour == "proprietary" else "proprietary"
        assert "driver_kernel_module" not in _verify_errors(model, architecture, branch, requested, choice.flavour), where
        assert "driver_kernel_module" in _verify_errors(model, architecture, branch, requested, other), where


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
