# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""CUDA toolkit releases and the drivers they need: the release -> minimum
driver table, the minor-version-compatibility floors, the release numbering
and forward compatibility.

`status`: "V" verified (NVIDIA document), "S" secondary, "U" not verified
(only ever warns).
"""

from __future__ import annotations

_RELEASE_NOTES = "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html"
_CONDA_13_1_1 = "https://anaconda.org/main/cuda-compat/files/modal/info/69702a237027d3c40d650c9d"
_SECONDARY_13_2 = (
    "secondary: third-party copies of the 13.2 release notes; corroborated by NVIDIA's CUDA repository "
    "(fedora43/x86_64: cuda-compat-13-2-595.45.04 and -595.58.03 with the 13.2.0 and 13.2.1 dates) and "
    "conda-forge/cuda-compat-feedstock@9ab1d5a:recipe/meta.yaml"
)
_SECONDARY_13_3 = (
    "secondary: third-party release notes; corroborated by NVIDIA's CUDA repository (fedora44/x86_64: "
    "cuda-13-3-13.3.0 with cuda-compat-13-3-610.43.02 and cuda-drivers-610.43.02, 2026-05-19)"
)
_ARCHIVE_13_4 = (
    "https://docs.nvidia.com/cuda/archive/13.4.1/cuda-toolkit-release-notes/index.html ; "
    "https://docs.nvidia.com/cuda/archive/13.4.2/cuda-toolkit-release-notes/index.html"
)
# Why 13.4's floors are unverified (and so only ever warn).
_UNREAD_13_4 = (
    " (the driver table of section 2.2 was not readable: the stored pages end after the component versions; "
    "and from 13.4.1 on the runfile's name carries no driver version, cuda_13.4.1_linux.run)"
)
_MVC = "https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html"
_FORWARD = "https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html"

# "CUDA Toolkit and Corresponding Driver Versions" (Linux x86_64). `cuda` is
# the release number: "Update N" of 12.4 is 12.4.N (11.0, 11.2 and 11.3 number
# GA and updates explicitly); from 13.4 on see BUILD_NUMBERED_FROM.
CUDA_DRIVERS = (
    # Rows with status "U": the release exists, its driver floor was not read
    # (a candidate from the cuda-compat package NVIDIA ships with a driver, or
    # None where there is none): they only ever warn.
    {
        "cuda": "13.5.1",
        "label": "GA",
        "driver": "620.70.06",
        "status": "U",
        "source": "secondary: candidate only, driver 620.70.06 (R620) ships cuda_compat for CUDA 13.5 "
        "(nvidia-driver redistrib_620.70.06.json); release: "
        "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/ (numbered 13.5.1 after the 13.4 scheme; its "
        "archive number was not found)",
        "checked": "2026-11-25",
    },
    {
        "cuda": "13.4.2",
        "label": "Update 1",
        "driver": None,
        "status": "U",
        "source": _ARCHIVE_13_4 + _UNREAD_13_4,
        "checked": "2026-11-29",
    },
    {"cuda": "13.4.1", "label": "GA", "driver": None, "status": "U", "source": _ARCHIVE_13_4 + _UNREAD_13_4, "checked": "2026-11-29"},
    # 610.57.04 was stored here once: a later R610 driver (2026-08-03) that ships
    # cuda_compat for 13.3, not the floor (issue 38's audit).
    {
        "cuda": "13.3.1",
        "label": "Update 1",
        "driver": "610.43.02",
        "status": "S",
        "source": "secondary: third-party copies of the 13.3 Update 1 release notes' driver table "
        '("CUDA 13.3 Update 1 >=610.43.02"); corroborated by NVIDIA\'s own runfile, '
        "https://developer.download.nvidia.com/compute/cuda/13.3.1/local_installers/cuda_13.3.1_610.43.02_linux.run "
        "(the driver it bundles is in its name; read as quoted by installer scripts, the site is not reachable here)",
        "checked": "2026-11-29",
    },
    {"cuda": "13.3.0", "label": "GA", "driver": "610.43.02", "status": "S", "source": _SECONDARY_13_3, "checked": "2026-11-25"},
    {
        "cuda": "13.2.2",
        "label": "Update 2",
        "driver": "595.71.05",
        "status": "U",
        "source": "secondary: candidate only, NVIDIA's CUDA repository (fedora43/x86_64) carries cuda-compat-13-2-595.71.05; cuda-13-2-13.2.2 dated 2026-06-23",
        "checked": "2026-11-25",
    },
    {"cuda": "13.2.1", "label": "Update 1", "driver": "595.58.03", "status": "S", "source": _SECONDARY_13_2, "checked": "2026-11-25"},
    {"cuda": "13.2.0", "label": "GA", "driver": "595.45.04", "status": "S", "source": _SECONDARY_13_2, "checked": "2026-11-25"},
    {"cuda": "13.1.1", "label": "Update 1", "driver": "590.48.01", "status": "V", "source": _CONDA_13_1_1, "checked": "2026-11-22"},
    {"cuda": "13.1.0", "label": "GA", "driver": "590.44.01", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "13.0.2", "label": "Update 2", "driver": "580.95.05", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "13.0.1", "label": "Update 1", "driver": "580.82.07", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "13.0.0", "label": "GA", "driver": "580.65.06", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "12.9.1", "label": "Update 1", "driver": "575.57.08", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "12.9.0", "label": "GA", "driver": "575.51.03", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "12.8.1", "label": "Update 1", "driver": "570.124.06", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "12.8.0", "label": "GA", "driver": "570.26", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "12.6.3", "label": "Update 3", "driver": "560.35.05", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "12.6.2", "label": "Update 2", "driver": "560.35.03", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "12.6.1", "label": "Update 1", "driver": "560.35.03", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "12.6.0", "label": "GA", "driver": "560.28.03", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "12.5.1", "label": "Update 1", "driver": "555.42.06", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "12.5.0", "label": "GA", "driver": "555.42.02", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "12.4.1", "label": "Update 1", "driver": "550.54.15", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "12.4.0", "label": "GA", "driver": "550.54.14", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "12.3.1", "label": "Update 1", "driver": "545.23.08", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "12.3.0", "label": "GA", "driver": "545.23.06", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "12.2.2", "label": "Update 2", "driver": "535.104.05", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "12.2.1", "label": "Update 1", "driver": "535.86.09", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "12.2.0", "label": "GA", "driver": "535.54.03", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "12.1.1", "label": "Update 1", "driver": "530.30.02", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "12.1.0", "label": "GA", "driver": "530.30.02", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "12.0.1", "label": "Update 1", "driver": "525.85.12", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "12.0.0", "label": "GA", "driver": "525.60.13", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "11.8.0", "label": "GA", "driver": "520.61.05", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "11.7.1", "label": "Update 1", "driver": "515.48.07", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "11.7.0", "label": "GA", "driver": "515.43.04", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "11.6.2", "label": "Update 2", "driver": "510.47.03", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "11.6.1", "label": "Update 1", "driver": "510.47.03", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "11.6.0", "label": "GA", "driver": "510.39.01", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "11.5.2", "label": "Update 2", "driver": "495.29.05", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "11.5.1", "label": "Update 1", "driver": "495.29.05", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "11.5.0", "label": "GA", "driver": "495.29.05", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "11.4.4", "label": "Update 4", "driver": "470.82.01", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "11.4.3", "label": "Update 3", "driver": "470.82.01", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "11.4.2", "label": "Update 2", "driver": "470.57.02", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "11.4.1", "label": "Update 1", "driver": "470.57.02", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "11.4.0", "label": "GA", "driver": "470.42.01", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "11.3.1", "label": "Update 1", "driver": "465.19.01", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "11.3.0", "label": "GA", "driver": "465.19.01", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "11.2.2", "label": "Update 2", "driver": "460.32.03", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "11.2.1", "label": "Update 1", "driver": "460.32.03", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "11.2.0", "label": "GA", "driver": "460.27.03", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "11.1.1", "label": "Update 1", "driver": "455.32", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "11.1.0", "label": "GA", "driver": "455.23", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "11.0.3", "label": "Update 1", "driver": "450.51.06", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "11.0.2", "label": "GA", "driver": "450.51.05", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
    {"cuda": "11.0.1", "label": "RC", "driver": "450.36.06", "status": "V", "source": _RELEASE_NOTES, "checked": "2026-11-22"},
)

# From CUDA 13.4 on the GA release is numbered x.y.1 and "the third digit is a
# build number and does not indicate an update release": 13.4.1 is 13.4 GA and
# 13.4.2 is 13.4 Update 1, so labels come from the rows, not from the number.
BUILD_NUMBERED_FROM = {"value": "13.4", "source": _ARCHIVE_13_4, "checked": "2026-11-25"}

# Minor version compatibility: from the floor of its major on, a toolkit runs
# "with limited feature-set" (a warning, not an error). `first_minor`: 11.0
# predates minor version compatibility. 12.x: the page says >= 525; the exact
# 525.60.13 (12.0 GA's driver) is the stricter, secondary form.
MVC_FLOORS = (
    {
        "major": 13,
        "driver": "580",
        "first_minor": 0,
        "source": _MVC + " ; https://docs.nvidia.com/cuda/cuda-features-archive/index.html",
        "checked": "2026-11-25",
    },
    {
        "major": 12,
        "driver": "525.60.13",
        "first_minor": 0,
        "source": _MVC + " ; 525.60.13: secondary, CUDA 12.8 Update 1 release notes as quoted",
        "checked": "2026-11-22",
    },
    {"major": 11, "driver": "450.80.02", "first_minor": 1, "source": _MVC, "checked": "2026-11-22"},
)

# Forward compatibility: a newer CUDA on an older driver through NVIDIA's
# cuda-compat package ("cuda-compat-<major>-<minor>"), "applicable only for
# systems with NVIDIA Data Center GPUs" (and select NGC Server Ready RTX SKUs,
# Jetson): gpus.GPU_MODELS "data_center". The path exists from CUDA 10.0
# (`first_cuda`). `branches`: the older driver is a data-center branch, one
# of drivers.DRIVER_BRANCHES (NVIDIA's data-center support matrix names, per
# branch, the newer CUDA it runs "through CUDA forward compatible upgrade").
# Within one branch (a driver older than the release's own of that branch)
# forward compatibility is supported only on Long Term Support branches
# (`same_branch`, the FAQ). Which older branches run which CUDA this way was
# not readable, so no further branch limit is encoded.
FORWARD_COMPAT = {
    "value": {
        "package": "cuda-compat-<major>-<minor>",
        "gpus": "data_center",
        "first_cuda": "10.0",
        "branches": "drivers.DRIVER_BRANCHES",
        "same_branch": "LTSB",
    },
    "source": (
        _FORWARD + " ; https://docs.nvidia.com/datacenter/tesla/pdf/NVIDIA_CUDA_Drivers_Support.pdf ; "
        "https://docs.nvidia.com/deploy/cuda-compatibility/frequently-asked-questions.html"
    ),
    "checked": "2026-11-26",
}
