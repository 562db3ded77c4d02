# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One kernel-module flavour rule (matrix.versions.kernel_module_flavour), asked
by the driver role's filter, by preflight's matrix and by verify: walked over
every GPU architecture x driver branch x driver_kernel_module, the three must
give the same answer. Before the rule was one, the filter applied the branch
(no open modules before R515) and the matrix did not: an A100 on R470 with
auto was proprietary to the role, but an error in preflight ("these GPUs need
them") and a failed verify.
"""

from __future__ import annotations

import typing as t

import pytest

from ansible_collections.gpufleet.nvidia.plugins.filter.driver import driver_kernel_module
from ansible_collections.gpufleet.nvidia.plugins.filter.matrix import kernel_module_flavour as flavour_filter
from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix import evaluate as matrix_evaluate
from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix import tables as matrix_tables
from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix.versions import kernel_module_flavour
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _verify
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.test_vgpu_labels import PCI_EXPRESS, config, functions, vgpu_capability

# Branches around the rule's edges: before and at the first open modules
# (R515), before and at NVIDIA's switch of default (R560), and current ones.
BRANCHES = (470, 510, 515, 535, 550, 560, 580, 595, 610)
REQUESTS = ("auto", "open", "proprietary")
PROC = {
    "open": "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {0}  Release Build",
    "proprietary": "NVRM version: NVIDIA UNIX x86_64 Kernel Module  {0}  Release Build",
}


# A product name, as nvidia-smi prints it, of every kind of GPU the knowledge
# base tells apart (each architecture, and Grace superchips apart):
# test_every_kind_is_walked keeps the list whole.
NAMES = (
    "Tesla K80",
    "Tesla M60",
    "Tesla P100-PCIE-16GB",
    "Tesla V100-SXM2-16GB",
    "Tesla T4",
    "NVIDIA A100-SXM4-80GB",
    "NVIDIA L40S",
    "NVIDIA H100 80GB HBM3",
    "NVIDIA GH200 480GB",
    "NVIDIA B200",
    "NVIDIA GB200",
    "NVIDIA R100",
)


def _one_model_per_kind() -> list[tuple[str, str, bool]]:
    """(name, architecture, grace) of each of NAMES, as the knowledge base classifies it."""
    matrix = matrix_evaluate.Matrix()
    return [(name, matrix.gpu_from_name(name, name).architecture, matrix.gpu_from_name(name, name).grace) for name in NAMES]


KINDS = _one_model_per_kind()


# A vGPU guest's NVIDIA PCI functions as node_reads_info and driver_info read them (one with NVIDIA's vGPU
# capability); None: no read, as on bare metal where the rule needs none.
VGPU_GUEST_PCI = functions(config(PCI_EXPRESS, vgpu_capability()))


def _preflight_errors(model: str, branch: int, requested: str, nvidia_pci: dict | None = None) -> list[dict[str, str]]:
    declared = {"driver_branch": str(branch), "driver_kernel_module": requested, "driver_gpu_models": [model]}
    installed = {"nvidia_pci": nvidia_pci} if nvidia_pci else None
    found = matrix_evaluate.Matrix().evaluate(declared, installed, (), "desired", False)[1]
    return [f for f in found if f["rule"] == "kernel_module" and f["severity"] == "error"]


def _verify_errors(model: str, architecture: str, branch: int, requested: str, loaded_flavour: str, nvidia_pci: dict | None = None) -> list[str]:
    version = "{0}.100.01".format(branch)
    nvml = {
        "status": "ok",
        "driver_loaded": True,
        "driver_version": version,
        "gpu_count": 1,
        "gpus": [{"index": 0, "name": model, "architecture": architecture}],
    }
    declared = {"managed": True, "reason": "test", "vars": {"driver_kernel_module": requested}}
    check = _verify.check_driver(declared, nvml, PROC[loaded_flavour].format(version), nvidia_pci)
    return [f["subject"] for f in check["findings"] if f["severity"] == "error"]


@pytest.mark.parametrize("model,architecture,grace", KINDS, ids=[kind[0] for kind in KINDS])
@pytest.mark.parametrize("branch", BRANCHES)
@pytest.mark.parametrize("guest", [False, True], ids=["bare-metal", "vgpu-guest"])
def test_role_preflight_and_verify_give_the_rules_answer(model: str, architecture: str, grace: bool, branch: int, guest: bool):
    """On bare metal and on a vGPU guest (each reads the guest from the node's PCI functions)."""
    matrix = matrix_evaluate.Matrix()
    gpu = matrix.gpu_from_name(model, model)
    pci = VGPU_GUEST_PCI if guest else None
    for requested in REQUESTS:
        choice, reasons = matrix.kernel_module_for([gpu], requested, branch, guest)
        role = driver_kernel_module([model], requested, str(branch), "driver_gpu_models", guest)
        where = "{0} R{1} {2}{3}: {4} / {5}".format(model, branch, requested, " (vGPU)" if guest else "", choice, role)
        # The driver role installs what the rule says, or stops with its reason.
        assert role["flavour"] == choice.flavour, where
        assert (role["error"] is None) == (choice.flavour is not None), where
        assert (reasons == []) == (choice.flavour is not None), where
        # Preflight refuses exactly what the role would refuse.
        assert bool(_preflight_errors(model, branch, requested, pci)) == (choice.flavour is None), where
        # The public filter answers the same, or fails.
        if choice.flavour is None:
            with pytest.raises(Exception, match="kernel_module_flavour: no"):
                flavour_filter([model], requested, branch=branch, vgpu_guest=guest)
            continue
        assert flavour_filter([model], requested, branch=branch, vgpu_guest=guest) == choice.flavour, where
        # Verify passes the flavour the role installed, and fails the other one.
        other = "open" if choice.flavour == "proprietary" else "proprietary"
        assert "driver_kernel_module" not in _verify_errors(model, architecture, branch, requested, choice.flavour, pci), where
        assert "driver_kernel_module" in _verify_errors(model, architecture, branch, requested, other, pci), where


def test_every_kind_is_walked():
    kinds = {(row["architecture"], bool(row.get("grace"))) for row in matrix_tables.GPU_MODELS}
    assert {(architecture, grace) for _name, architecture, grace in KINDS} == kinds
    assert {architecture for _name, architecture, _grace in KINDS} == set(matrix_tables.ARCHITECTURE_NAMES)


@pytest.mark.parametrize(
    "flavours,requested,branch,answer",
    [
        # Spelled out from _knowledge.drivers, so that a wrong row cannot pass its own test.
        ((("open", "proprietary"),), "auto", 470, ("proprietary", None, ())),  # A100 before R515
        ((("open", "proprietary"),), "auto", 515, ("open", None, ())),
        ((("open", "proprietary"),), "auto", None, ("open", None, ())),
        ((("open",),), "auto", 470, (None, "open_too_old", (0,))),  # B200 before R515
        ((("open", "proprietary"),), "open", 510, (None, "open_too_old", ())),
        ((("proprietary",), ("open", "proprietary")), "auto", 580, ("proprietary", None, ())),  # V100 + H100
        ((("proprietary",), ("open",)), "auto", 580, (None, "mixed", (0, 1))),  # V100 + B200
        ((("proprietary",), ("open",)), "proprietary", 580, (None, "refused", (1,))),
        ((("open",), ()), "auto", 580, (None, "unknown", (1,))),
        ((("open",), ()), "open", 580, ("open", None, ())),
        ((), "auto", 580, (None, "no_gpus", ())),
        ((), "proprietary", 580, ("proprietary", None, ())),
    ],
)
def test_the_rule(flavours: t.Any, requested: str, branch: int | None, answer: tuple):
    assert tuple(kernel_module_flavour(flavours, requested, branch)) == answer


def test_an_unknown_request_is_refused():
    with pytest.raises(matrix_tables.MatrixError, match="unknown kernel module flavour 'sometimes'"):
        kernel_module_flavour([("open",)], "sometimes")
