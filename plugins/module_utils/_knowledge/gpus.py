# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""GPU architectures and GPU models (product name -> architecture, Grace,
data-center class, MIG facts, per-product driver floors).

Read by _matrix/ (version_matrix, the matrix filters) and by the driver role's
driver_kernel_module filter: the one table of GPU models in the collection.
"""

from __future__ import annotations

_ARCH_MATRIX = "https://docs.nvidia.com/datacenter/tesla/drivers/cuda-toolkit-driver-and-architecture-matrix.html"
_NVML_H = "NVIDIA/go-nvml@2f9e261fe40a:gen/nvml/nvml.h"
_MIG_GPUS = "https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-gpus.html"
_MIG_DRIVERS = "https://docs.nvidia.com/datacenter/tesla/mig-user-guide/620/deployment-considerations.html"
_MIG = _MIG_GPUS + " ; " + _MIG_DRIVERS
_MIG_GPUS_610 = "https://docs.nvidia.com/datacenter/tesla/mig-user-guide/610/supported-gpus.html"
_CUDA_GPUS = "https://developer.nvidia.com/cuda-gpus"
_CC_10_3 = "https://docs.nvidia.com/cuda/archive/12.9.1/cuda-features-archive/index.html"
_PLATFORM = "NVIDIA/cloud-native-docs@52dcb7b8:gpu-operator/platform-support.rst"
_NAME_TABLE = "NVIDIA/open-gpu-kernel-modules:src/nvidia/generated/g_nv_name_released.h"
# NVIDIA's mig-parted default config: the MIG profiles NVIDIA's own tooling
# applies per PCI device id (A800/H800 share the A100/H100 groups; B300 and
# GB300 from GPU Operator 25.10.0).
_MIG_PARTED = "NVIDIA/mig-parted@bd7160f4:deployments/systemd/config-default.yaml"
# The open kernel modules' README lists every GPU the release supports, with its PCI ids.
_OPEN_README = "NVIDIA/open-gpu-kernel-modules@df1c9a3d:README.md"
_OPERATOR_NOTES = "NVIDIA/cloud-native-docs@52dcb7b8:gpu-operator/release-notes.rst"

# The tables below keep one row a line, as their sources' tables read: ruff format would spread
# every row over many lines.
# fmt: off

# Ordered oldest -> newest (rules compare positions). `first_cuda`: the first
# toolkit for the architecture; its CUDA_DRIVERS row is the architecture's
# first driver (Blackwell 12.8 -> 570.26, Hopper/Ada 11.8 -> 520.61.05,
# Ampere 11.0 GA -> 450.51.05); Turing and older predate that table.
# `last_branch`: the last driver branch that supports it. `last_cuda`: the
# last CUDA major whose toolkit and libraries target it (the matrix page's
# "Last CUDA Toolkit Support": Maxwell, Pascal and Volta end with CUDA 12.x,
# Kepler 3.5/3.7 with 11.x; Kepler 3.0/3.2 already ended with 10.x, which
# the major alone does not say); None: ongoing. The number
# nvmlDeviceGetArchitecture returns for each is ABI, kept once with the NVML
# binding (_nvml/constants.py's ARCHITECTURE_NAMES, from nvml.h). Rubin is not on the matrix
# page yet, so it carries no driver rule.
ARCHITECTURES = (
    {"name": "kepler", "first_cuda": "6.0", "last_branch": "470", "last_cuda": "11", "source": _ARCH_MATRIX,
     "checked": "2026-11-26"},
    {"name": "maxwell", "first_cuda": "6.5", "last_branch": "580", "last_cuda": "12", "source": _ARCH_MATRIX,
     "checked": "2026-11-26"},
    {"name": "pascal", "first_cuda": "8.0", "last_branch": "580", "last_cuda": "12", "source": _ARCH_MATRIX,
     "checked": "2026-11-26"},
    {"name": "volta", "first_cuda": "9.0", "last_branch": "580", "last_cuda": "12", "source": _ARCH_MATRIX,
     "checked": "2026-11-26"},
    {"name": "turing", "first_cuda": "10.0", "last_branch": None, "last_cuda": None, "source": _ARCH_MATRIX,
     "checked": "2026-11-25"},
    {"name": "ampere", "first_cuda": "11.0", "last_branch": None, "last_cuda": None, "source": _ARCH_MATRIX,
     "checked": "2026-11-25"},
    {"name": "ada", "first_cuda": "11.8", "last_branch": None, "last_cuda": None, "source": _ARCH_MATRIX,
     "checked": "2026-11-25"},
    {"name": "hopper", "first_cuda": "11.8", "last_branch": None, "last_cuda": None, "source": _ARCH_MATRIX,
     "checked": "2026-11-25"},
    {"name": "blackwell", "first_cuda": "12.8", "last_branch": None, "last_cuda": None, "source": _ARCH_MATRIX,
     "checked": "2026-11-25"},
    {"name": "rubin", "first_cuda": None, "last_branch": None, "last_cuda": None, "source": _NVML_H,
     "checked": "2026-11-22"},
)

# GPU models. A GPU read through NVML reports its architecture itself; this
# table is for GPUs declared by model (driver_gpu_models: an image bake, a node
# whose driver is not loaded yet) and for the per-model facts.
#
# `match` is a regular expression searched in the lower-cased product name
# with punctuation turned into spaces ("NVIDIA A100-SXM4-40GB" -> "nvidia a100
# sxm4 40gb"); the first match wins, so specific rows come before general ones
# (an "RTX 5000 Ada" is Ada, not a GeForce RTX 50x0; a "Quadro RTX 4000" is
# Turing).
# `grace`: the GPU sits on a Grace superchip (GH200, GB200, GB300): open kernel
# modules only (drivers.KERNEL_MODULE_FLAVOURS).
# `data_center`: a data-center GPU, the class CUDA forward compatibility
# supports (cuda.FORWARD_COMPAT).
# `mig`: True = on the MIG Supported GPUs page; False = not on it; None = not
# known (variants the page does not list: no MIG rule fires for them).
# `mig_min_driver`: the MIG guide's minimum driver (None where it gives none).
# `mig_units`: placement units of the memory-slice grid (mig-profiles.yaml).
# `min_driver` / `first_cuda`: a product floor above its architecture's
# (the product shipped later than the architecture's first driver; B300 and
# GB300 are compute capability 10.3, first in CUDA 12.9).
# `min_driver_by_branch`: a product first named by a release of each of several
# branches: the floor of the driver's branch; a branch not listed takes the next
# listed one's; every release of a later branch qualifies. `floor_status` "U":
# the floor rests on a proxy (the first driver tag whose name table lists the
# product), so it only warns.
GPU_MODELS = (
    {"model": "gb300", "match": r"\bgb300\b", "architecture": "blackwell", "grace": True, "data_center": True,
     "mig": True, "mig_min_driver": "595.58.03", "mig_units": 8,
     "first_cuda": "12.9", "min_driver": "580.82.07", "floor_status": "U",
     "source": _NAME_TABLE + " (GB300 first in 580.82.07: a proxy, so a warning only; the MIG guide names GB300"
     " only with R595) ; " + _CC_10_3 + " ; " + _MIG + " ; " + _MIG_PARTED + " (0x31C210DE, 8 units)",
     "checked": "2026-11-29"},
    {"model": "gb200", "match": r"\bgb200\b", "architecture": "blackwell", "grace": True, "data_center": True,
     "mig": True, "mig_min_driver": "570.133.20", "mig_units": 8,
     "min_driver": "570.123.10", "floor_status": "U",
     "source": _NAME_TABLE + " (GB200 first in 570.123.10: a proxy, so a warning only) ; " + _MIG,
     "checked": "2026-11-25"},
    {"model": "b300", "match": r"\bb300\b", "architecture": "blackwell", "grace": False, "data_center": True,
     "mig": True, "mig_min_driver": "580.82.07", "mig_units": 8,
     "first_cuda": "12.9", "min_driver": "580.82.07", "floor_status": "V",
     "source": _NAME_TABLE + " (B300 first in 580.82.07) ; " + _CC_10_3 + " ; " + _MIG + " ; " + _MIG_PARTED
     + " (0x318210DE, 8 units) ; " + _OPERATOR_NOTES + " (25.10.0: MIG profiles for HGX B300)", "checked": "2026-11-29"},
    {"model": "b200", "match": r"\bb200\b", "architecture": "blackwell", "grace": False, "data_center": True,
     "mig": True, "mig_min_driver": "570.133.20", "mig_units": 8,
     "min_driver": "570.133.20", "floor_status": "V",
     "source": _PLATFORM + " (\"HGX B200 requires ... 570.133.20 or later\") ; " + _MIG, "checked": "2026-11-25"},
    {"model": "b100", "match": r"\bb100\b", "architecture": "blackwell", "grace": False, "data_center": True,
     "mig": None, "mig_min_driver": None, "mig_units": None,
     "source": "secondary: NVIDIA product naming; no NVIDIA source read names B100 (not in the driver's name table "
               "up to 595.45.04)", "checked": "2026-11-25"},
    # MIG: the MIG guide gives R575 >= 575.51.03 for every edition, but the
    # Server Edition needs 575.57.08 to run at all, and the GPU Operator's
    # platform support says "MIG is not supported on the 575.57.08 driver
    # release"; NVIDIA's own MIG tooling supports the card from GPU Operator
    # 25.3.4, whose driver is 580.82.07. The stricter, later floor is kept.
    {"model": "rtx-pro-6000-blackwell-server", "match": r"\brtx pro 6000\b.*\bserver\b", "architecture": "blackwell",
     "grace": False, "data_center": True, "mig": True, "mig_min_driver": "580.82.07", "mig_units": 12,
     "min_driver": "575.57.08", "floor_status": "V",
     "source": _PLATFORM + " (\"Driver versions 575.57.08 or later is required\"; \"MIG is not supported on the "
     "575.57.08 driver release\") ; " + _OPERATOR_NOTES + " (25.3.4: default driver 580.82.07, MIG profiles for the "
     "RTX Pro 6000 Blackwell Server Edition) ; " + _MIG_DRIVERS + " (R575 >= 575.51.03)", "checked": "2026-11-29"},
    {"model": "rtx-pro-6000-blackwell", "match": r"\brtx pro 6000\b", "architecture": "blackwell", "grace": False,
     "data_center": False, "mig": True, "mig_min_driver": "575.51.03", "mig_units": 12,
     "min_driver": "570.123.07", "floor_status": "U",
     "source": _NAME_TABLE + " (Workstation and Max-Q editions first in 570.123.07: a proxy) ; " + _MIG,
     "checked": "2026-11-25"},
    {"model": "rtx-pro-5000-blackwell", "match": r"\brtx pro 5000\b", "architecture": "blackwell", "grace": False,
     "data_center": False, "mig": True, "mig_min_driver": "575.57.08", "mig_units": None,
     "min_driver": "570.153.02", "floor_status": "U",
     "source": _NAME_TABLE + " (first in 570.153.02: a proxy) ; " + _MIG, "checked": "2026-11-25"},
    {"model": "rtx-pro-4500-blackwell", "match": r"\brtx pro 4500\b", "architecture": "blackwell", "grace": False,
     "data_center": False, "mig": True, "mig_min_driver": "575.64", "mig_units": None,
     "min_driver": "570.169", "floor_status": "U",
     "source": _NAME_TABLE + " (first in 570.169: a proxy) ; " + _MIG_GPUS_610 + " ; " + _MIG_DRIVERS,
     "checked": "2026-11-25"},
    {"model": "blackwell", "match": r"\bblackwell\b", "architecture": "blackwell", "grace": False,
     "data_center": None, "mig": None, "mig_min_driver": None, "mig_units": None,
     "source": _ARCH_MATRIX, "checked": "2026-11-22"},
    {"model": "rubin", "match": r"\br[12]00\b|\brubin\b", "architecture": "rubin", "grace": False,
     "data_center": True, "mig": None, "mig_min_driver": None, "mig_units": None,
     "source": _NVML_H, "checked": "2026-11-22"},
    {"model": "gh200", "match": r"\bgh200\b", "architecture": "hopper", "grace": True, "data_center": True,
     "mig": True, "mig_min_driver": None, "mig_units": 8, "source": _MIG, "checked": "2026-11-22"},
    {"model": "h200", "match": r"\bh200\b", "architecture": "hopper", "grace": False, "data_center": True,
     "mig": True, "mig_min_driver": "550.90.07", "mig_units": 8, "source": _MIG, "checked": "2026-11-22"},
    {"model": "h100", "match": r"\bh100\b", "architecture": "hopper", "grace": False, "data_center": True,
     "mig": True, "mig_min_driver": "525.85.12", "mig_units": 8, "source": _MIG, "checked": "2026-11-22"},
    # The MIG guide does not list A800 or H800; NVIDIA's mig-parted applies the
    # A100/H100 profiles to their device ids (0x2322, 0x2324; H800 NVL 0x233A).
    {"model": "h800", "match": r"\bh800\b", "architecture": "hopper", "grace": False, "data_center": True,
     "mig": True, "mig_min_driver": None, "mig_units": 8,
     "source": _CUDA_GPUS + " ; " + _MIG_PARTED + " (\"H100-80GB, H800-80GB\" group)", "checked": "2026-11-29"},
    # H20-3e: first named by 535.216.03 and 550.127.08 (and 565.77); 550.40.80,
    # an R550 release numbered lower, names it too, so the floor only warns.
    {"model": "h20-3e", "match": r"\bh20 3e\b", "architecture": "hopper", "grace": False, "data_center": True,
     "mig": None, "mig_min_driver": None, "mig_units": None,
     "min_driver_by_branch": {"535": "535.216.03", "550": "550.127.08", "565": "565.77"}, "floor_status": "U",
     "source": _OPEN_README + " (\"NVIDIA H20-3e | 232C 10DE 2063\", first in the tags 535.216.03, 550.127.08, 550.40.80 "
     "and 565.77) ; https://docs.nvidia.com/datacenter/tesla/tesla-release-notes-535-216-03/index.html",
     "checked": "2026-11-29"},
    {"model": "h20", "match": r"\bh20\b", "architecture": "hopper", "grace": False, "data_center": True,
     "mig": True, "mig_min_driver": "535.161.07", "mig_units": 8, "source": _MIG, "checked": "2026-11-22"},
    {"model": "a100", "match": r"\ba100\b", "architecture": "ampere", "grace": False, "data_center": True,
     "mig": True, "mig_min_driver": "450.80.02", "mig_units": 8, "source": _MIG, "checked": "2026-11-22"},
    {"model": "a800", "match": r"\ba800\b", "architecture": "ampere", "grace": False, "data_center": True,
     "mig": True, "mig_min_driver": None, "mig_units": 8,
     "source": _CUDA_GPUS + " ; " + _MIG_PARTED + " (\"A100-80GB, A800-80GB\" and A100/A800-40GB groups)",
     "checked": "2026-11-29"},
    {"model": "a30", "match": r"\ba30\b", "architecture": "ampere", "grace": False, "data_center": True,
     "mig": True, "mig_min_driver": "460.73.01", "mig_units": 4, "source": _MIG, "checked": "2026-11-22"},
    {"model": "a40", "match": r"\ba40\b", "architecture": "ampere", "grace": False, "data_center": True,
     "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    {"model": "a10", "match": r"\ba10g?\b", "architecture": "ampere", "grace": False, "data_center": True,
     "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    {"model": "a16", "match": r"\ba16\b", "architecture": "ampere", "grace": False, "data_center": True,
     "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    {"model": "a2", "match": r"\ba2\b", "architecture": "ampere", "grace": False, "data_center": True,
     "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    {"model": "quadro-rtx", "match": r"\bquadro rtx \d+\b", "architecture": "turing", "grace": False,
     "data_center": False, "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    {"model": "rtx-a", "match": r"\brtx a\d+\b", "architecture": "ampere", "grace": False, "data_center": False,
     "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    {"model": "rtx-ada", "match": r"\brtx \d+ ada\b", "architecture": "ada", "grace": False, "data_center": False,
     "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    {"model": "geforce-rtx-50", "match": r"\brtx 50\d0\b", "architecture": "blackwell",
     "grace": False, "data_center": False, "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    {"model": "l40s", "match": r"\bl40s\b", "architecture": "ada", "grace": False, "data_center": True,
     "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    {"model": "l40", "match": r"\bl40\b", "architecture": "ada", "grace": False, "data_center": True,
     "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    {"model": "l20", "match": r"\bl20\b", "architecture": "ada", "grace": False, "data_center": True,
     "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    # NVIDIA L2: first named by 535.154.05 and 550.40.07; 535.43.23, an R535
    # release numbered lower, names it too, so the floor only warns. Its
    # architecture is Ada by its device id among the Ada 27Bx parts (S).
    {"model": "l2", "match": r"\bl2\b", "architecture": "ada", "grace": False, "data_center": True,
     "mig": False, "mig_min_driver": None, "mig_units": None,
     "min_driver_by_branch": {"535": "535.154.05", "550": "550.40.07"}, "floor_status": "U",
     "source": _OPEN_README + " (\"NVIDIA L2 | 27B6 10DE 1933\", first in the tags 535.154.05, 535.43.23 and 550.40.07) ; "
     + _NAME_TABLE + "@535.154.05 ({ 0x27B6, 0x1933, 0x10de, \"NVIDIA L2\" })",
     "checked": "2026-11-29"},
    {"model": "l4", "match": r"\bl4\b", "architecture": "ada", "grace": False, "data_center": True,
     "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    {"model": "geforce-rtx-40", "match": r"\brtx 40\d0\b", "architecture": "ada", "grace": False,
     "data_center": False, "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    {"model": "geforce-rtx-30", "match": r"\brtx 30\d0\b", "architecture": "ampere", "grace": False,
     "data_center": False, "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    {"model": "t4", "match": r"\bt4\b", "architecture": "turing", "grace": False, "data_center": True,
     "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    {"model": "turing-consumer", "match": r"\btitan rtx\b|\brtx 20\d0\b|\bgtx 16\d0\b", "architecture": "turing",
     "grace": False, "data_center": False, "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    {"model": "v100", "match": r"\bv100\b", "architecture": "volta", "grace": False, "data_center": True,
     "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    {"model": "titan-v", "match": r"\btitan v\b|\bgv100\b", "architecture": "volta", "grace": False,
     "data_center": False, "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    {"model": "p100", "match": r"\bp100\b", "architecture": "pascal", "grace": False, "data_center": True,
     "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    {"model": "p40", "match": r"\bp40\b", "architecture": "pascal", "grace": False, "data_center": True,
     "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    {"model": "p6", "match": r"\bp6\b", "architecture": "pascal", "grace": False, "data_center": True,
     "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    {"model": "p4", "match": r"\bp4\b", "architecture": "pascal", "grace": False, "data_center": True,
     "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    {"model": "pascal-other", "match": r"\btitan xp\b|\bgtx 10\d0\b|\bquadro p\d+\b", "architecture": "pascal",
     "grace": False, "data_center": False, "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    {"model": "m60", "match": r"\bm60\b", "architecture": "maxwell", "grace": False, "data_center": True,
     "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    {"model": "m40", "match": r"\bm40\b", "architecture": "maxwell", "grace": False, "data_center": True,
     "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    {"model": "m10", "match": r"\bm10\b", "architecture": "maxwell", "grace": False, "data_center": True,
     "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    {"model": "m6", "match": r"\bm6\b", "architecture": "maxwell", "grace": False, "data_center": True,
     "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    {"model": "m4", "match": r"\bm4\b", "architecture": "maxwell", "grace": False, "data_center": True,
     "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    {"model": "maxwell-consumer", "match": r"\bgtx 9\d0\b|\bgtx 750\b", "architecture": "maxwell", "grace": False,
     "data_center": False, "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    {"model": "k80", "match": r"\bk80\b", "architecture": "kepler", "grace": False, "data_center": True,
     "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    {"model": "k40", "match": r"\bk40\b", "architecture": "kepler", "grace": False, "data_center": True,
     "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    {"model": "k20", "match": r"\bk20[xm]?\b", "architecture": "kepler", "grace": False, "data_center": True,
     "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    {"model": "k10", "match": r"\bk10\b", "architecture": "kepler", "grace": False, "data_center": True,
     "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
    {"model": "kepler-consumer", "match": r"\bgtx 7\d0\b", "architecture": "kepler", "grace": False,
     "data_center": False, "mig": False, "source": _CUDA_GPUS, "checked": "2026-11-22"},
)
# fmt: on
