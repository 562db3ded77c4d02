# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""NVIDIA data-center driver branches (type, end of life) and the kernel-module
flavour rules (which architectures run the open or the proprietary modules).

`status` follows the collection's convention: "V" verified in an NVIDIA
document or repository, "S" secondary (a third party repeats it), "U" not
verified. Only V and S rows may fail a run; U rows only ever warn.
"""

from __future__ import annotations

_LIFECYCLE = "https://docs.nvidia.com/datacenter/tesla/drivers/"
_V580 = "https://docs.nvidia.com/datacenter/tesla/drivers/supported-drivers-and-cuda-toolkit-versions.html"
_V615 = "https://docs.nvidia.com/datacenter/tesla/drivers/615/supported-drivers-and-cuda-toolkit-versions.html"
_V620 = "https://docs.nvidia.com/datacenter/tesla/drivers/620/supported-drivers-and-cuda-toolkit-versions.html"
_BULLETIN_5861 = "NVIDIA/product-security@08d1a287:2026/5861/5861.md"
_FORUM = "secondary: https://forums.developer.nvidia.com/t/current-graphics-driver-releases/28500/12"
_PDF_2021 = "https://docs.nvidia.com/datacenter/tesla/pdf/NVIDIA_CUDA_Drivers_Support.pdf"
_AKS = "secondary: Azure/aks-gpu#113"
_KERNEL_MODULES = "https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/kernel-modules.html"
# NVIDIA's own deprecation schedule (posted by NVIDIA on its forum): from R560
# "it will be recommended to use the open flavor of NVIDIA Linux Kernel Modules
# wherever possible (Turing or later GPUs, or Ada or later when using GPU
# virtualization)".
_VIRTUALIZATION = "https://forums.developer.nvidia.com/t/unix-graphics-feature-deprecation-schedule/60588/1"
# The open modules' changelog adds "vGPU Host and vGPU Guest support" with the
# R550 release that SUSE's advisory names 550.54.14.
_OPEN_VGPU = (
    "NVIDIA/open-gpu-kernel-modules@015742d3:CHANGELOG.md (Release 550: 'Added vGPU Host and vGPU Guest support') ; "
    "secondary: SUSE-SU-2024:0770-1 (nvidia-open-driver-G06 update to 550.54.14, the same entry)"
)
_OPEN_BLOG = (
    "secondary: NVIDIA Technical Blog, 'NVIDIA transitions fully towards open-source GPU kernel modules' "
    "(R560, July 2024), as quoted by "
    "http://blockchainnewsuat.azurewebsites.net/news/nvidia-fully-adopts-open-source-gpu-kernel-modules-r560"
)

# The tables below keep one row a line, as their sources' tables read: ruff format would spread
# every row over many lines.
# fmt: off

# What each branch type means (support spans: NFB about a quarter, PB up to a
# year, LTSB about three years).
BRANCH_TYPES = (
    {"type": "NFB", "name": "New Feature Branch", "source": _LIFECYCLE + " ; " + _V620 + " (no end-of-life date)",
     "checked": "2026-11-25"},
    {"type": "PB", "name": "Production Branch", "source": _LIFECYCLE, "checked": "2026-11-22"},
    {"type": "LTSB", "name": "Long Term Support Branch",
     "source": _LIFECYCLE + " ; https://docs.nvidia.com/ai-enterprise/lifecycle/latest/infrastructure-software.html",
     "checked": "2026-11-22"},
    {"type": "Evaluation", "name": "evaluation branch", "source": _PDF_2021, "checked": "2026-11-22"},
)

# `eol`: "YYYY-MM" (support ends in that month), "ended" (listed as ended, no
# date), or None (not known: warns). New Feature Branches have no end-of-life
# date (v620 matrix); an NFB that NVIDIA no longer patches is "ended". Where two NVIDIA pages disagree the newer
# page wins (R580: v580 matrix Aug 2028, v615 matrix Jun 2028).
DRIVER_BRANCHES = (
    {"branch": "418", "type": "LTSB", "eol": "2022-03", "status": "V", "source": _PDF_2021, "checked": "2026-11-22"},
    {"branch": "440", "type": "NFB", "eol": "2020-11", "status": "V", "source": _PDF_2021, "checked": "2026-11-22"},
    {"branch": "450", "type": "LTSB", "eol": "2023-07", "status": "V", "source": _PDF_2021, "checked": "2026-11-22"},
    {"branch": "455", "type": "Evaluation", "eol": "ended", "status": "V", "source": _PDF_2021,
     "checked": "2026-11-22"},
    {"branch": "460", "type": "PB", "eol": "2022-01", "status": "V", "source": _PDF_2021, "checked": "2026-11-22"},
    {"branch": "465", "type": "NFB", "eol": "ended", "status": "V", "source": _V580 + " ; type " + _AKS,
     "checked": "2026-11-22"},
    {"branch": "470", "type": "LTSB", "eol": "ended", "status": "S",
     "note": "the last branch for Kepler; NVIDIA lists it as no longer maintained (no end-of-life date is published)",
     "source": _FORUM + " ; type " + _AKS, "checked": "2026-11-25"},
    {"branch": "495", "type": "NFB", "eol": "ended", "status": "V", "source": _V580 + " ; type " + _AKS,
     "checked": "2026-11-22"},
    {"branch": "510", "type": "PB", "eol": "ended", "status": "V", "source": _V580 + " ; type " + _AKS,
     "checked": "2026-11-22"},
    {"branch": "515", "type": "PB", "eol": "ended", "status": "V", "source": _V580 + " ; type " + _AKS,
     "checked": "2026-11-22"},
    {"branch": "520", "type": "NFB", "eol": "ended", "status": "S", "source": _AKS, "checked": "2026-11-22"},
    {"branch": "525", "type": "PB", "eol": "ended", "status": "V", "source": _V580 + " ; type " + _AKS,
     "checked": "2026-11-22"},
    {"branch": "535", "type": "LTSB", "eol": "2026-06", "status": "V", "source": _V615 + " ; " + _V580,
     "checked": "2026-11-25"},
    {"branch": "550", "type": "PB", "eol": "ended", "status": "V", "source": _V580 + " ; type " + _AKS,
     "checked": "2026-11-22"},
    {"branch": "560", "type": "NFB", "eol": "ended", "status": "V", "source": _V580 + " ; type " + _AKS,
     "checked": "2026-11-22"},
    {"branch": "565", "type": "NFB", "eol": "ended", "status": "V", "source": _V580 + " ; type " + _AKS,
     "checked": "2026-11-22"},
    {"branch": "570", "type": "PB", "eol": "2026-02", "status": "V", "source": _V580, "checked": "2026-11-25"},
    {"branch": "575", "type": "NFB", "eol": "ended", "status": "V", "source": _V580, "checked": "2026-11-22"},
    {"branch": "580", "type": "LTSB", "eol": "2028-06", "status": "V", "source": _V620 + " ; " + _V615,
     "checked": "2026-11-25"},
    {"branch": "590", "type": "NFB", "eol": "ended", "status": "S",
     "note": "a New Feature Branch: no end-of-life date; the security bulletins after January 2026 no longer list it",
     "source": _FORUM + " ; NVIDIA/product-security:2026/5747/5747.md vs 2026/5821/5821.md", "checked": "2026-11-25"},
    {"branch": "595", "type": "PB", "eol": "2027-03", "status": "V", "source": _V620 + " ; " + _V615,
     "checked": "2026-11-25"},
    {"branch": "610", "type": "NFB", "eol": "2026-08", "status": "V", "source": _V615, "checked": "2026-11-25"},
    {"branch": "615", "type": "NFB", "eol": None, "status": "S",
     "note": "a New Feature Branch: NVIDIA publishes no end-of-life date for these short-lived branches",
     "source": _BULLETIN_5861 + " (Tesla Linux R615 615.71.09) ; type: absent from " + _V620
               + ", which lists only LTSB and PB", "checked": "2026-11-25"},
    {"branch": "620", "type": "LTSB", "eol": "2029-09", "status": "V", "source": _V620, "checked": "2026-11-25"},
)

# Kernel-module flavours each architecture runs, the preferred one first. A
# row with "grace": True applies to the GPUs of a Grace superchip of that
# architecture and wins over the plain row (Grace Hopper runs only the open
# modules); a row with "vgpu": True applies to the vGPUs of a vGPU guest and
# wins over the plain row (before Ada, GPU virtualization runs only the
# proprietary modules). The one rule that applies these rows and OPEN_MODULES_FIRST_BRANCH
# (auto: open where every GPU runs it and the branch ships it, else
# proprietary) is matrix.versions.kernel_module_flavour; the driver role,
# preflight and verify all ask it.
KERNEL_MODULE_FLAVOURS = (
    {"architecture": "kepler", "flavours": ("proprietary",), "source": _KERNEL_MODULES, "checked": "2026-11-22"},
    {"architecture": "maxwell", "flavours": ("proprietary",), "source": _KERNEL_MODULES, "checked": "2026-11-22"},
    {"architecture": "pascal", "flavours": ("proprietary",), "source": _KERNEL_MODULES, "checked": "2026-11-22"},
    {"architecture": "volta", "flavours": ("proprietary",), "source": _KERNEL_MODULES, "checked": "2026-11-22"},
    {"architecture": "turing", "vgpu": True, "flavours": ("proprietary",), "source": _VIRTUALIZATION,
     "checked": "2026-11-29"},
    {"architecture": "turing", "flavours": ("open", "proprietary"), "source": _KERNEL_MODULES,
     "checked": "2026-11-22"},
    {"architecture": "ampere", "vgpu": True, "flavours": ("proprietary",), "source": _VIRTUALIZATION,
     "checked": "2026-11-29"},
    {"architecture": "ampere", "flavours": ("open", "proprietary"), "source": _KERNEL_MODULES,
     "checked": "2026-11-22"},
    {"architecture": "ada", "flavours": ("open", "proprietary"), "source": _KERNEL_MODULES, "checked": "2026-11-22"},
    {"architecture": "hopper", "grace": True, "flavours": ("open",), "source": _OPEN_BLOG, "checked": "2026-11-22"},
    {"architecture": "hopper", "flavours": ("open", "proprietary"), "source": _KERNEL_MODULES,
     "checked": "2026-11-22"},
    {"architecture": "blackwell", "flavours": ("open",), "source": _OPEN_BLOG, "checked": "2026-11-22"},
    {"architecture": "rubin", "flavours": ("open",), "source": _OPEN_BLOG, "checked": "2026-11-22"},
)

# Open kernel modules ship from the 515 series on; from 560 they are the
# default and suggested flavour.
OPEN_MODULES_FIRST_BRANCH = {"value": "515", "source": _KERNEL_MODULES, "checked": "2026-11-22"}
OPEN_MODULES_DEFAULT_BRANCH = {"value": "560", "source": _KERNEL_MODULES, "checked": "2026-11-22"}
# In a vGPU guest the open modules drive the vGPUs from the 550 series on.
OPEN_MODULES_VGPU_FIRST_BRANCH = {"value": "550", "source": _OPEN_VGPU, "checked": "2026-11-29"}

# Fabric Manager on NVLink5 systems (DGX/HGX B100, B200, B300 and later) needs NVLSM, the NVLink subnet manager,
# and NVLSM talks to the NVSwitches through InfiniBand management datagrams: the fabric manager's start script
# refuses to start without ib_umad, and the NVSwitch management ports are mlx5 InfiniBand devices (mlx5_ib).
# Without them the GPUs stay "In Progress" and CUDA answers CUDA_ERROR_SYSTEM_NOT_READY.
NVLSM = {
    "value": {"architectures": ["blackwell"], "kernel_modules": ["ib_umad", "mlx5_ib"]},
    "source": "https://github.com/siderolabs/extensions/pull/717 (quotes NVIDIA's Fabric Manager user guide); "
              "https://github.com/spectrocloud/CanvOS/pull/700 (nvidia-fabricmanager-start.sh: ib_umad not loaded); "
              "https://github.com/siderolabs/docs/pull/581 (nvlsm umad_init); "
              "https://github.com/siderolabs/extensions/issues/893 (NVSwitch ports mlx5_8..11); "
              "https://github.com/NVIDIA/gpu-operator/issues/2781 (Ubuntu: the modules are in linux-modules-extra)",
    "checked": "2026-11-30",
}

# The oldest kernel the driver's modules support. The open modules' README gives the range of both flavours ("the
# same range of Linux kernel versions that are supported with the proprietary NVIDIA kernel modules"). Read in
# the 560.31.02 release; older branches are not judged here (their READMEs were not read). A kernel roll refuses
# a kernel older than this before any node is touched.
KERNEL_MINIMUM = {
    "value": {"first_branch": "560", "release": "4.15"},
    "source": "NVIDIA/open-gpu-kernel-modules@560.31.02:README.md (Supported Linux Kernel Versions: "
              "'This is currently Linux kernel 4.15 or newer')",
    "checked": "2026-12-01",
}

# Each kernel the node can boot (its image in /boot; rescue images are not kernels to boot into) and the version of
# the NVIDIA module its module index holds, a tab between: verify's read of what a reboot would load. NVIDIA's
# packages install the module as nvidia, Debian's DKMS packages as nvidia-current (the driver role's
# driver_info asks for both, in this order). modinfo -k reads a kernel's index without loading anything.
KERNEL_MODULE_LISTING = {
    "value": ["sh", "-c",
              'for image in /boot/vmlinuz-*; do [ -e "$image" ] || continue; release=${image#/boot/vmlinuz-}; '
              'case "$release" in *rescue*) continue;; esac; '
              'version=$(modinfo -k "$release" -F version nvidia 2>/dev/null || modinfo -k "$release" -F version nvidia-current 2>/dev/null); '
              'printf "%s\\t%s\\n" "$release" "$(printf "%s" "$version" | head -n 1)"; done'],
    "source": "https://packages.debian.org/bookworm/nvidia-kernel-dkms (the 535.261.03-1 package, read from its .deb: "
              "/usr/src/nvidia-current-535.261.03/dkms.conf has PACKAGE_NAME=nvidia-current, BUILT_MODULE_NAME[0]=nvidia, "
              "DEST_MODULE_NAME[0]=$PACKAGE_NAME); https://man7.org/linux/man-pages/man8/modinfo.8.html (-k, -F)",
    "checked": "2026-12-01",
}

# NVIDIA's GPU display driver security bulletins: the data-center ("Tesla")
# Linux release of each branch that carries the bulletin's fixes. A branch a
# bulletin no longer lists is past its support (branch_lifecycle says so).
# Bulletins after 2026-09-30 were not read.
_PSIRT = "NVIDIA/product-security@"
DRIVER_SECURITY_BULLETINS = (
    {"bulletin": "5703", "published": "2025-10",
     "fixed": {"535": "535.274.02", "570": "570.195.03", "580": "580.95.05"},
     "source": _PSIRT + "dbb4ada0:2025/5703/5703.md", "checked": "2026-11-25"},
    {"bulletin": "5747", "published": "2026-01-28",
     "fixed": {"535": "535.288.01", "570": "570.211.01", "580": "580.126.09", "590": "590.48.01"},
     "source": _PSIRT + "dbb4ada0:2026/5747/5747.md", "checked": "2026-11-25"},
    {"bulletin": "5821", "published": "2026-05-19",
     "fixed": {"535": "535.309.01", "580": "580.159.03", "595": "595.71.05"},
     "source": _PSIRT + "dbb4ada0:2026/5821/5821.md", "checked": "2026-11-25"},
    {"bulletin": "5861", "published": "2026-09-30",
     "fixed": {"580": "580.178.04", "595": "595.91.07", "610": "610.57.04", "615": "615.71.09"},
     "source": _PSIRT + "08d1a287:2026/5861/5861.md", "checked": "2026-11-25"},
)
# fmt: on
