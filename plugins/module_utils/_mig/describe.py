# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""Descriptions of GPUs, targets and layouts: what people read in task output,
diffs and assertions.
"""

from __future__ import annotations

import typing as t
from collections import Counter

from .placement import device_name
from .plan import GpuTarget
from .state import GpuState


def _device_counts(items: t.Iterable[tuple[int, int, str]]) -> str:
    """'2 x 3g.20gb, 1 x 1g.5gb' from (GI slices, CI slices, device name) items, largest first."""
    counts = Counter(items)
    return ", ".join("{0} x {1}".format(counts[key], key[2]) for key in sorted(counts, key=lambda k: (-k[0], -k[1], k[2])))


def describe_gpu(gpu: GpuState) -> str:
    """What a GPU has now, e.g. 'MIG enabled: 1 x 3g.20gb, 2 x 1g.5gb'."""
    if not gpu.mig_capable:
        return "MIG not supported"
    state = "MIG {0}".format("enabled" if gpu.mig_enabled else "disabled")
    if gpu.mig_pending != gpu.mig_enabled:
        state += " ({0} pending until a GPU reset or reboot)".format("enable" if gpu.mig_pending else "disable")
    if not gpu.mig_enabled:
        return state
    items = []
    for gi in gpu.gpu_instances:
        profile = gpu.profile_by_id(gi.profile_id)
        name = gpu.profile_name(gi.profile_id)
        slices = profile.slices if profile else 0
        if not gi.compute_instances:
            items.append((slices, 0, "{0} without compute instance".format(name)))
        for c in gi.compute:
            items.append((slices, c, device_name(profile, c) if profile else name))
    return "{0}: {1}".format(state, _device_counts(items)) if items else state + ", no GPU instances"


def describe_target(target: GpuTarget) -> str:
    """What an entry asks for, in the words describe_gpu uses."""
    if not target.mig_enabled:
        return "MIG disabled"
    if target.deferred:
        asked = ", ".join("{0} x {1}".format(c, n) for n, c in target.entry.mig_devices)
        return "MIG enabled" + (": " + asked if asked else ", no GPU instances")
    items = [(spec.profile.slices, c, device_name(spec.profile, c)) for spec in target.instances for c in spec.compute]
    return "MIG enabled: {0}".format(_device_counts(items)) if items else "MIG enabled, no GPU instances"


def layout_lines(gpu: GpuState, mig: tuple[bool, bool], layout: t.Sequence[tuple[int, str, tuple[int, ...]]]) -> list[str]:
    """A GPU's layout as diff lines, one GPU instance per line."""
    head = "GPU {0} {1} ({2}): ".format(gpu.index, gpu.name, gpu.uuid)
    if not gpu.mig_capable:
        return [head + "MIG not supported"]
    current, pending = mig
    head += "MIG {0}".format("enabled" if current else "disabled")
    if pending != current:
        head += ", {0} pending".format("enable" if pending else "disable")
    lines = [head]
    for start, name, compute in layout:
        profile = gpu.profile_named(name)
        devices = [device_name(profile, c) for c in compute] if profile else ["{0}c".format(c) for c in compute]
        note = "" if devices == [name] else "  compute instances: " + (" + ".join(devices) or "none")
        lines.append("  memory slice {0}: {1}{2}".format(start, name, note))
    return lines


def gpu_layout(gpu: GpuState) -> list[tuple[int, str, tuple[int, ...]]]:
    return sorted((gi.start, gpu.profile_name(gi.profile_id), gi.compute) for gi in gpu.gpu_instances)
