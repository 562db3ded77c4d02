# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""The CDI device names nvidia-ctk generates for a node's GPUs, from NVML facts
in nvml_info's shape: the rule _verify/cdi.py judges a spec by, for the
verify role's cdi check and for gpufleet-verify-boot on the node.
Python 3.8 standard library only.
"""

from __future__ import annotations

import typing as t


def expected_cdi_devices(nvml: dict[str, t.Any], strategies: t.Iterable[str]) -> tuple[set[str], dict[int, int]]:
    """(names nvidia-ctk would generate for full GPUs and MIG devices by UUID, MIG count per GPU for index names).

    nvidia-ctk names MIG devices by index as "<gpu>:<mig handle index>"; the
    handle index is not in the facts, so index-named MIG devices are compared
    by count per GPU.
    """
    names: set[str] = set()
    mig_counts: dict[int, int] = {}
    for gpu in nvml.get("gpus") or []:
        index, uuid = gpu.get("index"), gpu.get("uuid")
        devices = (gpu.get("mig") or {}).get("devices") or []
        # A GPU in MIG mode is a device only through its MIG devices
        # (nvidia-ctk 1.20 lists no full-GPU device for it).
        whole = not (gpu.get("mig") or {}).get("enabled")
        for strategy in strategies:
            if strategy == "index" and whole:
                names.add(str(index))
            elif strategy == "type-index" and whole:
                names.add("gpu{0}".format(index))
            elif strategy == "uuid" and uuid:
                if whole:
                    names.add(uuid)
                names.update(device["uuid"] for device in devices if device.get("uuid"))
        mig_counts[index] = len(devices)
    return names, mig_counts
