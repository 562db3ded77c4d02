# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""Export and report: the node's layout as a mig-parted config, and the plain
shapes (dicts, grouped problem lines) the module returns.
"""

from __future__ import annotations

import typing as t
from collections import Counter

from .._nvml.session import NvmlSession
from .config import CONFIG_VERSION, MigConfigError, parse_config
from .describe import describe_gpu, describe_target
from .placement import device_name
from .plan import GpuPlan, plan_gpu, resolve_target
from .reader import NvmlReader
from .state import GpuState, MigPlanError, _gpu_error


def _exported_devices(gpu: GpuState) -> dict[str, int] | None:
    """The mig-devices that describe `gpu` now; None when MIG is off.

    A mode change waiting for its reset is exported as the mode the GPU is
    headed for: applying the export then requests nothing new.
    """
    if not gpu.mig_pending:
        return None
    if not gpu.mig_enabled:
        return {}  # MIG comes on at the reset; no instance can exist before
    counts: Counter = Counter()
    for gi in gpu.gpu_instances:
        profile = gpu.profile_by_id(gi.profile_id)
        if profile is None or not gi.compute_instances:
            raise _gpu_error(
                gpu, "GPU instance {0} ({1}) has no compute instance, which a mig-parted config cannot describe".format(gi.id, gpu.profile_name(gi.profile_id))
            )
        counts.update(device_name(profile, c) for c in gi.compute)
    return dict(sorted(counts.items()))


def export_layout(gpus: t.Sequence[GpuState], label: str) -> tuple[dict[str, t.Any], list[str]]:
    """The GPUs' current layout as a mig-parted v1 config, and the GPUs it had to leave out (and why).

    Every GPU's entry is checked by planning it against the GPU itself: only
    what re-applies without a change is exported. A layout the format cannot
    say (two 3g instances with one 1c each read back as one 3g with 2 x 1c; a
    GPU instance without a compute instance) is left out with the reason, so
    applying the export never changes a GPU.
    """
    groups: dict[tuple[bool, tuple[tuple[str, int], ...]], list[int]] = {}
    problems: list[str] = []
    capable = [g for g in gpus if g.mig_capable]
    for gpu in capable:
        try:
            devices = _exported_devices(gpu)
            item: dict[str, t.Any] = {"devices": [gpu.index], "mig-enabled": devices is not None}
            if devices is not None:
                item["mig-devices"] = devices
            (entry,) = parse_config({"version": CONFIG_VERSION, "mig-configs": {label: [item]}})[label]
            plan = plan_gpu(gpu, resolve_target(gpu, entry))
            if plan.changed:
                raise _gpu_error(
                    gpu,
                    "re-applying mig-devices {0} would change it ({1}); a mig-parted config cannot describe this state".format(
                        "{" + ", ".join("{0}: {1}".format(*i) for i in (devices or {}).items()) + "}", "; ".join(plan.steps())
                    ),
                )
        except (MigPlanError, MigConfigError) as err:
            problems.append("{0}; left out of the export".format(err))
            continue
        groups.setdefault((devices is not None, tuple((devices or {}).items())), []).append(gpu.index)
    entries = []
    whole = len(groups) == 1 and not problems
    for (enabled, devices_items), indices in groups.items():
        item = {"devices": "all" if whole else indices, "mig-enabled": enabled}
        if enabled:
            item["mig-devices"] = dict(devices_items)
        entries.append(item)
    if not entries:
        # mig-parted needs at least one entry per label; this one selects no GPU.
        entries.append({"devices": [], "mig-enabled": False})
    return {"version": CONFIG_VERSION, "mig-configs": {label: entries}}, problems


def export_config(open_session: t.Callable[[], NvmlSession], label: str, proc_root: str = "/proc") -> tuple[dict[str, t.Any], list[str]]:
    """Read the node through NVML and export it (see export_layout)."""
    session = open_session()
    try:
        gpus = NvmlReader(session, proc_root).gpus()
    finally:
        session.shutdown()
    return export_layout(gpus, label)


def index_ranges(indices: t.Iterable[int]) -> str:
    """'0-3, 5' from [0, 1, 2, 3, 5]."""
    out: list[list[int]] = []
    for index in sorted(set(indices)):
        if out and index == out[-1][1] + 1:
            out[-1][1] = index
        else:
            out.append([index, index])
    return ", ".join(str(a) if a == b else "{0}-{1}".format(a, b) for a, b in out)


def group_gpu_problems(errors: t.Sequence[MigPlanError]) -> list[str]:
    """One line per distinct reason: 'GPUs 0-7 (NVIDIA A100-SXM4-40GB): ...' instead of eight identical lines."""
    groups: dict[tuple[str, str], list[int]] = {}
    lines: list[str] = []
    for err in errors:
        if err.gpu is None or err.reason is None:
            lines.append(str(err))
        else:
            groups.setdefault((err.gpu.name, err.reason), []).append(err.gpu.index)
    for (name, reason), indices in groups.items():
        lines.append("{0} {1} ({2}): {3}".format("GPU" if len(indices) == 1 else "GPUs", index_ranges(indices), name, reason))
    return lines


def plan_to_dict(plan: GpuPlan) -> dict[str, t.Any]:
    """One GPU's plan as the module returns it."""
    gpu = plan.gpu
    return {
        "index": gpu.index,
        "uuid": gpu.uuid,
        "name": gpu.name,
        "selected_by": plan.target.selected_by if plan.target else None,
        "skipped": plan.skipped,
        "mig_capable": gpu.mig_capable,
        "mig_enabled": {"current": gpu.mig_enabled, "pending": gpu.mig_pending, "wanted": plan.target.mig_enabled if plan.managed and plan.target else None},
        "mode_change": None if plan.set_mode is None else ("enable" if plan.set_mode else "disable"),
        "profiles_from": gpu.profiles_from,
        "destroy": [
            {
                "gpu_instance_id": d.instance.id,
                "profile": d.profile_name,
                "start": d.instance.start,
                "size": d.instance.size,
                "compute_instances": [ci.id for ci in d.instance.compute_instances],
            }
            for d in plan.destroy
        ],
        "recompute": [
            {
                "gpu_instance_id": r.instance.id,
                "profile": r.spec.profile.name,
                "start": r.instance.start,
                "destroy_compute_instances": [ci.id for ci in r.instance.compute_instances],
                "compute": r.spec.device_names(),
            }
            for r in plan.recompute
        ],
        "create": [
            {
                "profile": c.spec.profile.name,
                "profile_id": c.spec.profile.id,
                "start": c.start,
                "size": c.spec.profile.size,
                "compute": c.spec.device_names(),
            }
            for c in plan.create
        ],
        "steps": plan.steps(),
        "reset_required": plan.awaiting_reset,
        "changed": plan.changed,
        "before": describe_gpu(gpu),
        "after": describe_target(plan.target) if plan.target is not None and plan.managed else describe_gpu(gpu),
        "clients": [str(p) for p in gpu.processes],
    }
