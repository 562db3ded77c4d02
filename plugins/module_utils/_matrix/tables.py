# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""Views of the knowledge base that the rules read: the version matrix's facts
(plugins/module_utils/_knowledge: one row per fact, each with its source and
the date it was checked) in the shapes the rules use, with each rule's source
and description (SOURCES, RULES), the severities and MatrixError.

Each row carries a `status` where it matters: "V" verified (an NVIDIA
document or repository), "S" secondary (a third party repeats it) or "U"
unverified. V and S facts are encoded as rules that can fail a run; U facts
only ever produce warnings (and say so).
"""

from __future__ import annotations

import re
import typing as t

from ansible_collections.gpufleet.nvidia.plugins.module_utils import _findings
from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import (
    cuda as _cuda,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import (
    dcgm as _dcgm,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import (
    drivers as _drivers,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import (
    engines as _engines,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import (
    gpus as _gpus,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import (
    kubernetes as _kubernetes,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import (
    toolkit as _toolkit,
)

# (CUDA release, label, minimum driver or None where not verified), newest first.
CUDA_TOOLKIT_DRIVERS: tuple[tuple[str, str, str | None], ...] = tuple((row["cuda"], row["label"], row["driver"]) for row in _cuda.CUDA_DRIVERS)
CUDA_STATUS: dict[str, str] = {row["cuda"]: row.get("status", "V") for row in _cuda.CUDA_DRIVERS}
CUDA_BUILD_NUMBERED_FROM: tuple[int, ...] = tuple(int(p) for p in _cuda.BUILD_NUMBERED_FROM["value"].split("."))
CUDA_MVC_FLOORS: dict[int, str] = {row["major"]: row["driver"] for row in _cuda.MVC_FLOORS}
CUDA_MVC_FIRST_MINOR: dict[int, int] = {row["major"]: row["first_minor"] for row in _cuda.MVC_FLOORS if row["first_minor"]}
DRIVER_BRANCHES: dict[str, dict[str, t.Any]] = {
    row["branch"]: {key: row.get(key) for key in ("type", "eol", "note", "status", "source")} for row in _drivers.DRIVER_BRANCHES
}
BRANCH_TYPES: dict[str, str] = {row["type"]: row["name"] for row in _drivers.BRANCH_TYPES}
# (name, first CUDA, last driver branch), oldest -> newest.
ARCHITECTURES: tuple[tuple[str, str | None, str | None], ...] = tuple((row["name"], row["first_cuda"], row["last_branch"]) for row in _gpus.ARCHITECTURES)
ARCHITECTURE_NAMES = tuple(row[0] for row in ARCHITECTURES)
# architecture: the last CUDA major that targets it (absent: ongoing).
ARCHITECTURE_LAST_CUDA: dict[str, int] = {row["name"]: int(row["last_cuda"]) for row in _gpus.ARCHITECTURES if row.get("last_cuda")}
FORWARD_COMPAT_FIRST_CUDA: tuple[int, ...] = tuple(int(p) for p in _cuda.FORWARD_COMPAT["value"]["first_cuda"].split("."))
FORWARD_COMPAT_SAME_BRANCH: str = _cuda.FORWARD_COMPAT["value"]["same_branch"]
KERNEL_MODULE_FLAVOURS: tuple[dict[str, t.Any], ...] = _drivers.KERNEL_MODULE_FLAVOURS
OPEN_MODULES_FIRST_BRANCH: str = _drivers.OPEN_MODULES_FIRST_BRANCH["value"]
OPEN_MODULES_DEFAULT_BRANCH: str = _drivers.OPEN_MODULES_DEFAULT_BRANCH["value"]
OPEN_MODULES_VGPU_FIRST_BRANCH: str = _drivers.OPEN_MODULES_VGPU_FIRST_BRANCH["value"]
GPU_MODELS: tuple[dict[str, t.Any], ...] = _gpus.GPU_MODELS
# (feature, first version, what it is)
CTK_FEATURES: tuple[tuple[str, str, str], ...] = tuple((row["feature"], row["first"], row["what"]) for row in _toolkit.CTK_FEATURES)
CTK_CVE_FLOORS: tuple[dict[str, t.Any], ...] = _toolkit.CTK_CVE_FLOORS
DCGM_CVE_FLOORS: tuple[dict[str, t.Any], ...] = _dcgm.DCGM_CVE_FLOORS
DEVICE_PLUGIN_CVE_FLOORS: tuple[dict[str, t.Any], ...] = _kubernetes.DEVICE_PLUGIN_CVE_FLOORS
# engine: ((first version, CDI support from that version on), ...), ascending
ENGINE_CDI: dict[str, tuple[tuple[str, str], ...]] = {}
for _row in _engines.ENGINE_CDI:
    ENGINE_CDI[_row["engine"]] = ENGINE_CDI.get(_row["engine"], ()) + ((_row["first"], _row["support"]),)
ENGINES = tuple(ENGINE_CDI)
# gpufleet_dra's values: NVIDIA's DRA driver from its own chart, or through
# the GPU Operator's GPUCluster.
DRA_WORKFLOWS = ("driver", "operator")
CRICTL_GROUPS: tuple[tuple[tuple[int, ...], tuple[int, ...] | None], ...] = tuple(
    (tuple(int(p) for p in row["first"].split(".")), tuple(int(p) for p in row["last"].split(".")) if row["last"] else None)
    for row in _kubernetes.CRICTL_GROUPS
)

# Where each rule's facts come from: the knowledge tables it reads (each of
# their rows names its own source; findings made from one row carry that
# row's source).
SOURCES: dict[str, str] = {
    "cuda_driver": "_knowledge.cuda CUDA_DRIVERS, MVC_FLOORS: " + _cuda.CUDA_DRIVERS[-1]["source"] + " ; " + _cuda.MVC_FLOORS[0]["source"],
    "cuda_forward_compat": _cuda.FORWARD_COMPAT["source"],
    "branch_lifecycle": "_knowledge.drivers DRIVER_BRANCHES",
    "driver_security": "_knowledge.drivers DRIVER_SECURITY_BULLETINS (each row: its bulletin)",
    "architecture_branch": "_knowledge.gpus ARCHITECTURES, GPU_MODELS",
    "kernel_module": "_knowledge.drivers KERNEL_MODULE_FLAVOURS",
    "mig_driver": "_knowledge.gpus GPU_MODELS (mig_min_driver)",
    "mig_supported": "_knowledge.gpus GPU_MODELS (mig)",
    "container_toolkit": "_knowledge.toolkit CTK_FEATURES (each row: the CHANGELOG.md of its tag)",
    "cdi_spec_version": "_knowledge.toolkit CTK_CDI_SPEC_VERSIONS, _knowledge.engines CDI_SPEC_MIN_ENGINE",
    "engine_cdi": "_knowledge.engines ENGINE_CDI",
    "engine_lifecycle": "_knowledge.engines ENGINE_EOL",
    "device_plugin_runtime": "_knowledge.kubernetes DEVICE_PLUGIN_STRATEGIES",
    "device_plugin_cdi_cri": "_knowledge.kubernetes CDI_CRI_SUPPORT",
    "crictl_skew": "_knowledge.kubernetes CRICTL_GROUPS",
    "dra": "_knowledge.kubernetes DRA_MINIMUMS",
    "fabricmanager": "secondary: NVIDIA/gpu-operator#544, #2781",
    "declaration": "gpufleet.nvidia team interfaces (role variables)",
    "gpu_model": "_knowledge.gpus GPU_MODELS",
    "cuda_image": "_knowledge.cuda CUDA_DRIVERS, FORWARD_COMPAT ; _knowledge.gpus ARCHITECTURES (last_cuda), GPU_MODELS (data_center)",
}
# These rules also quote, after their tables, the source that the first row
# of the table given here names.
_FIRST_ROW_SOURCE: dict[str, tuple[dict[str, t.Any], ...]] = {
    "branch_lifecycle": _drivers.BRANCH_TYPES,
    "architecture_branch": _gpus.ARCHITECTURES,
    "kernel_module": _drivers.KERNEL_MODULE_FLAVOURS,
    "engine_cdi": _engines.ENGINE_CDI,
    "crictl_skew": _kubernetes.CRICTL_GROUPS,
    "dra": _kubernetes.DRA_MINIMUMS,
    "cuda_image": _gpus.ARCHITECTURES,
}
for _rule, _rows in _FIRST_ROW_SOURCE.items():
    SOURCES[_rule] += ": " + _rows[0]["source"]

# The verdicts of a CUDA image judged against a node (Matrix.judge_cuda_image).
CUDA_IMAGE_VERDICTS = ("native", "compat", "unsupported", "unknown")
_DIGEST = re.compile(r"^[^@\s]+@sha256:[0-9a-f]{64}$")

# The findings' severities, lowest first (one order for the matrix and verify).
SEVERITIES = _findings.SEVERITIES

# Every built-in rule, for `ignore_rules` and the docs. Each toolkit CVE floor
# is a rule of its own, so ignoring `container_toolkit` never silences one.
RULES: dict[str, str] = {
    "declaration": "declared versions are well-formed and agree with each other",
    "gpu_model": "declared GPU models are known to the matrix",
    "cuda_driver": "the driver runs every CUDA version the fleet's images use",
    "cuda_forward_compat": "a CUDA newer than the driver runs through the cuda-compat package (forward compatibility)",
    "branch_lifecycle": "the driver branch is supported (type and end of life)",
    "driver_security": "the driver carries its branch's fixes of NVIDIA's driver security bulletins",
    "architecture_branch": "the driver supports every GPU on the host (its architecture and its product's floor)",
    "kernel_module": "the kernel module flavour suits every GPU on the host",
    "mig_supported": "MIG is only declared for MIG-capable GPUs",
    "mig_driver": "the driver is new enough for MIG on each GPU model",
    "container_toolkit": "the Container Toolkit version has the features the node needs",
    "cdi_spec_version": "the container engine reads the CDI specification version the toolkit writes",
    "engine_cdi": "the container engine supports CDI the way it is declared",
    "engine_lifecycle": "the container engine's release is still supported",
    "device_plugin_runtime": "the device plugin's device-list strategy works with the engine's runtime setup",
    "device_plugin_cdi_cri": "the cdi-cri device-list strategy has a kubelet and an engine that pass CDI devices through the CRI",
    "crictl_skew": "crictl matches the cluster's Kubernetes minor",
    "dra": "Kubernetes and the driver meet NVIDIA's DRA driver's minimums where the node declares DRA (gpufleet_dra)",
    "fabricmanager": "Fabric Manager runs at exactly the driver's version",
}
for _row in CTK_CVE_FLOORS:
    RULES[_row["rule"]] = "Container Toolkit is not below the fix of {0} ({1})".format(_row["cve"], _row["fixed"])
    SOURCES[_row["rule"]] = _row["source"]
for _row in DCGM_CVE_FLOORS:
    RULES[_row["rule"]] = "DCGM and dcgm-exporter are not below the fix of {0} (DCGM {1}, exporter {2})".format(
        _row["cve"], _row["dcgm_fixed"], _row["exporter_fixed"]
    )
    SOURCES[_row["rule"]] = _row["source"]
for _row in DEVICE_PLUGIN_CVE_FLOORS:
    RULES[_row["rule"]] = "the device plugin is not below the fix of {0} ({1}) with a CDI device-list strategy".format(_row["cve"], _row["fixed"])
    SOURCES[_row["rule"]] = _row["source"]


class MatrixError(ValueError):
    """Bad input to the matrix (a malformed version, an invalid extra row or rule)."""
