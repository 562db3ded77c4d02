# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The version matrix: which driver, CUDA, GPU, toolkit, engine and crictl
versions fit together, as data plus the comparison logic.

Shared by the ``version_matrix`` module (runs on the target: Python 3.8+,
standard library only) and the controller-side filters.

Every table below names its source. The reference collected for this
collection (``version-matrix.md``) tags each fact [V] verified (an NVIDIA
document or repository), [S] secondary (a third party repeats it) or [U]
unverified. [V] and [S] facts are encoded as rules that can fail a run; [U]
facts only ever produce warnings (and say so), or are left out. Where a
table leaves one out, a comment says which and why.

Users extend the tables without editing the collection: ``Matrix(tables=...)``
merges extra rows (CUDA releases, driver branches, GPU models), and
``custom_rules`` adds declarative rules (see ``CustomRule``).
"""

from __future__ import annotations

import calendar
import datetime
import re
import typing as t

# =============================================================================
# Tables
# =============================================================================

# -- 1b. CUDA toolkit release -> minimum Linux x86_64 driver ------------------
# Source: CUDA Toolkit Release Notes, "CUDA Toolkit and Corresponding Driver
# Versions" (Table 3), 13.1 edition [V]
# https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html
# Rows after 13.1 GA: 13.1 Update 1 [V] (conda cuda-compat 13.1.1 ->
# cuda-compat-impl 590.48.01); 13.2 GA / Update 1 [S] (secondary notes);
# 13.3 [S] (secondary notes, matching cuda_compat 610.43.02 in NVIDIA's
# redistrib_13.3.0.json [V]). Left out as [U]: 13.2 Update 2 and 13.3
# Update 1 (their drivers were not found); a request for them gets a warning
# and the newest known floor of that minor release.
# Versions are the CUDA release numbers: "Update N" of 12.4 is 12.4.N; 11.0,
# 11.2 and 11.3 number their GA and updates explicitly.
CUDA_TOOLKIT_DRIVERS: tuple[tuple[str, str, str], ...] = (
    # (CUDA release, label, minimum driver)
    ("13.3.0", "GA", "610.43.02"),
    ("13.2.1", "Update 1", "595.58.03"),
    ("13.2.0", "GA", "595.45.04"),
    ("13.1.1", "Update 1", "590.48.01"),
    ("13.1.0", "GA", "590.44.01"),
    ("13.0.2", "Update 2", "580.95.05"),
    ("13.0.1", "Update 1", "580.82.07"),
    ("13.0.0", "GA", "580.65.06"),
    ("12.9.1", "Update 1", "575.57.08"),
    ("12.9.0", "GA", "575.51.03"),
    ("12.8.1", "Update 1", "570.124.06"),
    ("12.8.0", "GA", "570.26"),
    ("12.6.3", "Update 3", "560.35.05"),
    ("12.6.2", "Update 2", "560.35.03"),
    ("12.6.1", "Update 1", "560.35.03"),
    ("12.6.0", "GA", "560.28.03"),
    ("12.5.1", "Update 1", "555.42.06"),
    ("12.5.0", "GA", "555.42.02"),
    ("12.4.1", "Update 1", "550.54.15"),
    ("12.4.0", "GA", "550.54.14"),
    ("12.3.1", "Update 1", "545.23.08"),
    ("12.3.0", "GA", "545.23.06"),
    ("12.2.2", "Update 2", "535.104.05"),
    ("12.2.1", "Update 1", "535.86.09"),
    ("12.2.0", "GA", "535.54.03"),
    ("12.1.1", "Update 1", "530.30.02"),
    ("12.1.0", "GA", "530.30.02"),
    ("12.0.1", "Update 1", "525.85.12"),
    ("12.0.0", "GA", "525.60.13"),
    ("11.8.0", "GA", "520.61.05"),
    ("11.7.1", "Update 1", "515.48.07"),
    ("11.7.0", "GA", "515.43.04"),
    ("11.6.2", "Update 2", "510.47.03"),
    ("11.6.1", "Update 1", "510.47.03"),
    ("11.6.0", "GA", "510.39.01"),
    ("11.5.2", "Update 2", "495.29.05"),
    ("11.5.1", "Update 1", "495.29.05"),
    ("11.5.0", "GA", "495.29.05"),
    ("11.4.4", "Update 4", "470.82.01"),
    ("11.4.3", "Update 3", "470.82.01"),
    ("11.4.2", "Update 2", "470.57.02"),
    ("11.4.1", "Update 1", "470.57.02"),
    ("11.4.0", "GA", "470.42.01"),
    ("11.3.1", "Update 1", "465.19.01"),
    ("11.3.0", "GA", "465.19.01"),
    ("11.2.2", "Update 2", "460.32.03"),
    ("11.2.1", "Update 1", "460.32.03"),
    ("11.2.0", "GA", "460.27.03"),
    ("11.1.1", "Update 1", "455.32"),
    ("11.1.0", "GA", "455.23"),
    ("11.0.3", "Update 1", "450.51.06"),
    ("11.0.2", "GA", "450.51.05"),
    ("11.0.1", "RC", "450.36.06"),
)

# -- 1a. Minor-version-compatibility floor per CUDA major -----------------------
# Source: CUDA Compatibility, "Minor Version Compatibility" [V]
# https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html
# 13.x >= 580 and 11.1-11.8 >= 450.80.02 are [V]. For 12.x the page says
# >= 525; the exact 525.60.13 is [S] (12.8U1 notes as quoted) and is also the
# 12.0 GA driver of table 1b, so the stricter value costs nothing. 11.0 had no
# minor version compatibility: it needs its table 1b row.
# Between the floor and the release's own driver a toolkit runs "with limited
# feature-set" (same page): a warning, not an error.
CUDA_MVC_FLOORS: dict[int, str] = {
    13: "580",
    12: "525.60.13",
    11: "450.80.02",
}
CUDA_MVC_FIRST_MINOR: dict[int, int] = {11: 1}  # 11.0 predates minor version compatibility

# -- 2b. Driver branches: type and end of life ---------------------------------
# Sources: NVIDIA Data Center Driver lifecycle and the support matrices [V]
# (https://docs.nvidia.com/datacenter/tesla/drivers/ ,
# .../supported-drivers-and-cuda-toolkit-versions.html (v580 edition) and
# .../drivers/615/... (v615 edition)); NVIDIA_CUDA_Drivers_Support.pdf (2021) [V]
# for R418-R460; branch types of R465-R575 from Azure/aks-gpu#113 [S].
# `eol`: "YYYY-MM" (support ends in that month), "ended" (listed as EOL by the
# v580 matrix, no date), or None (not known: [U], warns).
# R580: the v580 matrix says Aug 2028, the newer v615 matrix Jun 2028; the
# newer value is used. R470 [U] and R590 [U]: their end of life was not read,
# so they get a warning that says so, never an error.
# R530, R545 and R555 appear in table 1b but in no lifecycle table: unknown
# branches warn that the branch is not in the table.
DRIVER_BRANCHES: dict[str, dict[str, t.Any]] = {
    "418": {"type": "LTSB", "eol": "2022-03"},
    "440": {"type": "NFB", "eol": "2020-11"},
    "450": {"type": "LTSB", "eol": "2023-07"},
    "455": {"type": "Evaluation", "eol": "ended"},
    "460": {"type": "PB", "eol": "2022-01"},
    "465": {"type": "NFB", "eol": "ended"},
    "470": {"type": "LTSB", "eol": None,
            "note": "the last branch for Kepler, which NVIDIA no longer maintains; its end-of-life date was not read"},
    "495": {"type": "NFB", "eol": "ended"},
    "510": {"type": "PB", "eol": "ended"},
    "515": {"type": "PB", "eol": "ended"},
    "520": {"type": "NFB", "eol": "ended"},
    "525": {"type": "PB", "eol": "ended"},
    "535": {"type": "LTSB", "eol": "2026-06"},
    "550": {"type": "PB", "eol": "ended"},
    "560": {"type": "NFB", "eol": "ended"},
    "565": {"type": "NFB", "eol": "ended"},
    "570": {"type": "PB", "eol": "2026-02"},
    "575": {"type": "NFB", "eol": "ended"},
    "580": {"type": "LTSB", "eol": "2028-06"},
    "590": {"type": "NFB", "eol": None,
            "note": "the v615 support matrix no longer lists it, so it is presumably past end of life"},
    "595": {"type": "PB", "eol": "2027-03"},
    "610": {"type": "NFB", "eol": "2026-08"},
}
# Support spans: NFB about a quarter, PB up to a year, LTSB about three years
# (NVIDIA driver lifecycle [V]; three years for LTSB per NVIDIA AI Enterprise's
# lifecycle page).
BRANCH_TYPES = {
    "NFB": "New Feature Branch",
    "PB": "Production Branch",
    "LTSB": "Long Term Support Branch",
    "Evaluation": "evaluation branch",
}

# -- 2c. GPU architecture <-> CUDA and driver support ----------------------------
# Source: CUDA Toolkit, Driver and Architecture Matrix [V]
# https://docs.nvidia.com/datacenter/tesla/drivers/cuda-toolkit-driver-and-architecture-matrix.html
# Ordered oldest -> newest (rules compare positions). `first_cuda`: the first
# toolkit for the architecture; its table 1b driver is the architecture's
# first driver (Blackwell 12.8 -> 570.26, Hopper/Ada 11.8 -> 520.61.05,
# Ampere 11.0 GA -> 450.51.05); Turing and older predate table 1b.
# `last_branch`: the last driver branch that supports it.
# Rubin is NVML architecture 13 (nvml.h [V]); the matrix page does not list
# it yet, so it carries no driver rule.
ARCHITECTURES: tuple[tuple[str, str | None, str | None], ...] = (
    # (name, first CUDA, last driver branch)
    ("kepler", "6.0", "470"),
    ("maxwell", "6.5", "580"),
    ("pascal", "8.0", "580"),
    ("volta", "9.0", "580"),
    ("turing", "10.0", None),
    ("ampere", "11.0", None),
    ("ada", "11.8", None),
    ("hopper", "11.8", None),
    ("blackwell", "12.8", None),
    ("rubin", None, None),
)
ARCHITECTURE_NAMES = tuple(row[0] for row in ARCHITECTURES)

# -- 2d. Kernel module flavours -----------------------------------------------------
# Source: NVIDIA Driver Installation Guide, "Kernel Modules" [V]
# https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/kernel-modules.html
# Open modules ship since the 515 series and run on Turing and newer only;
# Maxwell, Pascal and Volta need the proprietary modules (Kepler ended with
# R470, before open modules existed). From R560 open is the default.
# Open modules are mandatory on Grace Hopper and Blackwell: NVIDIA Technical
# Blog, "NVIDIA transitions fully towards open-source GPU kernel modules" [S].
OPEN_MODULES_FIRST_BRANCH = "515"
OPEN_MODULES_DEFAULT_BRANCH = "560"
OPEN_MODULES_FIRST_ARCHITECTURE = "turing"
OPEN_MODULES_REQUIRED_FROM_ARCHITECTURE = "blackwell"

# -- GPU models: product name -> architecture, Grace, MIG ----------------------------
# A GPU read through NVML reports its architecture itself; this table is for
# GPUs declared by model (driver_gpu_models: an image bake or a node whose
# driver is not loaded yet) and for the per-model MIG facts.
# Sources: architectures and MIG data of the MIG-capable models from
# mig-profiles.yaml / the MIG user guide "Supported GPUs" page [V]; MIG
# minimum drivers from the MIG user guide (620) "Deployment Considerations" [V];
# the architectures of the other products are NVIDIA's product naming (each
# generation's letter) and match the simulator fixtures' NVML values.
# `mig`: True = MIG-capable per the Supported GPUs page [V]; False = not on
# that page; None = not known (variants such as A800/H800 that the page does
# not list: no MIG rule fires for them). `mig_min_driver`: None where the
# guide gives none (GH200). `mig_units`: placement units of the memory-slice
# grid (mig-profiles.yaml); None where not verified.
# Patterns match the lower-cased product name with punctuation turned into
# spaces ("NVIDIA A100-SXM4-40GB" -> "nvidia a100 sxm4 40gb"); first match wins.
GPU_MODELS: tuple[dict[str, t.Any], ...] = (
    {"model": "gb300", "match": r"\bgb300\b", "architecture": "blackwell", "grace": True,
     "mig": True, "mig_min_driver": "595.58.03", "mig_units": None},
    {"model": "gb200", "match": r"\bgb200\b", "architecture": "blackwell", "grace": True,
     "mig": True, "mig_min_driver": "570.133.20", "mig_units": 8},
    {"model": "b300", "match": r"\bb300\b", "architecture": "blackwell", "grace": False,
     "mig": True, "mig_min_driver": "580.82.07", "mig_units": None},
    {"model": "b200", "match": r"\bb200\b", "architecture": "blackwell", "grace": False,
     "mig": True, "mig_min_driver": "570.133.20", "mig_units": 8},
    {"model": "b100", "match": r"\bb100\b", "architecture": "blackwell", "grace": False,
     "mig": None, "mig_min_driver": None, "mig_units": None},
    {"model": "rtx-pro-6000-blackwell", "match": r"\brtx pro 6000\b", "architecture": "blackwell", "grace": False,
     "mig": True, "mig_min_driver": "575.51.03", "mig_units": 12},
    {"model": "rtx-pro-5000-blackwell", "match": r"\brtx pro 5000\b", "architecture": "blackwell", "grace": False,
     "mig": True, "mig_min_driver": "575.57.08", "mig_units": None},
    {"model": "rtx-pro-4500-blackwell", "match": r"\brtx pro 4500\b", "architecture": "blackwell", "grace": False,
     "mig": True, "mig_min_driver": "575.64", "mig_units": None},
    {"model": "gh200", "match": r"\bgh200\b", "architecture": "hopper", "grace": True,
     "mig": True, "mig_min_driver": None, "mig_units": 8},
    {"model": "h200", "match": r"\bh200\b", "architecture": "hopper", "grace": False,
     "mig": True, "mig_min_driver": "550.90.07", "mig_units": 8},
    {"model": "h100", "match": r"\bh100\b", "architecture": "hopper", "grace": False,
     "mig": True, "mig_min_driver": "525.85.12", "mig_units": 8},
    {"model": "h800", "match": r"\bh800\b", "architecture": "hopper", "grace": False,
     "mig": None, "mig_min_driver": None, "mig_units": None},
    {"model": "h20", "match": r"\bh20\b", "architecture": "hopper", "grace": False,
     "mig": True, "mig_min_driver": "535.161.07", "mig_units": 8},
    {"model": "a100", "match": r"\ba100\b", "architecture": "ampere", "grace": False,
     "mig": True, "mig_min_driver": "450.80.02", "mig_units": 8},
    {"model": "a800", "match": r"\ba800\b", "architecture": "ampere", "grace": False,
     "mig": None, "mig_min_driver": None, "mig_units": None},
    {"model": "a30", "match": r"\ba30\b", "architecture": "ampere", "grace": False,
     "mig": True, "mig_min_driver": "460.73.01", "mig_units": 4},
    {"model": "a40", "match": r"\ba40\b", "architecture": "ampere", "grace": False, "mig": False},
    {"model": "a10", "match": r"\ba10g?\b", "architecture": "ampere", "grace": False, "mig": False},
    {"model": "a16", "match": r"\ba16\b", "architecture": "ampere", "grace": False, "mig": False},
    {"model": "a2", "match": r"\ba2\b", "architecture": "ampere", "grace": False, "mig": False},
    {"model": "rtx-a", "match": r"\brtx a\d+\b", "architecture": "ampere", "grace": False, "mig": False},
    {"model": "rtx-ada", "match": r"\brtx \d+ ada\b", "architecture": "ada", "grace": False, "mig": False},
    {"model": "l40s", "match": r"\bl40s\b", "architecture": "ada", "grace": False, "mig": False},
    {"model": "l40", "match": r"\bl40\b", "architecture": "ada", "grace": False, "mig": False},
    {"model": "l20", "match": r"\bl20\b", "architecture": "ada", "grace": False, "mig": False},
    {"model": "l4", "match": r"\bl4\b", "architecture": "ada", "grace": False, "mig": False},
    {"model": "t4", "match": r"\bt4\b", "architecture": "turing", "grace": False, "mig": False},
    {"model": "quadro-rtx", "match": r"\bquadro rtx \d+\b", "architecture": "turing", "grace": False, "mig": False},
    {"model": "v100", "match": r"\bv100\b", "architecture": "volta", "grace": False, "mig": False},
    {"model": "titan-v", "match": r"\btitan v\b", "architecture": "volta", "grace": False, "mig": False},
    {"model": "p100", "match": r"\bp100\b", "architecture": "pascal", "grace": False, "mig": False},
    {"model": "p40", "match": r"\bp40\b", "architecture": "pascal", "grace": False, "mig": False},
    {"model": "p6", "match": r"\bp6\b", "architecture": "pascal", "grace": False, "mig": False},
    {"model": "p4", "match": r"\bp4\b", "architecture": "pascal", "grace": False, "mig": False},
    {"model": "m60", "match": r"\bm60\b", "architecture": "maxwell", "grace": False, "mig": False},
    {"model": "m40", "match": r"\bm40\b", "architecture": "maxwell", "grace": False, "mig": False},
    {"model": "m10", "match": r"\bm10\b", "architecture": "maxwell", "grace": False, "mig": False},
    {"model": "m6", "match": r"\bm6\b", "architecture": "maxwell", "grace": False, "mig": False},
    {"model": "m4", "match": r"\bm4\b", "architecture": "maxwell", "grace": False, "mig": False},
    {"model": "k80", "match": r"\bk80\b", "architecture": "kepler", "grace": False, "mig": False},
    {"model": "k40", "match": r"\bk40\b", "architecture": "kepler", "grace": False, "mig": False},
    {"model": "k20", "match": r"\bk20[xm]?\b", "architecture": "kepler", "grace": False, "mig": False},
    {"model": "k10", "match": r"\bk10\b", "architecture": "kepler", "grace": False, "mig": False},
)

# -- 3a. NVIDIA Container Toolkit features by version -----------------------------
# Source: NVIDIA/nvidia-container-toolkit CHANGELOG.md of each tag [V] (the
# tags named); deployments/systemd for the refresh units [V].
CTK_FEATURES: tuple[tuple[str, str, str], ...] = (
    # (feature, first version, what it is)
    ("cdi_generate", "1.12.0", "`nvidia-ctk cdi generate` writes CDI specifications"),
    ("cdi_mig_devices", "1.13.0", "MIG devices are included in generated CDI specifications"),
    ("runtime_configure_containerd", "1.14.0", "`nvidia-ctk runtime configure` edits containerd's config"),
    ("docker_cdi", "1.15.0", "`nvidia-ctk runtime configure --enable-cdi` for Docker (needs Docker >= 25)"),
    ("containerd_config_v3", "1.17.4", "containerd config version 3 (containerd 2.x)"),
    ("drop_in_configs", "1.18.0", "drop-in config files for containerd and CRI-O"),
    ("cdi_refresh_units", "1.18.0", "the nvidia-cdi-refresh.service/.path units"),
    ("jit_cdi_default", "1.18.0", "the nvidia runtime defaults to jit-cdi mode"),
    ("cdi_device_id", "1.19.0", "`nvidia-ctk cdi generate --device-id`"),
)

# -- 3c. Container engines: CDI support by version ----------------------------------
# Sources: cncf-tags/container-device-interface README [V]; containerd
# PR #9621 / #10926 (CDI on by default in 2.0) [V] and #9666 (no default on
# 1.7) [V]; moby/moby#49963 via cncf-tags/container-device-interface#277 and
# docker/docs#22660 (Docker 28.2 on by default) [V]; cncf-tags/container-
# device-interface#84 (Docker 25 opt-in) [V]. containerd 1.6 silently drops
# `enable_cdi` (seen in `containerd config dump` of Debian 12's 1.6.20).
# CRI-O enables CDI by default (README [V]); its first release with CDI
# (probably 1.24) is [U]: older versions only warn.
ENGINE_CDI: dict[str, tuple[tuple[str, str], ...]] = {
    # engine: ((first version, CDI support from that version on), ...), ascending
    "containerd": (("0", "none"), ("1.7.0", "opt_in"), ("2.0.0", "default")),
    "docker": (("0", "none"), ("25.0.0", "opt_in"), ("28.2.0", "default")),
    "crio": (("0", "unverified"), ("1.24.0", "default")),
}
ENGINES = tuple(ENGINE_CDI)

# -- 4. crictl <-> Kubernetes ----------------------------------------------------------
# Source: kubernetes-sigs/cri-tools README.md and RELEASE.md [V]: cri-tools
# minors follow Kubernetes minors ("use the same cri-tools and Kubernetes
# minor version"); Kubernetes >= 1.27 works with cri-tools >= 1.27, older
# Kubernetes minors only with their own cri-tools minor.
CRICTL_SHARED_FROM = (1, 27)

# -- Fabric Manager ---------------------------------------------------------------------
# Fabric Manager (and NVLSM on Blackwell NVSwitch systems) must run at exactly
# the driver's version; a mismatch fails Fabric Manager: NVIDIA/gpu-operator
# issues #544 and #2781 (B200) [S].

SOURCES: dict[str, str] = {
    "cuda_driver": "CUDA Toolkit Release Notes, Table 3; CUDA Minor Version Compatibility",
    "branch_lifecycle": "NVIDIA Data Center Driver lifecycle and support matrices (v580, v615)",
    "architecture_branch": "CUDA Toolkit, Driver and Architecture Matrix",
    "kernel_module": "NVIDIA Driver Installation Guide, Kernel Modules; NVIDIA blog on open GPU kernel modules (R560)",
    "mig_driver": "MIG User Guide (620), Deployment Considerations",
    "mig_supported": "MIG User Guide, Supported GPUs",
    "container_toolkit": "NVIDIA Container Toolkit CHANGELOG.md",
    "engine_cdi": "Container Device Interface README; containerd #9621/#9666; moby #49963",
    "crictl_skew": "kubernetes-sigs/cri-tools README.md, RELEASE.md",
    "fabricmanager": "NVIDIA/gpu-operator#544, #2781",
    "declaration": "gpufleet.nvidia team interfaces (role variables)",
    "gpu_model": "gpufleet.nvidia GPU model table",
}

SEVERITIES = ("info", "warning", "error")

# Every built-in rule, for `ignore_rules` and the docs.
RULES: dict[str, str] = {
    "declaration": "declared versions are well-formed and agree with each other",
    "gpu_model": "declared GPU models are known to the matrix",
    "cuda_driver": "the driver runs every CUDA version the fleet's images use",
    "branch_lifecycle": "the driver branch is supported (type and end of life)",
    "architecture_branch": "the driver branch supports every GPU architecture on the host",
    "kernel_module": "the kernel module flavour suits every GPU on the host",
    "mig_supported": "MIG is only declared for MIG-capable GPUs",
    "mig_driver": "the driver is new enough for MIG on each GPU model",
    "container_toolkit": "the Container Toolkit version has the features the node needs",
    "engine_cdi": "the container engine supports CDI the way it is declared",
    "crictl_skew": "crictl matches the cluster's Kubernetes minor",
    "fabricmanager": "Fabric Manager runs at exactly the driver's version",
}


class MatrixError(ValueError):
    """Bad input to the matrix (a malformed version, an invalid extra row or rule)."""


# =============================================================================
# Versions
# =============================================================================

_VERSION = re.compile(r"^v?(\d+(?:\.\d+)*)")
_EPOCH = re.compile(r"^\d+:")


class Version(tuple):
    """A parsed version: compares as a tuple of ints, prints as it was written.

    Driver releases are written zero-padded ("580.65.06"); a plain tuple would
    print them back as "580.65.6".
    """

    text: str

    def __new__(cls, parts: t.Iterable[int], text: str) -> "Version":
        version = super().__new__(cls, parts)
        version.text = text
        return version

    def __str__(self) -> str:
        return self.text


def parse_version(text: t.Any) -> Version:
    """Leading dotted numbers of a version, package version or tag.

    "550.54.14" -> (550, 54, 14); "v1.33.0" -> (1, 33, 0);
    "1:1.17.8-1" (Debian epoch, revision) -> (1, 17, 8);
    "1.7.24~ds1-6+deb13u1" -> (1, 7, 24); "5:28.3.0-1~debian.12" -> (28, 3, 0).
    """
    value = _EPOCH.sub("", str(text).strip())
    match = _VERSION.match(value)
    if not match:
        raise MatrixError("'{0}' is not a version".format(text))
    return Version((int(part) for part in match.group(1).split(".")), match.group(1))


_OPERATORS: dict[str, t.Callable[[t.Any, t.Any], bool]] = {
    ">=": lambda a, b: a >= b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    "<": lambda a, b: a < b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


def version_text(version: t.Sequence[int]) -> str:
    if isinstance(version, Version):
        return version.text
    return ".".join(str(part) for part in version)


def driver_branch(version: t.Any) -> str:
    """The branch of a driver version: "550.127.05" -> "550"."""
    return str(parse_version(version)[0])


def _month_end(year_month: str) -> datetime.date:
    year, month = (int(part) for part in year_month.split("-"))
    return datetime.date(year, month, calendar.monthrange(year, month)[1])


def _month_name(year_month: str) -> str:
    year, month = (int(part) for part in year_month.split("-"))
    return "{0} {1}".format(calendar.month_name[month], year)


# =============================================================================
# The driver being judged
# =============================================================================


class Driver:
    """A driver as declared (branch and/or exact version) or as loaded.

    A branch alone does not pin a release: comparisons against a release in
    the same branch return None ("cannot tell") instead of guessing.
    """

    def __init__(self, version: str | None = None, branch: str | None = None) -> None:
        self.version = parse_version(version) if version else None
        if branch:
            self.branch = parse_version(branch)[0]
        elif self.version:
            self.branch = self.version[0]
        else:
            raise MatrixError("a driver needs a version or a branch")

    def __str__(self) -> str:
        return version_text(self.version) if self.version else "R{0}".format(self.branch)

    @property
    def pinned(self) -> bool:
        return self.version is not None

    def at_least(self, minimum: str) -> bool | None:
        """driver >= minimum; None when a bare branch could go either way."""
        wanted = parse_version(minimum)
        if self.version is not None:
            return self.version >= wanted
        if self.branch != wanted[0]:
            return self.branch > wanted[0]
        # Every release of the branch satisfies a bare-branch minimum ("580").
        return True if len(wanted) == 1 else None

    def compare(self, operator: str, operand: str) -> bool | None:
        """`driver <operator> operand` on the operand's precision ("550" = the branch).

        None when a bare branch could go either way (R550 against 550.90.07).
        """
        right = parse_version(operand)
        if self.version is not None:
            return _OPERATORS[operator](self.version[:len(right)], right)
        if len(right) == 1 or self.branch != right[0]:
            return _OPERATORS[operator]((self.branch,), right[:1])
        return None


# =============================================================================
# GPUs
# =============================================================================


def _normalise_name(name: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9]+", " ", name.lower()).split())


class Gpu:
    """One GPU: from NVML facts (authoritative) or a declared model name."""

    def __init__(self, label: str, name: str, architecture: str, model: dict[str, t.Any] | None,
                 mig_capable: bool | None, pci_device_id: str | None = None, index: int | None = None) -> None:
        self.label = label
        self.name = name
        self.architecture = architecture
        self.model = model
        self.mig_capable = mig_capable
        self.pci_device_id = pci_device_id
        self.index = index

    @property
    def grace(self) -> bool:
        return bool(self.model and self.model.get("grace"))

    @property
    def model_key(self) -> str | None:
        return self.model["model"] if self.model else None

    def as_dict(self) -> dict[str, t.Any]:
        return {
            "label": self.label,
            "name": self.name,
            "architecture": self.architecture,
            "model": self.model_key,
            "grace": self.grace,
            "mig_capable": self.mig_capable,
        }


# =============================================================================
# Findings
# =============================================================================


def finding(rule: str, severity: str, subject: str, message: str, fix: str, layer: str,
            source: str | None = None) -> dict[str, str]:
    return {
        "rule": rule,
        "severity": severity,
        "layer": layer,
        "subject": subject,
        "message": message,
        "fix": fix,
        "source": source if source is not None else SOURCES.get(rule, ""),
    }


def worst(findings: t.Iterable[dict[str, t.Any]]) -> str | None:
    """The highest severity among findings, or None when there are none."""
    levels = [SEVERITIES.index(f["severity"]) for f in findings]
    return SEVERITIES[max(levels)] if levels else None


def fails(findings: t.Iterable[dict[str, t.Any]], fail_on: str) -> list[dict[str, t.Any]]:
    """The findings at or above `fail_on` (error | warning | never)."""
    if fail_on == "never":
        return []
    threshold = SEVERITIES.index(fail_on)
    return [f for f in findings if SEVERITIES.index(f["severity"]) >= threshold]


# =============================================================================
# The node as the rules see it
# =============================================================================


class NodeView:
    """Everything the rules judge, normalised from declarations and facts.

    Built by ``Matrix.view()``; each attribute is None when not declared or
    not known, and the rules that need it do not fire.
    """

    def __init__(self) -> None:
        self.target = "desired"
        self.driver: Driver | None = None
        self.driver_state = "present"
        self.kernel_module: str | None = None
        self.gpus: list[Gpu] = []
        self.gpu_source = "none"
        self.cuda_versions: list[str] = []
        self.toolkit: tuple[int, ...] | None = None
        self.engine: str | None = None
        self.engine_version: tuple[int, ...] | None = None
        self.cdi_wanted = False
        self.cdi_managed = False
        self.crictl: tuple[int, ...] | None = None
        self.kubernetes: tuple[int, ...] | None = None
        self.fabricmanager: tuple[int, ...] | None = None
        self.mig_label: str | None = None
        self.mig_config: dict[str, t.Any] | None = None

    def as_dict(self) -> dict[str, t.Any]:
        def text(version: tuple[int, ...] | None) -> str | None:
            return version_text(version) if version else None

        return {
            "target": self.target,
            "driver": str(self.driver) if self.driver else None,
            "driver_branch": str(self.driver.branch) if self.driver else None,
            "driver_state": self.driver_state,
            "kernel_module": self.kernel_module,
            "gpus": [gpu.as_dict() for gpu in self.gpus],
            "gpu_source": self.gpu_source,
            "cuda_versions": list(self.cuda_versions),
            "container_toolkit": text(self.toolkit),
            "engine": self.engine,
            "engine_version": text(self.engine_version),
            "cdi": self.cdi_wanted,
            "crictl": text(self.crictl),
            "kubernetes": text(self.kubernetes),
            "fabricmanager": text(self.fabricmanager),
            "mig_label": self.mig_label,
        }


# Package names whose versions the "installed" view reads (Debian/Ubuntu and
# RHEL spellings); a name ending in "*" is a prefix.
PACKAGE_NAMES: dict[str, tuple[str, ...]] = {
    "container_toolkit": ("nvidia-container-toolkit-base", "nvidia-container-toolkit"),
    "fabricmanager": ("nvidia-fabricmanager*", "nvidia-fabric-manager*", "cuda-drivers-fabricmanager*"),
    "containerd": ("containerd", "containerd.io"),
    "docker": ("docker-ce", "docker.io", "moby-engine", "docker"),
    "crio": ("cri-o",),
    "crictl": ("cri-tools",),
}


def package_version(packages: dict[str, t.Any] | None, names: t.Iterable[str]) -> str | None:
    """The version of the first installed package among `names` (package_facts shape)."""
    if not packages:
        return None
    for name in names:
        if name.endswith("*"):
            matches = sorted(key for key in packages if key.startswith(name[:-1]))
        else:
            matches = [name] if name in packages else []
        for match in matches:
            entries = packages[match]
            entry = entries[0] if isinstance(entries, list) and entries else entries
            if isinstance(entry, dict) and entry.get("version"):
                return str(entry["version"])
    return None


# =============================================================================
# Declarative custom rules
# =============================================================================

_CONDITION = re.compile(r"^\s*(>=|<=|==|!=|>|<)\s*(\S.*)$")

# Fields a custom rule can test; "per_item" fields hold several values (one
# per GPU, per CUDA version): `when` matches if any value matches, `require`
# needs every value to match.
CUSTOM_FIELDS: dict[str, str] = {
    "driver_version": "version",
    "driver_branch": "version",
    "kernel_module": "text",
    "gpu_model": "per_item",
    "gpu_architecture": "per_item",
    "cuda_version": "per_item_version",
    "container_toolkit_version": "version",
    "engine": "text",
    "engine_version": "version",
    "crictl_version": "version",
    "kubernetes_version": "version",
}


class CustomRule:
    """A user rule: `when` all conditions hold, every `require` must hold.

    ``{id, severity, message, fix, when: {field: cond}, require: {field: cond}}``
    where a condition is a value ("hopper"), a list of values (any of them) or,
    for versions, an operator and a version (">= 550.90.07"). A bare driver
    branch that cannot be decided against a release is reported, as a warning
    at most, rather than guessed.
    """

    def __init__(self, spec: t.Any) -> None:
        if not isinstance(spec, dict):
            raise MatrixError("custom rule {0!r}: expected a mapping".format(spec))
        self.id = str(spec.get("id") or "")
        if not re.match(r"^[A-Za-z0-9_.-]+$", self.id):
            raise MatrixError("custom rule {0!r}: `id` must be a word (letters, digits, _ . -)".format(spec))
        unknown = sorted(set(spec) - {"id", "severity", "message", "fix", "when", "require", "layer"})
        if unknown:
            raise MatrixError("custom rule {0}: unknown key(s) {1}".format(self.id, ", ".join(unknown)))
        self.severity = spec.get("severity", "error")
        if self.severity not in SEVERITIES:
            raise MatrixError("custom rule {0}: severity must be one of {1}".format(self.id, ", ".join(SEVERITIES)))
        self.message = str(spec.get("message") or "custom rule {0} is not met".format(self.id))
        self.fix = str(spec.get("fix") or "")
        self.layer = str(spec.get("layer") or "fleet")
        self.when = self._conditions(spec.get("when") or {}, "when")
        self.require = self._conditions(spec.get("require") or {}, "require")
        if not self.require:
            raise MatrixError("custom rule {0}: `require` needs at least one condition".format(self.id))

    def _conditions(self, conditions: t.Any, key: str) -> list[tuple[str, list[tuple[str, t.Any]]]]:
        if not isinstance(conditions, dict):
            raise MatrixError("custom rule {0}: `{1}` must be a mapping of field: condition".format(self.id, key))
        parsed = []
        for field, raw in conditions.items():
            if field not in CUSTOM_FIELDS:
                raise MatrixError("custom rule {0}: unknown field `{1}` in `{2}` (known: {3})".format(
                    self.id, field, key, ", ".join(sorted(CUSTOM_FIELDS))))
            values = raw if isinstance(raw, list) else [raw]
            alternatives = []
            for value in values:
                match = _CONDITION.match(str(value))
                operator, operand = (match.group(1), match.group(2).strip()) if match else ("==", str(value).strip())
                if "version" in CUSTOM_FIELDS[field]:
                    try:
                        parse_version(operand)
                    except MatrixError:
                        raise MatrixError("custom rule {0}: `{1}: {2}` is not a version condition".format(
                            self.id, field, value)) from None
                elif operator not in ("==", "!="):
                    raise MatrixError("custom rule {0}: `{1}` compares text; use a value or a list".format(
                        self.id, field))
                alternatives.append((operator, operand))
            parsed.append((field, alternatives))
        return parsed

    @staticmethod
    def _values(view: NodeView, field: str) -> list[t.Any] | None:
        """The view's values for a field (None: not known)."""
        if field == "driver_version":
            return [view.driver] if view.driver else None
        if field == "driver_branch":
            return [str(view.driver.branch)] if view.driver else None
        if field == "kernel_module":
            return [view.kernel_module] if view.kernel_module else None
        if field == "gpu_model":
            return [gpu.model_key or gpu.name for gpu in view.gpus] or None
        if field == "gpu_architecture":
            return [gpu.architecture for gpu in view.gpus] or None
        if field == "cuda_version":
            return list(view.cuda_versions) or None
        if field == "engine":
            return [view.engine] if view.engine else None
        versions = {
            "container_toolkit_version": view.toolkit,
            "engine_version": view.engine_version,
            "crictl_version": view.crictl,
            "kubernetes_version": view.kubernetes,
        }
        return [versions[field]] if versions.get(field) else None

    @staticmethod
    def _holds(field: str, value: t.Any, operator: str, operand: str) -> bool | None:
        if isinstance(value, Driver):
            return value.compare(operator, operand)
        if "version" in CUSTOM_FIELDS[field]:
            left = value if isinstance(value, tuple) else parse_version(value)
            right = parse_version(operand)
            # "1.33" means the whole minor: compare on the operand's precision.
            return _OPERATORS[operator](left[:len(right)], right)
        same = str(value).lower() == operand.lower()
        return same if operator == "==" else not same

    def _field_holds(self, view: NodeView, field: str, alternatives: list[tuple[str, t.Any]],
                     every: bool) -> bool | None:
        values = self._values(view, field)
        if values is None:
            return None
        results = []
        for value in values:
            outcomes = [self._holds(field, value, op, operand) for op, operand in alternatives]
            if True in outcomes:
                results.append(True)
            elif None in outcomes:
                results.append(None)
            else:
                results.append(False)
        if every:
            if False in results:
                return False
            return None if None in results else True
        if True in results:
            return True
        return None if None in results else False

    def evaluate(self, view: NodeView) -> list[dict[str, str]]:
        for field, alternatives in self.when:
            if self._field_holds(view, field, alternatives, every=False) is not True:
                return []
        found = []
        for field, alternatives in self.require:
            holds = self._field_holds(view, field, alternatives, every=True)
            wanted = " or ".join("{0} {1}".format(op, operand) for op, operand in alternatives)
            if holds is False:
                found.append(finding(
                    "custom:" + self.id, self.severity, field,
                    "{0} ({1} must be {2})".format(self.message, field, wanted),
                    self.fix, self.layer, "custom rule"))
            elif holds is None:
                found.append(finding(
                    "custom:" + self.id, "warning" if self.severity == "error" else self.severity, field,
                    "{0}: cannot tell whether {1} is {2} from what is declared".format(self.message, field, wanted),
                    self.fix or "declare {0} precisely (e.g. pin driver_version)".format(field),
                    self.layer, "custom rule"))
        return found


# =============================================================================
# The matrix
# =============================================================================


class Matrix:
    """The tables (built in, plus user rows) and the rules over them."""

    def __init__(self, tables: dict[str, t.Any] | None = None, custom_rules: t.Iterable[t.Any] = (),
                 today: datetime.date | None = None, eol_warning_days: int = 180,
                 ignore_rules: t.Iterable[str] = ()) -> None:
        tables = tables or {}
        unknown = sorted(set(tables) - {"cuda_drivers", "branches", "gpu_models"})
        if unknown:
            raise MatrixError("tables: unknown table(s) {0} (known: branches, cuda_drivers, gpu_models)".format(
                ", ".join(unknown)))
        self.cuda_drivers = self._cuda_rows(tables.get("cuda_drivers") or [])
        self.branches = self._branch_rows(tables.get("branches") or [])
        self.gpu_models = self._gpu_rows(tables.get("gpu_models") or [])
        self.custom_rules = [CustomRule(spec) for spec in custom_rules or []]
        self.today = today or datetime.date.today()
        self.eol_warning_days = int(eol_warning_days)
        self.ignore_rules = set(ignore_rules or [])

    # -- tables -------------------------------------------------------------------
    @staticmethod
    def _cuda_rows(extra: list[t.Any]) -> dict[tuple[int, ...], tuple[str, tuple[int, ...]]]:
        rows = {parse_version(cuda): (label, parse_version(driver)) for cuda, label, driver in CUDA_TOOLKIT_DRIVERS}
        for row in extra:
            if not isinstance(row, dict) or not row.get("cuda") or not row.get("driver"):
                raise MatrixError("tables.cuda_drivers: each row needs `cuda` and `driver`, got {0!r}".format(row))
            cuda = parse_version(row["cuda"])
            if len(cuda) < 2:
                raise MatrixError("tables.cuda_drivers: `cuda` must be major.minor[.patch], got {0!r}".format(
                    row["cuda"]))
            cuda = (cuda + (0,))[:3]
            rows[cuda] = (str(row.get("label") or ("GA" if cuda[2] == 0 else "Update {0}".format(cuda[2]))),
                          parse_version(row["driver"]))
        return rows

    @staticmethod
    def _branch_rows(extra: list[t.Any]) -> dict[str, dict[str, t.Any]]:
        rows = {branch: dict(info) for branch, info in DRIVER_BRANCHES.items()}
        for row in extra:
            if not isinstance(row, dict) or not row.get("branch"):
                raise MatrixError("tables.branches: each row needs `branch`, got {0!r}".format(row))
            eol = row.get("eol")
            if eol not in (None, "ended") and not re.match(r"^\d{4}-\d{2}$", str(eol)):
                raise MatrixError("tables.branches: `eol` of R{0} must be YYYY-MM, 'ended' or null".format(
                    row["branch"]))
            if row.get("type", "PB") not in BRANCH_TYPES:
                raise MatrixError("tables.branches: `type` of R{0} must be one of {1}".format(
                    row["branch"], ", ".join(BRANCH_TYPES)))
            rows[driver_branch(row["branch"])] = {"type": row.get("type", "PB"), "eol": eol, "note": row.get("note")}
        return rows

    @staticmethod
    def _gpu_rows(extra: list[t.Any]) -> tuple[dict[str, t.Any], ...]:
        rows = []
        for row in extra:
            if not isinstance(row, dict) or not row.get("model") or not row.get("architecture"):
                raise MatrixError("tables.gpu_models: each row needs `model` and `architecture`, got {0!r}".format(
                    row))
            if row["architecture"] not in ARCHITECTURE_NAMES:
                raise MatrixError("tables.gpu_models: architecture of {0} must be one of {1}".format(
                    row["model"], ", ".join(ARCHITECTURE_NAMES)))
            pattern = row.get("match") or r"\b{0}\b".format(re.escape(_normalise_name(str(row["model"]))))
            try:
                re.compile(pattern)
            except re.error as exc:
                raise MatrixError("tables.gpu_models: `match` of {0} is not a regular expression: {1}".format(
                    row["model"], exc)) from None
            merged = {"grace": False, "mig": None, "mig_min_driver": None, "mig_units": None}
            merged.update(row)
            merged["match"] = pattern
            rows.append(merged)
        # User rows first: they refine or replace built-in ones.
        return tuple(rows) + GPU_MODELS

    def model_for(self, name: str) -> dict[str, t.Any] | None:
        normalised = _normalise_name(name)
        for row in self.gpu_models:
            if re.search(row["match"], normalised):
                return row
        return None

    # -- lookups used by rules and filters --------------------------------------
    def cuda_release(self, cuda: str) -> tuple[tuple[int, ...], tuple[int, ...] | None, str]:
        """(requested release, its minimum driver or None, note) for a CUDA version.

        "12.4" is the GA release, "12.4.1" Update 1. A release newer than the
        newest known one of its minor gets the newest known floor and a note
        (the real minimum may be higher); an unknown minor gets None.
        """
        parts = parse_version(cuda)
        if len(parts) < 2:
            raise MatrixError("CUDA version '{0}' needs major.minor (e.g. 12.4)".format(cuda))
        same_minor = sorted(release for release in self.cuda_drivers if release[:2] == parts[:2])
        if not same_minor:
            return parts, None, "CUDA {0} is not in the matrix".format(version_text(parts[:2]))
        if len(parts) == 2:
            ga = [r for r in same_minor if self.cuda_drivers[r][0] == "GA"] or same_minor
            return ga[0], self.cuda_drivers[ga[0]][1], ""
        release = (parts + (0,))[:3]
        if release in self.cuda_drivers:
            return release, self.cuda_drivers[release][1], ""
        older = [r for r in same_minor if r < release]
        if not older:
            return release, self.cuda_drivers[same_minor[0]][1], ""
        note = ""
        if release > same_minor[-1]:
            note = "CUDA {0} is newer than the newest {1} release in the matrix ({2}); its driver floor may be higher".format(
                version_text(release), version_text(parts[:2]), version_text(same_minor[-1]))
        return release, self.cuda_drivers[older[-1]][1], note

    def min_driver(self, cuda: str, compat: str = "full") -> str | None:
        """Minimum driver for a CUDA version: full support, or `minor` (MVC floor)."""
        if compat == "minor":
            parts = parse_version(cuda)
            if len(parts) < 2:
                raise MatrixError("CUDA version '{0}' needs major.minor (e.g. 12.4)".format(cuda))
            floor = CUDA_MVC_FLOORS.get(parts[0])
            if floor and parts[1] >= CUDA_MVC_FIRST_MINOR.get(parts[0], 0):
                return floor
            return self.min_driver(cuda, "full")
        if compat != "full":
            raise MatrixError("compat must be 'full' or 'minor', got '{0}'".format(compat))
        driver = self.cuda_release(cuda)[1]
        return version_text(driver) if driver else None

    def max_cuda(self, driver: str) -> str | None:
        """The newest CUDA major.minor whose release driver the given driver satisfies."""
        version = parse_version(driver)
        satisfied = [release for release, (_label, minimum) in self.cuda_drivers.items() if version >= minimum]
        return version_text(max(satisfied)[:2]) if satisfied else None

    def branch_status(self, branch: str) -> dict[str, t.Any]:
        """Type and lifecycle of a branch as of `today`."""
        key = driver_branch(branch)
        info = self.branches.get(key)
        result: dict[str, t.Any] = {"branch": key, "type": None, "eol": None, "status": "unknown", "days_left": None,
                                    "note": None}
        if info is None:
            return result
        result.update(type=info["type"], eol=info["eol"], note=info.get("note"))
        eol = info["eol"]
        if eol == "ended":
            result["status"] = "eol"
        elif eol:
            end = _month_end(eol)
            days_left = (end - self.today).days
            result["days_left"] = days_left
            if days_left < 0:
                result["status"] = "eol"
            elif days_left <= self.eol_warning_days:
                result["status"] = "near_eol"
            else:
                result["status"] = "supported"
        return result

    @staticmethod
    def architecture_index(architecture: str) -> int:
        return ARCHITECTURE_NAMES.index(architecture)

    def architecture_support(self, architecture: str) -> tuple[str | None, str | None]:
        """(first driver, last branch) for an architecture; None where not bounded."""
        for name, first_cuda, last_branch in ARCHITECTURES:
            if name == architecture:
                first = None
                if first_cuda and parse_version(first_cuda) >= (11, 0):
                    first = self.min_driver(first_cuda)
                return first, last_branch
        raise MatrixError("unknown architecture '{0}' (known: {1})".format(architecture, ", ".join(ARCHITECTURE_NAMES)))

    def supports_architecture(self, driver: Driver, architecture: str) -> bool | None:
        first, last = self.architecture_support(architecture)
        if last is not None and driver.branch > int(last):
            return False
        if first is not None:
            return driver.at_least(first)
        return True

    @staticmethod
    def ctk_features(version: str) -> dict[str, bool]:
        current = parse_version(version)
        return {name: current >= parse_version(first) for name, first, _what in CTK_FEATURES}

    @staticmethod
    def engine_cdi(engine: str, version: tuple[int, ...]) -> str:
        if engine not in ENGINE_CDI:
            raise MatrixError("unknown container engine '{0}' (known: {1})".format(engine, ", ".join(ENGINES)))
        support = "none"
        for first, level in ENGINE_CDI[engine]:
            if version >= parse_version(first):
                support = level
        return support

    def kernel_module_for(self, gpus: t.Iterable[Gpu], requested: str = "auto") -> tuple[str | None, list[str]]:
        """(flavour, reasons): what `auto` resolves to, or why `requested` cannot work.

        Returns (None, reasons) when no flavour suits every GPU.
        """
        need_open, need_proprietary = [], []
        open_from = self.architecture_index(OPEN_MODULES_FIRST_ARCHITECTURE)
        required_from = self.architecture_index(OPEN_MODULES_REQUIRED_FROM_ARCHITECTURE)
        for gpu in gpus:
            if gpu.architecture not in ARCHITECTURE_NAMES:
                continue
            position = self.architecture_index(gpu.architecture)
            if position < open_from:
                need_proprietary.append("{0} ({1}) needs the proprietary modules".format(gpu.label, gpu.architecture))
            elif position >= required_from or gpu.grace:
                what = "Grace Hopper" if gpu.grace and position < required_from else gpu.architecture
                need_open.append("{0} ({1}) needs the open modules".format(gpu.label, what))
        if need_open and need_proprietary:
            return None, need_open + need_proprietary
        if requested == "open":
            return ("open", []) if not need_proprietary else (None, need_proprietary)
        if requested == "proprietary":
            return ("proprietary", []) if not need_open else (None, need_open)
        return ("proprietary" if need_proprietary else "open"), []

    # -- building the view --------------------------------------------------------
    def gpu_from_name(self, name: str, label: str) -> Gpu:
        text = str(name).strip()
        if text.lower() in ARCHITECTURE_NAMES:
            return Gpu(label, text, text.lower(), None, None)
        model = self.model_for(text)
        if model is None:
            return Gpu(label, text, "unknown", None, None)
        return Gpu(label, text, model["architecture"], model, model.get("mig"))

    def gpus_from_nvml(self, nvml: dict[str, t.Any]) -> list[Gpu]:
        gpus = []
        for fact in nvml.get("gpus") or []:
            name = fact.get("name") or "GPU {0}".format(fact.get("index"))
            model = self.model_for(name)
            architecture = fact.get("architecture") or "unknown"
            if architecture not in ARCHITECTURE_NAMES and model:
                architecture = model["architecture"]
            mig = fact.get("mig") or {}
            pci = fact.get("pci") or {}
            gpus.append(Gpu(
                "GPU {0} ({1})".format(fact.get("index"), name), name, architecture, model,
                bool(mig.get("capable")), pci.get("device_id"), fact.get("index")))
        return gpus

    def view(self, desired: dict[str, t.Any] | None = None, installed: dict[str, t.Any] | None = None,
             cuda_versions: t.Iterable[str] = (), target: str = "desired") -> tuple[NodeView, list[dict[str, str]]]:
        """Normalise declarations and facts; return the view and declaration findings."""
        desired = desired or {}
        installed = installed or {}
        nvml = installed.get("nvml") or {}
        packages = installed.get("packages") or {}
        versions = installed.get("versions") or {}
        view = NodeView()
        view.target = target
        found: list[dict[str, str]] = []

        def bad(subject: str, message: str, fix: str, layer: str) -> None:
            found.append(finding("declaration", "error", subject, message, fix, layer))

        def version_of(subject: str, value: t.Any, fix: str, layer: str) -> tuple[int, ...] | None:
            if value in (None, ""):
                return None
            try:
                return parse_version(value)
            except MatrixError:
                bad(subject, "{0} '{1}' is not a version".format(subject, value), fix, layer)
                return None

        # GPUs: NVML facts when a driver answers, else the declared models.
        if nvml.get("status") == "ok" and nvml.get("gpus"):
            view.gpus = self.gpus_from_nvml(nvml)
            view.gpu_source = "nvml"
        elif desired.get("driver_gpu_models"):
            view.gpus = [self.gpu_from_name(name, "declared GPU '{0}'".format(name))
                         for name in desired["driver_gpu_models"]]
            view.gpu_source = "declared"
        for gpu in view.gpus:
            if gpu.architecture == "unknown":
                found.append(finding(
                    "gpu_model", "warning", gpu.label,
                    "{0}: the matrix does not know this GPU's architecture, so no architecture rule checks it".format(
                        gpu.label),
                    "add it to the matrix tables (gpu_models: [{{model: ..., architecture: ...}}]) or name an "
                    "architecture ({0})".format(", ".join(ARCHITECTURE_NAMES)), "driver"))

        for cuda in cuda_versions or []:
            if not re.match(r"^\d+\.\d+(\.\d+)?$", str(cuda).strip()):
                bad("cuda_versions", "CUDA version '{0}' is not major.minor[.patch]".format(cuda),
                    "list the CUDA versions of your images like \"12.4\" or \"12.4.1\"", "driver")
            else:
                view.cuda_versions.append(str(cuda).strip())

        if target == "desired":
            self._desired_driver(view, desired, bad)
            view.toolkit = version_of("container_toolkit_version", desired.get("container_toolkit_version"),
                                      "set container_toolkit_version to a release such as \"1.17.8\"",
                                      "container_toolkit")
            view.crictl = version_of("crictl_version", desired.get("crictl_version"),
                                     "set crictl_version like \"v1.33.0\", or \"\" to derive it from "
                                     "crictl_kubernetes_version", "crictl")
        else:
            loaded = nvml.get("driver_version") if nvml.get("status") == "ok" else None
            loaded = loaded or versions.get("driver")
            if loaded:
                view.driver = Driver(version=loaded)
            view.driver_state = "present" if view.driver else "absent"
            view.kernel_module = versions.get("kernel_module") or None
            view.toolkit = version_of("container_toolkit", versions.get("container_toolkit") or package_version(
                packages, PACKAGE_NAMES["container_toolkit"]), "", "container_toolkit")
            view.crictl = version_of("crictl", versions.get("crictl") or package_version(
                packages, PACKAGE_NAMES["crictl"]), "", "crictl")
            view.fabricmanager = version_of("fabricmanager", versions.get("fabricmanager") or package_version(
                packages, PACKAGE_NAMES["fabricmanager"]), "", "driver")

        engine = desired.get("container_runtime_engine")
        if engine:
            if engine not in ENGINES:
                bad("container_runtime_engine", "container_runtime_engine '{0}' is not one of {1}".format(
                    engine, ", ".join(ENGINES)), "use containerd, docker or crio", "container_runtime")
            else:
                view.engine = engine
                view.engine_version = version_of(
                    engine, versions.get(engine) or package_version(packages, PACKAGE_NAMES[engine]),
                    "", "container_runtime")
        view.cdi_wanted = bool(desired.get("container_runtime_cdi"))
        view.cdi_managed = bool(desired.get("cdi_spec_dir"))

        kubernetes = desired.get("crictl_kubernetes_version")
        if kubernetes not in (None, ""):
            parts = version_of("crictl_kubernetes_version", kubernetes,
                               "set crictl_kubernetes_version to the cluster's minor, e.g. \"1.33\"", "crictl")
            if parts is not None:
                if len(parts) < 2 or parts[0] != 1:
                    bad("crictl_kubernetes_version",
                        "crictl_kubernetes_version '{0}' is not a Kubernetes 1.x minor".format(kubernetes),
                        "set crictl_kubernetes_version to the cluster's minor, e.g. \"1.33\"", "crictl")
                else:
                    view.kubernetes = parts[:2]

        if desired.get("mig_label"):
            view.mig_label = str(desired["mig_label"])
            config = desired.get("mig_config")
            view.mig_config = config if isinstance(config, dict) and config else None
        return view, found

    @staticmethod
    def _desired_driver(view: NodeView, desired: dict[str, t.Any], bad: t.Callable[..., None]) -> None:
        view.driver_state = desired.get("driver_state") or "present"
        if view.driver_state not in ("present", "absent"):
            bad("driver_state", "driver_state '{0}' is not present or absent".format(view.driver_state),
                "set driver_state to present or absent", "driver")
        module = desired.get("driver_kernel_module")
        if module:
            if module not in ("auto", "open", "proprietary"):
                bad("driver_kernel_module", "driver_kernel_module '{0}' is not auto, open or proprietary".format(
                    module), "set driver_kernel_module to auto, open or proprietary", "driver")
            else:
                view.kernel_module = module
        version = str(desired.get("driver_version") or "").strip()
        branch = str(desired.get("driver_branch") or "").strip()
        fix_version = "set driver_version to a full release such as \"580.95.05\", or \"\" to follow driver_branch"
        fix_branch = "set driver_branch to a branch number such as \"580\""
        ok = True
        if version and not re.match(r"^\d{3}\.\d+(\.\d+)?$", version):
            bad("driver_version", "driver_version '{0}' is not a driver release (NNN.NN[.NN])".format(version),
                fix_version, "driver")
            ok = False
        if branch and not re.match(r"^\d{3}$", branch):
            bad("driver_branch", "driver_branch '{0}' is not a branch number (three digits)".format(branch),
                fix_branch, "driver")
            ok = False
        # As in the driver role, an exact driver_version decides the branch;
        # driver_branch (often just the role default) then plays no part.
        if ok and view.driver_state == "present" and (version or branch):
            view.driver = Driver(version=version or None, branch=driver_branch(version) if version else branch)

    # -- evaluation ---------------------------------------------------------------
    def evaluate(self, desired: dict[str, t.Any] | None = None, installed: dict[str, t.Any] | None = None,
                 cuda_versions: t.Iterable[str] = (), target: str = "desired") -> tuple[NodeView, list[dict[str, str]]]:
        """All findings for one node, most severe first."""
        view, found = self.view(desired, installed, cuda_versions, target)
        for rule in (self._cuda_driver, self._branch_lifecycle, self._architecture_branch, self._kernel_module,
                     self._mig, self._container_toolkit, self._engine_cdi, self._crictl_skew, self._fabricmanager):
            found.extend(rule(view))
        for custom in self.custom_rules:
            found.extend(custom.evaluate(view))
        found = [f for f in found if f["rule"] not in self.ignore_rules
                 and f["rule"].split(":", 1)[-1] not in self.ignore_rules]
        unique = {(f["rule"], f["subject"], f["message"]): f for f in found}
        ordered = sorted(unique.values(),
                         key=lambda f: (-SEVERITIES.index(f["severity"]), f["layer"], f["rule"], f["subject"]))
        return view, ordered

    def _cuda_driver(self, view: NodeView) -> list[dict[str, str]]:
        driver = view.driver
        if driver is None:
            return []
        found: list[dict[str, str]] = []
        for cuda in view.cuda_versions:
            subject = "CUDA {0}".format(cuda)
            full, note = self.cuda_release(cuda)[1:]
            parts = parse_version(cuda)
            floor = None
            if parts[1] >= CUDA_MVC_FIRST_MINOR.get(parts[0], 0):
                floor = CUDA_MVC_FLOORS.get(parts[0])
            if full is None and floor is None:
                found.append(finding(
                    "cuda_driver", "warning", subject,
                    "{0}, and CUDA {1}.x has no known compatibility floor: the driver cannot be checked".format(
                        note, parts[0]),
                    "add a row to the matrix tables (cuda_drivers: [{cuda: \"" + cuda + "\", driver: ...}])",
                    "driver"))
                continue
            if note:
                found.append(finding(
                    "cuda_driver", "warning", subject, note,
                    "add the release's driver to the matrix tables (cuda_drivers) once NVIDIA publishes it",
                    "driver"))
            need = version_text(full) if full else None
            full_ok = driver.at_least(need) if need else False
            floor_ok = driver.at_least(floor) if floor else False
            if full_ok:
                continue
            if full_ok is None:
                found.append(finding(
                    "cuda_driver", "info", subject,
                    "{0} needs driver {1} or newer; only {2} releases from {1} on qualify".format(subject, need, driver),
                    "pin driver_version to {0} or newer to be sure".format(need), "driver"))
            elif floor_ok is not False:
                maybe = "" if floor_ok else " (only {0} releases from {1} on)".format(driver, floor)
                found.append(finding(
                    "cuda_driver", "warning", subject,
                    "driver {0} runs {1} only through minor version compatibility{2}: a limited feature set{3}".format(
                        driver, subject, maybe,
                        "; full support needs {0} or newer".format(need) if need else ""),
                    "use driver {0} or newer".format(need) if need else "use a newer driver", "driver"))
            else:
                floor_note = ""
                if floor and need and parse_version(floor) < parse_version(need):
                    floor_note = " ({0} or newer runs it with a limited feature set)".format(floor)
                found.append(finding(
                    "cuda_driver", "error", subject,
                    "driver {0} cannot run {1}: it needs {2} or newer{3}".format(
                        driver, subject, need or floor, floor_note),
                    "use a driver of branch {0} or newer, or build the images with an older CUDA".format(
                        driver_branch(floor or need)), "driver"))
        return found

    def _branch_lifecycle(self, view: NodeView) -> list[dict[str, str]]:
        if view.driver is None:
            return []
        branch = str(view.driver.branch)
        status = self.branch_status(branch)
        subject = "R{0}".format(branch)
        if status["type"] is None:
            return [finding(
                "branch_lifecycle", "warning", subject,
                "driver branch R{0} is not in the lifecycle table, so its support status is unknown".format(branch),
                "check https://docs.nvidia.com/datacenter/tesla/drivers/ and add it to the matrix tables "
                "(branches: [{branch: \"" + branch + "\", type: ..., eol: ...}]), or use a listed branch",
                "driver")]
        found = []
        kind = BRANCH_TYPES.get(status["type"], status["type"])
        supported = self._supported_branches()
        move = "move to a supported branch ({0})".format(", ".join(supported)) if supported else \
            "move to a supported branch"
        if status["status"] == "eol":
            when = " in {0}".format(_month_name(status["eol"])) if status["eol"] not in (None, "ended") else ""
            found.append(finding(
                "branch_lifecycle", "warning", subject,
                "driver branch R{0} ({1}) reached end of life{2}: no more bug or security fixes".format(
                    branch, kind, when), move, "driver"))
        elif status["status"] == "near_eol":
            found.append(finding(
                "branch_lifecycle", "warning", subject,
                "driver branch R{0} ({1}) reaches end of life in {2} ({3} days left)".format(
                    branch, kind, _month_name(status["eol"]), status["days_left"]),
                "plan the upgrade: " + move, "driver"))
        elif status["status"] == "unknown":
            found.append(finding(
                "branch_lifecycle", "warning", subject,
                "driver branch R{0} ({1}): end of life not verified; {2}".format(
                    branch, kind, status["note"] or "no support matrix read lists its date"),
                "check https://docs.nvidia.com/datacenter/tesla/drivers/ ; " + move, "driver"))
        if status["type"] == "NFB" and status["status"] != "eol":
            found.append(finding(
                "branch_lifecycle", "info", subject,
                "driver branch R{0} is a {1} (about a quarter of support); production fleets usually run a "
                "Production or Long Term Support branch".format(branch, kind),
                "use a Production or Long Term Support branch unless you need this branch's features", "driver"))
        return found

    def _supported_branches(self) -> list[str]:
        names = []
        for branch in sorted(self.branches, key=int):
            status = self.branch_status(branch)
            if status["status"] == "supported" and status["type"] in ("PB", "LTSB"):
                names.append("R{0} {1}".format(branch, status["type"]))
        return names

    def _architecture_branch(self, view: NodeView) -> list[dict[str, str]]:
        driver = view.driver
        if driver is None:
            return []
        found = []
        for architecture in sorted({gpu.architecture for gpu in view.gpus if gpu.architecture in ARCHITECTURE_NAMES},
                                   key=self.architecture_index):
            labels = ", ".join(gpu.label for gpu in view.gpus if gpu.architecture == architecture)
            first, last = self.architecture_support(architecture)
            if last is not None and driver.branch > int(last):
                found.append(finding(
                    "architecture_branch", "error", architecture,
                    "driver {0} does not support {1} GPUs ({2}): R{3} is the last branch for {1}".format(
                        driver, architecture.capitalize(), labels, last),
                    "use driver branch R{0} (set driver_branch: \"{0}\")".format(last), "driver"))
            elif first is not None:
                ok = driver.at_least(first)
                if ok is False:
                    found.append(finding(
                        "architecture_branch", "error", architecture,
                        "driver {0} predates {1} GPUs ({2}): they need {3} or newer".format(
                            driver, architecture.capitalize(), labels, first),
                        "use a driver of branch {0} or newer".format(driver_branch(first)), "driver"))
                elif ok is None:
                    found.append(finding(
                        "architecture_branch", "info", architecture,
                        "{0} GPUs need driver {1} or newer; only {2} releases from {1} on qualify".format(
                            architecture.capitalize(), first, driver),
                        "pin driver_version to {0} or newer to be sure".format(first), "driver"))
        return found

    def _kernel_module(self, view: NodeView) -> list[dict[str, str]]:
        if view.driver is None or not view.gpus:
            return []
        requested = view.kernel_module or "auto"
        flavour, reasons = self.kernel_module_for(view.gpus, requested)
        found = []
        if flavour is None:
            if requested == "auto":
                found.append(finding(
                    "kernel_module", "error", "driver_kernel_module",
                    "no kernel module flavour suits every GPU on this host: {0}".format("; ".join(reasons)),
                    "split these GPUs across hosts; one driver cannot serve both", "driver"))
            else:
                other = "open" if requested == "proprietary" else "proprietary"
                found.append(finding(
                    "kernel_module", "error", "driver_kernel_module",
                    "driver_kernel_module is {0}, but {1}".format(requested, "; ".join(reasons)),
                    "set driver_kernel_module: {0} (or auto)".format(other), "driver"))
            return found
        if flavour == "open" and driver_branch_int(view.driver) < int(OPEN_MODULES_FIRST_BRANCH):
            found.append(finding(
                "kernel_module", "error", "driver_kernel_module",
                "open kernel modules ship from R{0} on; driver {1} has none{2}".format(
                    OPEN_MODULES_FIRST_BRANCH, view.driver,
                    "" if requested == "open" else " and these GPUs need them"),
                "use driver branch R{0} or newer, or driver_kernel_module: proprietary where the GPUs allow it".format(
                    OPEN_MODULES_FIRST_BRANCH), "driver"))
        elif (requested == "proprietary" and driver_branch_int(view.driver) >= int(OPEN_MODULES_DEFAULT_BRANCH)
              and self.kernel_module_for(view.gpus)[0] == "open"):
            found.append(finding(
                "kernel_module", "info", "driver_kernel_module",
                "from R{0} on the open modules are NVIDIA's default and suggested flavour for these GPUs".format(
                    OPEN_MODULES_DEFAULT_BRANCH),
                "consider driver_kernel_module: open (or auto)", "driver"))
        return found

    def _mig_gpus(self, view: NodeView) -> list[Gpu]:
        """GPUs the declared MIG label enables MIG on (all GPUs if the config is not at hand)."""
        if not view.mig_label:
            return []
        config = view.mig_config
        entries = None
        if config:
            entries = (config.get("mig-configs") or {}).get(view.mig_label)
        if not isinstance(entries, list):
            return list(view.gpus)
        chosen = []
        for gpu in view.gpus:
            for entry in entries:
                if not isinstance(entry, dict) or not entry.get("mig-enabled"):
                    continue
                devices = entry.get("devices", "all")
                if devices != "all" and gpu.index is not None and gpu.index not in (devices or []):
                    continue
                filters = entry.get("device-filter")
                if filters and gpu.pci_device_id:
                    wanted = [str(f).upper() for f in (filters if isinstance(filters, list) else [filters])]
                    if gpu.pci_device_id.upper() not in wanted:
                        continue
                chosen.append(gpu)
                break
        return chosen

    def _mig(self, view: NodeView) -> list[dict[str, str]]:
        found = []
        for gpu in self._mig_gpus(view):
            if gpu.mig_capable is False:
                found.append(finding(
                    "mig_supported", "error", gpu.label,
                    "MIG label '{0}' enables MIG on {1}, which does not support MIG".format(view.mig_label, gpu.label),
                    "select these GPUs out of the label (devices / device-filter) or set mig_label: \"\"", "mig"))
                continue
            minimum = gpu.model.get("mig_min_driver") if gpu.model else None
            if not minimum or view.driver is None:
                continue
            ok = view.driver.at_least(minimum)
            if ok is False:
                found.append(finding(
                    "mig_driver", "error", gpu.label,
                    "MIG on {0} needs driver {1} or newer; the driver is {2}".format(gpu.label, minimum, view.driver),
                    "use driver {0} or newer".format(minimum), "mig"))
            elif ok is None:
                found.append(finding(
                    "mig_driver", "info", gpu.label,
                    "MIG on {0} needs driver {1} or newer; only {2} releases from {1} on qualify".format(
                        gpu.label, minimum, view.driver),
                    "pin driver_version to {0} or newer to be sure".format(minimum), "mig"))
        return found

    def _container_toolkit(self, view: NodeView) -> list[dict[str, str]]:
        if view.toolkit is None:
            return []
        found = []
        toolkit = version_text(view.toolkit)
        features = self.ctk_features(toolkit)
        if (view.cdi_wanted or view.cdi_managed) and not features["cdi_generate"]:
            found.append(finding(
                "container_toolkit", "error", "cdi_generate",
                "Container Toolkit {0} cannot generate CDI specifications (from 1.12.0)".format(toolkit),
                "set container_toolkit_version to 1.12.0 or newer", "container_toolkit"))
        if view.engine == "containerd" and view.engine_version and view.engine_version >= (2,) \
                and not features["containerd_config_v3"]:
            found.append(finding(
                "container_toolkit", "error", "containerd_config_v3",
                "containerd {0} uses config version 3, which Container Toolkit {1} does not support "
                "(from 1.17.4)".format(version_text(view.engine_version), toolkit),
                "set container_toolkit_version to 1.17.4 or newer", "container_toolkit"))
        if view.cdi_managed and not features["cdi_refresh_units"]:
            found.append(finding(
                "container_toolkit", "info", "cdi_refresh_units",
                "Container Toolkit {0} has no nvidia-cdi-refresh units (from 1.18.0): the cdi role installs "
                "gpufleet-cdi-refresh.service instead".format(toolkit),
                "nothing to do; 1.18.0 or newer uses NVIDIA's own units", "cdi"))
        if view.engine in ("containerd", "crio") and not features["drop_in_configs"]:
            found.append(finding(
                "container_toolkit", "info", "drop_in_configs",
                "Container Toolkit {0} writes no {1} drop-in configs (from 1.18.0)".format(toolkit, view.engine),
                "nothing to do: gpufleet writes its own drop-in", "container_runtime"))
        return found

    def _engine_cdi(self, view: NodeView) -> list[dict[str, str]]:
        if not view.engine or view.engine_version is None or not view.cdi_wanted:
            return []
        version = version_text(view.engine_version)
        support = self.engine_cdi(view.engine, view.engine_version)
        subject = "{0} {1}".format(view.engine, version)
        if support == "none":
            first = [v for v, level in ENGINE_CDI[view.engine] if level == "opt_in"][0]
            return [finding(
                "engine_cdi", "warning", subject,
                "{0} has no CDI support (from {1}); only the nvidia runtime can inject GPUs".format(subject, first),
                "upgrade {0} to {1} or newer, or set container_runtime_cdi: false".format(view.engine, first),
                "container_runtime")]
        if support == "unverified":
            return [finding(
                "engine_cdi", "warning", subject,
                "CDI support of {0} is unverified (CRI-O's first release with CDI is not confirmed; "
                "1.24 is likely)".format(subject), "use CRI-O 1.24 or newer", "container_runtime")]
        if support == "opt_in":
            return [finding(
                "engine_cdi", "info", subject,
                "{0} supports CDI as an opt-in setting; it is on only where the runtime config enables it".format(
                    subject), "nothing to do: container_runtime_cdi enables it", "container_runtime")]
        return []

    def _crictl_skew(self, view: NodeView) -> list[dict[str, str]]:
        if view.crictl is None or view.kubernetes is None:
            return []
        crictl, kubernetes = view.crictl[:2], view.kubernetes[:2]
        if crictl == kubernetes:
            return []
        subject = "crictl {0}".format(version_text(view.crictl))
        wanted = "v{0}.x".format(version_text(kubernetes))
        if kubernetes >= CRICTL_SHARED_FROM and crictl >= CRICTL_SHARED_FROM:
            return [finding(
                "crictl_skew", "warning", subject,
                "crictl {0} does not match Kubernetes {1}: cri-tools follows Kubernetes minors".format(
                    version_text(view.crictl), version_text(kubernetes)),
                "use crictl {0} (or set crictl_version: \"\" to derive it)".format(wanted), "crictl")]
        return [finding(
            "crictl_skew", "error", subject,
            "crictl {0} is not compatible with Kubernetes {1}: before 1.27 each Kubernetes minor needs its own "
            "cri-tools minor, and from 1.27 both must be 1.27 or newer".format(
                version_text(view.crictl), version_text(kubernetes)),
            "use crictl {0} (or set crictl_version: \"\" to derive it)".format(wanted), "crictl")]

    def _fabricmanager(self, view: NodeView) -> list[dict[str, str]]:
        if view.fabricmanager is None or view.driver is None or not view.driver.pinned:
            return []
        if view.fabricmanager == view.driver.version:
            return []
        return [finding(
            "fabricmanager", "error", "fabricmanager",
            "Fabric Manager {0} differs from driver {1}: Fabric Manager only starts at exactly the driver's "
            "version".format(version_text(view.fabricmanager), view.driver),
            "install Fabric Manager {0} (the driver role pins both together)".format(view.driver), "driver")]


def driver_branch_int(driver: Driver) -> int:
    return int(driver.branch)
