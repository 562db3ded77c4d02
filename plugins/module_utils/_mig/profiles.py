# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""GPU-instance profiles of known MIG-capable GPUs, by PCI device id.

Some drivers describe GPU-instance profiles only while MIG mode is *enabled*
(nvmlDeviceGetGpuInstanceProfileInfo answers NOT_SUPPORTED otherwise; nvml-sim
does the same). Driver 580.159.04 on an H100 answered with MIG disabled too,
and its answers matched this table (tests/device/h100-reading-2026-11-23.json).
To validate and plan a layout for a GPU whose MIG mode is still off -- before
anything on the node is touched, and in check mode -- the planner uses this
table. It is a hint only: as soon as MIG is on, the profiles NVML
reports replace it, and the plan is made again from them.

Facts from the MIG user guide's profile tables and real `nvidia-smi mig
-lgip/-lgipp` output (collected in the project's reference notes,
mig-profiles.yaml), and NVIDIA's mig-parted default config (B300, GB300, the
H800 ids); placements of A100-80GB, H200, GH200, H20, B200, GB200, B300 and
GB300 are inferred from the identical 8-slice layout of A100-40GB/H100.
"""

from __future__ import annotations

import typing as t

# (profile id, compute slices, max instances, placement size, placement starts)
Geometry = t.Tuple[t.Tuple[int, int, int, int, t.Tuple[int, ...]], ...]

# The 8-memory-slice / 7-compute-slice layout of A100, H100, H200, B200, ...
# in the order of the names each model lists below: 1g, 1g+me, 1g with two
# memory slices, 2g, 3g, 4g, 7g.
_EIGHT_SLICES: Geometry = (
    (19, 1, 7, 1, (0, 1, 2, 3, 4, 5, 6)),
    (20, 1, 1, 1, (0, 1, 2, 3, 4, 5, 6)),
    (15, 1, 4, 2, (0, 2, 4, 6)),
    (14, 2, 3, 2, (0, 2, 4)),
    (9, 3, 2, 4, (0, 4)),
    (5, 4, 1, 4, (0,)),
    (0, 7, 1, 8, (0,)),
)

# A30: 4 memory slices, 4 compute slices (1g, 1g+me, 2g, 2g+me, 4g).
_A30: Geometry = (
    (14, 1, 4, 1, (0, 1, 2, 3)),
    (21, 1, 1, 1, (0, 1, 2, 3)),
    (5, 2, 2, 2, (0, 2)),
    (6, 2, 1, 2, (0, 2)),
    (0, 4, 1, 4, (0,)),
)

# RTX PRO 6000 Blackwell: 12 placement units, 4 compute slices.
_RTX_PRO_6000: Geometry = (
    (14, 1, 4, 3, (0, 3, 6, 9)),
    (21, 1, 1, 3, (0, 3, 6, 9)),
    (47, 1, 4, 3, (0, 3, 6, 9)),
    (65, 1, 1, 3, (0, 3, 6, 9)),
    (67, 1, 4, 3, (0, 3, 6, 9)),
    (5, 2, 2, 6, (0, 6)),
    (35, 2, 2, 6, (0, 6)),
    (64, 2, 1, 6, (0, 6)),
    (66, 2, 2, 6, (0, 6)),
    (0, 4, 1, 12, (0,)),
    (32, 4, 1, 12, (0,)),
)


class KnownModel(t.NamedTuple):
    model: str
    pci_device_ids: t.Tuple[int, ...]
    geometry: Geometry
    # One name per geometry row; "a|b" lists the name NVIDIA uses and an
    # alias some drivers report instead (GB200: 1g.23gb vs 1g.24gb).
    names: t.Tuple[str, ...]


MODELS: t.Tuple[KnownModel, ...] = (
    KnownModel("A30", (0x20B710DE,), _A30, ("1g.6gb", "1g.6gb+me", "2g.12gb", "2g.12gb+me", "4g.24gb")),
    KnownModel(
        "A100 40GB",
        (0x20B010DE, 0x20B110DE, 0x20F110DE, 0x20F610DE),
        _EIGHT_SLICES,
        ("1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
    ),
    KnownModel(
        "A100 80GB",
        (0x20B210DE, 0x20B510DE, 0x20F310DE, 0x20F510DE),
        _EIGHT_SLICES,
        ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    ),
    KnownModel(
        "H100 80GB",
        (0x233010DE, 0x233110DE, 0x232210DE, 0x232410DE),
        _EIGHT_SLICES,
        ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    ),
    KnownModel("H100 94GB", (0x232110DE, 0x233A10DE), _EIGHT_SLICES, ("1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb")),
    KnownModel(
        "GH200 96GB", (0x234210DE, 0x233D10DE, 0x20B610DE), _EIGHT_SLICES, ("1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb")
    ),
    KnownModel("H20", (0x232910DE,), _EIGHT_SLICES, ("1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb")),
    KnownModel("H200", (0x233510DE, 0x233B10DE), _EIGHT_SLICES, ("1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb")),
    KnownModel("GH200 144GB", (0x234810DE,), _EIGHT_SLICES, ("1g.18gb", "1g.18gb+me", "1g.36gb", "2g.36gb", "3g.72gb", "4g.72gb", "7g.144gb")),
    KnownModel("B200", (0x290110DE,), _EIGHT_SLICES, ("1g.23gb", "1g.23gb+me", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb")),
    # GB200: the 189 GB names (1g.24gb, 3g.95gb, 4g.95gb, 7g.189gb) are what
    # early boards reported; mig-parted replaced them with the production ones.
    KnownModel(
        "GB200",
        (0x294110DE,),
        _EIGHT_SLICES,
        ("1g.23gb|1g.24gb", "1g.23gb+me|1g.24gb+me", "1g.47gb", "2g.47gb", "3g.93gb|3g.95gb", "4g.93gb|4g.95gb", "7g.186gb|7g.189gb"),
    ),
    # B300 and GB300: names and counts from mig-parted (GPU Operator 25.10.0);
    # the 8-unit placements are inferred, as for B200. R61x drivers name the
    # GB300's profiles by smaller sizes (1g.31gb, 3g.126gb, ...) for the same ids.
    KnownModel("B300", (0x318210DE,), _EIGHT_SLICES, ("1g.34gb", "1g.34gb+me", "1g.67gb", "2g.67gb", "3g.135gb", "4g.135gb", "7g.269gb")),
    KnownModel(
        "GB300",
        (0x31C210DE,),
        _EIGHT_SLICES,
        ("1g.35gb|1g.31gb", "1g.35gb+me|1g.31gb+me", "1g.70gb", "2g.70gb", "3g.139gb|3g.126gb", "4g.139gb|4g.126gb", "7g.278gb|7g.251gb"),
    ),
    KnownModel(
        "RTX PRO 6000 Blackwell",
        (0x2BB510DE,),
        _RTX_PRO_6000,
        (
            "1g.24gb",
            "1g.24gb+me",
            "1g.24gb+gfx",
            "1g.24gb+me.all",
            "1g.24gb-me",
            "2g.48gb",
            "2g.48gb+gfx",
            "2g.48gb+me.all",
            "2g.48gb-me",
            "4g.96gb",
            "4g.96gb+gfx",
        ),
    ),
)

_BY_DEVICE_ID = {device_id: model for model in MODELS for device_id in model.pci_device_ids}


def known_model(pci_device_id: int) -> KnownModel | None:
    """The table entry for a GPU's combined device/vendor id, if there is one."""
    return _BY_DEVICE_ID.get(pci_device_id)
