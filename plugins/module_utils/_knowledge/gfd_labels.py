# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""GPU Feature Discovery's labels: their names and how GFD derives each from
NVML and the device plugin's config, as the node_labels role reproduces them
(module_utils/_gfd_labels.py). Read from GFD's code, not its README, where the
two differ (the README's table still shows gpu.memory from older drivers)."""

from __future__ import annotations

# NVIDIA/k8s-device-plugin (GFD lives there since v0.15) and the go-nvlib it
# builds MIG profile names with, at the commits read.
_LM = "NVIDIA/k8s-device-plugin@1b826acc6af3079d8923bac395c3124b8861a9a6:internal/lm/"
_RESOURCE = "NVIDIA/k8s-device-plugin@1b826acc6af3079d8923bac395c3124b8861a9a6:internal/resource/"
_CONFIG = "NVIDIA/k8s-device-plugin@1b826acc6af3079d8923bac395c3124b8861a9a6:api/config/v1/"
_NVLIB = "NVIDIA/go-nvlib@3c161560521e3208792199f2ed0d559a5f3ae4f4:pkg/"
_NVML_CONST = "NVIDIA/go-nvlib@3c161560521e3208792199f2ed0d559a5f3ae4f4:vendor/github.com/NVIDIA/go-nvml/pkg/nvml/const.go"
_NFD_LOCAL = "kubernetes-sigs/node-feature-discovery@v0.19.0:source/local/local.go"
_CHECKED = "2026-11-26"
_VGPU = "NVIDIA/k8s-device-plugin@v0.19.0:internal/vgpu/"
_LM_V019 = "NVIDIA/k8s-device-plugin@v0.19.0:internal/lm/"
_RESOURCE_V019 = "NVIDIA/k8s-device-plugin@v0.19.0:internal/resource/"
_CHECKED_VGPU = "2026-11-29"

# Every label the role writes, and the rule GFD derives it by (when it is
# written, where that depends on the node or the declaration, is in the rule).
LABEL_RULES = (
    {
        "label": "nvidia.com/gpu.machine",
        "rule": "/sys/class/dmi/id/product_name, trimmed and sanitised; 'unknown' when it cannot be read",
        "source": _LM + "machine-type.go",
        "checked": _CHECKED,
    },
    {
        "label": "nvidia.com/cuda.driver-version.{major,minor,revision,full}",
        "rule": "nvmlSystemGetDriverVersion split on '.' (2 or 3 parts; revision '' with 2); also the deprecated nvidia.com/cuda.driver.{major,minor,rev}",
        "source": _LM + "nvml.go (newVersionLabeler)",
        "checked": _CHECKED,
    },
    {
        "label": "nvidia.com/cuda.runtime-version.{major,minor,full}",
        "rule": "nvmlSystemGetCudaDriverVersion v: major v/1000, minor v%1000/10, full major.minor; also the deprecated nvidia.com/cuda.runtime.{major,minor}",
        "source": _LM + "nvml.go (newVersionLabeler); " + _RESOURCE + "nvml-lib.go (GetCudaDriverVersion)",
        "checked": _CHECKED,
    },
    {
        "label": "nvidia.com/mig.capable",
        "rule": "'true' when any GPU is MIG-capable, else 'false'",
        "source": _LM + "nvml.go (newMigCapabilityLabeler)",
        "checked": _CHECKED,
    },
    {
        "label": "nvidia.com/mps.capable",
        "rule": "'false' unless the sharing strategy is mps; then 'true' unless a GPU has MIG on (GFD then fails)",
        "source": _LM + "nvml.go (newSharingLabeler, isMPSCapable)",
        "checked": _CHECKED,
    },
    {
        "label": "nvidia.com/gpu.mode",
        "rule": "the PCI class of every GPU: all 0x030200 'compute', all 0x030000 'graphics', else (or unreadable) 'unknown'",
        "source": _LM + "nvml.go (newGPUModeLabeler); " + _NVLIB + "nvpci/nvpci.go",
        "checked": _CHECKED,
    },
    {
        "label": "nvidia.com/gpu.{product,count,replicas,sharing-strategy,memory,family,compute.major,compute.minor}",
        "rule": "per GPU name: product = sanitised name (+ '-SHARED' when the resource has replicas > 1 and is not "
        "renamed), count = GPUs of that name (MIG on or off), replicas = the resource's replicas (1 without "
        "an entry; 0 for MIG-enabled GPUs, labelled without sharing), sharing-strategy = the config's "
        "strategy when replicas > 1 else 'none', memory = total memory in MiB (omitted when 0), family and "
        "compute.* from the CUDA compute capability (omitted when major is 0). GPUs with MIG off are "
        "labelled after those with MIG on, so their labels win",
        "source": _LM + "resource.go (NewGPUResourceLabeler, baseLabeler, getProductName); " + _LM + "mig-strategy.go (newGPULabelers)",
        "checked": _CHECKED,
    },
    {
        "label": "nvidia.com/mig.strategy",
        "rule": "the device plugin's MIG strategy; not written under 'none'",
        "source": _LM + "strategy.go (migStrategyLabeler); " + _LM + "mig-strategy.go",
        "checked": _CHECKED,
    },
    {
        "label": "nvidia.com/gpu.* under mig.strategy=single",
        "rule": "when every GPU has MIG on, none is empty and all MIG devices have one profile: the MIG devices "
        "overwrite nvidia.com/gpu.{product,count,replicas,sharing-strategy} (product "
        "<name>-MIG-<profile>[-SHARED]) and add memory, multiprocessors, slices.gi, slices.ci, engines.*; "
        "otherwise product <first MIG GPU's name>-MIG-INVALID, count 0, replicas 0, sharing-strategy '', "
        "memory 0",
        "source": _LM + "mig-strategy.go (newMigStrategySingleLabeler, newInvalidMigStrategyLabeler)",
        "checked": _CHECKED,
    },
    {
        "label": "nvidia.com/mig-<profile>.* under mig.strategy=mixed",
        "rule": "one resource per MIG profile: product <parent name>-MIG-<profile>[-SHARED], count, replicas, "
        "sharing-strategy, and nvmlDeviceGetAttributes: memory (memorySizeMB), multiprocessors, slices.gi, "
        "slices.ci, engines.{copy,decoder,encoder,jpeg,ofa}",
        "source": _LM + "mig-strategy.go (newMigStrategyMixedLabeler); " + _RESOURCE + "nvml-mig-device.go (GetAttributes)",
        "checked": _CHECKED,
    },
    {
        "label": "MIG profile names",
        "rule": "go-nvlib's MigProfileInfo.String(): '<g>g.<gb>gb' (or '<c>c.<g>g.<gb>gb' when the compute "
        "instance has fewer slices than its GPU instance) + '+<attrs>' or '-<neg attrs>'; GFD then turns "
        "'+' into '.'. gb = round(ceil(8 * memorySizeMB MiB / total bytes) / 8 * ceil(total bytes / GiB))",
        "source": _NVLIB + "nvlib/device/mig_profile.go; " + _RESOURCE + "nvml-mig-device.go (GetName)",
        "checked": _CHECKED,
    },
    {
        "label": "renames",
        "rule": "GFD drops a sharing entry's `rename` and sets <name>.shared for all when renameByDefault is "
        "true: so '-SHARED' is added exactly when renameByDefault is false",
        "source": _CONFIG + "replicas.go (disableResoureRenaming); " + _CONFIG + "config.go (DisableResourceNamingInConfig)",
        "checked": _CHECKED,
    },
    {
        "label": "sanitise",
        "rule": "drop every character outside [A-Za-z0-9-_. ], then join the whitespace-separated fields with '-'",
        "source": _LM + "resource.go (sanitise)",
        "checked": _CHECKED,
    },
    {
        "label": "nvidia.com/gpu.clique",
        "rule": "<cluster UUID>.<clique id> (the UUID in 8-4-4-4-12 form, the clique id in decimal) of the GPUs whose "
        "fabric probe (nvmlDeviceGetGpuFabricInfo) completed with status success and a non-zero cluster UUID; no "
        "label when none is attached or they disagree on either id",
        "source": _LM_V019 + "imex.go (newImexLabeler, getFabricIDs); " + _RESOURCE_V019 + "nvml-device.go (GetFabricIDs); "
        "NVIDIA/k8s-device-plugin@v0.19.0:vendor/github.com/NVIDIA/go-nvlib/pkg/nvlib/device/device.go (IsFabricAttached)",
        "checked": _CHECKED_VGPU,
    },
    {
        "label": "nvidia.com/vgpu.present",
        "rule": "'true' when an NVIDIA PCI function (vendor 0x10de under /sys/bus/pci/devices) has a vendor-specific "
        "capability (ID 0x09, the first in its capability list) whose bytes 3 and 4 are 'V' and 'F' (a vGPU guest), "
        "else 'false'; written on every node, one without GPUs too (the vGPU labeller is merged beside the device "
        "labeller, whatever that gives). No vgpu label when a function or its first 256 bytes of config cannot be read",
        "source": _LM_V019 + "vgpu.go; " + _LM_V019 + "labeler.go (NewLabelers); " + _VGPU + "pciutil.go; " + _VGPU + "vgpu.go",
        "checked": _CHECKED_VGPU,
    },
    {
        "label": "nvidia.com/vgpu.host-driver-{version,branch}",
        "rule": "of each vGPU function (the last wins): the record after the capability's chain of records from byte 5 "
        "(each record's length in its second byte) that starts with 0: its bytes 2-11 the host driver version, 12-21 "
        "the branch, NULs trimmed; a capability without that record is an error (GFD fails)",
        "source": _VGPU + "vgpu.go (GetInfo)",
        "checked": _CHECKED_VGPU,
    },
    {
        "label": "nvidia.com/gfd.timestamp",
        "rule": "the time GFD labelled: not written by the role (it would change every run; NFD's "
        "# +expiry-time directive carries the file's lifetime instead)",
        "source": _LM + "timestamp.go",
        "checked": _CHECKED,
    },
    {
        "label": "feature file",
        "rule": "NFD's local source reads every file in features.d not starting with '.', key=value lines; a "
        "'# +expiry-time=<RFC3339>' line drops the lines after it once the time has passed",
        "source": _NFD_LOCAL,
        "checked": _CHECKED,
    },
)

# sanitise()'s character class: what it drops.
SANITISE_DROP = {"value": r"[^A-Za-z0-9\-_. ]", "source": _LM + "resource.go (sanitise)", "checked": _CHECKED}

# getArchFamily: compute capability major -> family; where the family changes
# within a major, minors from `from_minor` on are `then`. major None: any other.
_FAMILY = _LM + "resource.go (getArchFamily)"
ARCH_FAMILIES = tuple(
    dict(row, source=_FAMILY, checked=_CHECKED)
    for row in (
        {"major": 1, "family": "tesla"},
        {"major": 2, "family": "fermi"},
        {"major": 3, "family": "kepler"},
        {"major": 5, "family": "maxwell"},
        {"major": 6, "family": "pascal"},
        {"major": 7, "family": "volta", "from_minor": 5, "then": "turing"},
        {"major": 8, "family": "ampere", "from_minor": 9, "then": "ada-lovelace"},
        {"major": 9, "family": "hopper"},
        {"major": 10, "family": "blackwell"},
        {"major": 12, "family": "blackwell"},
        {"major": 13, "family": "rubin"},
        {"major": None, "family": "undefined"},
    )
)

# go-nvlib's NewMigProfile: the NVML_GPU_INSTANCE_PROFILE_* index of a MIG
# device's GPU instance -> its slices and the attributes its name carries
# (+attributes, -negative). GPU_INSTANCE_PROFILE_3_SLICE_GFX (17) is not in
# go-nvlib's table: GFD fails on it, and so does the role.
_PROFILES = _NVLIB + "nvlib/device/mig_profile.go (NewMigProfile); " + _NVML_CONST
MIG_GI_PROFILES = tuple(
    dict({"attributes": [], "negative": []}, **row, source=_PROFILES, checked=_CHECKED)
    for row in (
        {"index": 0, "slices": 1},
        {"index": 1, "slices": 2},
        {"index": 2, "slices": 3},
        {"index": 3, "slices": 4},
        {"index": 4, "slices": 7},
        {"index": 5, "slices": 8},
        {"index": 6, "slices": 6},
        {"index": 7, "slices": 1, "attributes": ["me"]},
        {"index": 8, "slices": 2, "attributes": ["me"]},
        {"index": 9, "slices": 1},
        {"index": 10, "slices": 1, "attributes": ["gfx"]},
        {"index": 11, "slices": 2, "attributes": ["gfx"]},
        {"index": 12, "slices": 4, "attributes": ["gfx"]},
        {"index": 13, "slices": 1, "negative": ["me"]},
        {"index": 14, "slices": 2, "negative": ["me"]},
        {"index": 15, "slices": 1, "attributes": ["me.all"]},
        {"index": 16, "slices": 2, "attributes": ["me.all"]},
    )
)

# The NVML_COMPUTE_INSTANCE_PROFILE_* index -> compute slices (same source).
MIG_CI_PROFILES = tuple(
    {"index": index, "slices": slices, "source": _PROFILES, "checked": _CHECKED}
    for index, slices in ((0, 1), (1, 2), (2, 3), (3, 4), (4, 7), (5, 8), (6, 6), (7, 1), (8, 7))
)

# The PCI classes nvpci names, and the gpu.mode GFD gives a node whose GPUs
# all have that class.
PCI_CLASS_MODES = (
    {"class": 0x030000, "mode": "graphics", "source": _NVLIB + "nvpci/nvpci.go; " + _LM + "nvml.go", "checked": _CHECKED},
    {"class": 0x030200, "mode": "compute", "source": _NVLIB + "nvpci/nvpci.go; " + _LM + "nvml.go", "checked": _CHECKED},
)

# GFD's test for a vGPU guest function: the vendor-specific capability (PCI
# capability ID 0x09) carries the signature "VF" at its bytes 3 and 4.
VGPU_SIGNATURE = {
    "value": {"capability_id": 0x09, "offset": 3, "signature": "VF"},
    "source": _VGPU + "vgpu.go (IsVGPUDevice); " + _VGPU + "pciutil.go",
    "checked": _CHECKED_VGPU,
}
