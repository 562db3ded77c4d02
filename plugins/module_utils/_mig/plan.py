# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""The target of a GPU and the plan to get there: which GPU instances to keep,
destroy and create (with placement), or why the layout cannot fit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .config import _PROFILE_RE, ConfigEntry
from .placement import InstanceSpec, _capacity_problems, _LayoutSearch, _no_fit_message, device_name
from .state import ClientProcess, GpuInstanceState, GpuState, MigPlanError, Profile, _gpu_error


@dataclass(frozen=True)
class GpuTarget:
    """What one config entry asks of one GPU."""

    entry: ConfigEntry
    instances: tuple[InstanceSpec, ...] = ()
    # MIG is off and the GPU's profiles are unknown until it is on: the
    # instances are planned after enabling (MigApplier does).
    deferred: bool = False

    @property
    def mig_enabled(self) -> bool:
        return self.entry.mig_enabled

    @property
    def selected_by(self) -> str:
        return self.entry.where


def _split_profile(name: str) -> tuple[int | None, str]:
    match = _PROFILE_RE.match(name)
    if not match:  # parse_config already refused it; kept for direct callers
        raise MigPlanError("{0!r} is not a MIG profile name".format(name))
    return (int(match.group("c")) if match.group("c") else None), match.group("gi")


def resolve_target(gpu: GpuState, entry: ConfigEntry) -> GpuTarget:
    """The GPU instances `entry` asks of `gpu`, against the profiles the GPU offers.

    MIG devices with partial compute instances are packed like mig-parted
    does: the same GPU-instance profile keeps taking compute instances until
    they no longer fit, then a new GPU instance starts.
    """
    if not entry.mig_enabled:
        return GpuTarget(entry)
    if not gpu.mig_capable:
        raise _gpu_error(
            gpu, "{0} selects it with mig-enabled: true, but it does not support MIG; narrow the entry with 'devices' or 'device-filter'".format(entry.where)
        )
    if gpu.profiles_from == "none":
        return GpuTarget(entry, deferred=True)
    devices = []  # (profile, compute slices)
    for name, count in entry.mig_devices:
        compute, gi_name = _split_profile(name)
        profile = gpu.profile_named(gi_name)
        if profile is None:
            raise _gpu_error(
                gpu, "{0} asks for {1}, which this GPU does not offer; it offers {2}".format(entry.where, name, ", ".join(p.name for p in gpu.profiles))
            )
        if compute is not None and compute > profile.slices:
            raise _gpu_error(
                gpu,
                "{0} asks for {1}: a {2}-slice compute instance does not fit in a {3} GPU instance ({4} compute slices)".format(
                    entry.where, name, compute, profile.name, profile.slices
                ),
            )
        devices.extend([(profile, compute or profile.slices)] * count)
    devices.sort(key=lambda d: (-d[0].slices, -d[0].size, d[0].id, -d[1]))
    instances: list[InstanceSpec] = []
    for profile, compute in devices:
        last = instances[-1] if instances else None
        if last and last.profile == profile and sum(last.compute) + compute <= profile.slices:
            instances[-1] = InstanceSpec(profile, last.compute + (compute,))
        else:
            instances.append(InstanceSpec(profile, (compute,)))
    return GpuTarget(entry, tuple(instances))


@dataclass(frozen=True)
class CreateInstance:
    spec: InstanceSpec
    start: int

    def describe(self) -> str:
        return "create {0} at memory slice {1}{2}".format(self.spec.profile.name, self.start, _compute_note(self.spec.profile, self.spec.compute))


@dataclass(frozen=True)
class DestroyInstance:
    instance: GpuInstanceState
    profile_name: str

    def describe(self) -> str:
        return "destroy GPU instance {0} ({1} at memory slice {2})".format(self.instance.id, self.profile_name, self.instance.start)


@dataclass(frozen=True)
class RecomputeInstance:
    """Keep a GPU instance, replace its compute instances."""

    instance: GpuInstanceState
    spec: InstanceSpec

    def describe(self) -> str:
        return "replace the compute instances of GPU instance {0} ({1} at memory slice {2}){3}".format(
            self.instance.id,
            self.spec.profile.name,
            self.instance.start,
            _compute_note(self.spec.profile, self.spec.compute) or " with one full compute instance",
        )


def _compute_note(profile: Profile, compute: tuple[int, ...]) -> str:
    if compute == (profile.slices,):
        return ""
    return " with compute instances " + " + ".join(device_name(profile, c) for c in compute)


def _mode_step(enabled: bool) -> str:
    return "{0} MIG mode".format("enable" if enabled else "disable")


@dataclass
class GpuPlan:
    gpu: GpuState
    target: GpuTarget | None = None  # None: the label does not select this GPU
    set_mode: bool | None = None  # MIG mode to request, None to leave it
    destroy: list[DestroyInstance] = field(default_factory=list)
    recompute: list[RecomputeInstance] = field(default_factory=list)
    create: list[CreateInstance] = field(default_factory=list)
    skipped: str | None = None  # why a selected GPU is left alone

    @property
    def changed(self) -> bool:
        """Whether this run changes the GPU. Instances of a GPU waiting for its reset are made only after it."""
        if self.set_mode is not None or self.destroy:
            return True
        return bool(self.recompute or self.create) and not self.awaiting_reset

    @property
    def awaiting_reset(self) -> bool:
        """The wanted MIG mode is already requested; only a GPU reset (or reboot) is missing."""
        return self.target is not None and self.gpu.mig_capable and self.set_mode is None and self.gpu.mig_pending != self.gpu.mig_enabled

    @property
    def managed(self) -> bool:
        return self.target is not None and self.gpu.mig_capable and self.skipped is None

    def steps(self, reset_step: str | None = None) -> list[str]:
        """Every NVML change this plan makes, in the order the applier makes them.

        A GPU waiting for its reset gets its instances only after it: with
        `reset_step` (the run resets it) that step comes first, without it they
        are not made in this run and not listed.
        """
        out = [d.describe() for d in self.destroy]
        if self.set_mode is not None:
            out.append(_mode_step(self.set_mode))
        if self.awaiting_reset:
            if reset_step is None:
                return out
            out.append(reset_step)
        out += [r.describe() for r in self.recompute]
        out += [c.describe() for c in self.create]
        if self.target is not None and self.target.deferred:
            out.append("plan the GPU instances from the profiles NVML reports once MIG is on")
        return out

    def mig_after(self) -> tuple[bool, bool]:
        """(current, pending) MIG mode once the plan is done, assuming the switch needs no reset."""
        if self.set_mode is None:
            return self.gpu.mig_enabled, self.gpu.mig_pending
        return self.set_mode, self.set_mode

    def layout_after(self) -> list[tuple[int, str, tuple[int, ...]]]:
        """(start, profile name, compute) of every GPU instance once the plan is done."""
        gone = {d.instance.id for d in self.destroy}
        recomputed = {r.instance.id: r.spec.compute for r in self.recompute}
        after = [(gi.start, self.gpu.profile_name(gi.profile_id), recomputed.get(gi.id, gi.compute)) for gi in self.gpu.gpu_instances if gi.id not in gone]
        after += [(c.start, c.spec.profile.name, c.spec.compute) for c in self.create]
        return sorted(after)


def plan_gpu(gpu: GpuState, target: GpuTarget | None) -> GpuPlan:
    """The smallest change that gives `gpu` the `target` layout. Raises MigPlanError."""
    plan = GpuPlan(gpu, target)
    if target is None:
        return plan
    if not gpu.mig_capable:
        if target.mig_enabled:
            plan.skipped = "does not support MIG; left alone (the entry selects all devices)"
        return plan
    if not target.mig_enabled:
        if gpu.mig_enabled:
            plan.destroy = [DestroyInstance(gi, gpu.profile_name(gi.profile_id)) for gi in gpu.gpu_instances]
        if gpu.mig_pending:
            plan.set_mode = False
        return plan

    if not gpu.mig_pending:
        # Off, or on with a disable pending: ask for MIG on (which also
        # cancels a pending disable without a reset).
        plan.set_mode = True
    wanted = list(target.instances)
    problems = _capacity_problems(gpu, wanted)
    if problems:
        raise _gpu_error(gpu, "{0} does not fit: {1}".format(target.selected_by, "; ".join(problems)))
    search = _LayoutSearch(gpu, wanted)
    layout = search.run()
    if layout is None:
        raise _gpu_error(gpu, "{0} does not fit: {1}".format(target.selected_by, _no_fit_message(wanted, search)))
    keep: set[int] = set()
    for profile, starts in layout:
        remaining = [spec.compute for spec in dict(search.groups)[profile]]
        here = [search.existing.get((profile.id, s)) for s in starts]
        # Instances that already carry a wanted compute layout take it first,
        # busy ones before idle ones (as the search scored them).
        for gi in sorted((gi for gi in here if gi is not None), key=lambda gi: gi.id not in search.busy):
            if gi.compute in remaining:
                remaining.remove(gi.compute)
                keep.add(gi.id)
        for start, gi in zip(starts, here):
            if gi is not None and gi.id in keep:
                continue
            spec = InstanceSpec(profile, remaining.pop(0))
            if gi is None:
                plan.create.append(CreateInstance(spec, start))
            else:
                keep.add(gi.id)
                plan.recompute.append(RecomputeInstance(gi, spec))
    plan.destroy = [DestroyInstance(gi, gpu.profile_name(gi.profile_id)) for gi in gpu.gpu_instances if gi.id not in keep]
    plan.create.sort(key=lambda c: (-c.spec.profile.size, -c.spec.profile.slices, -c.start))
    return plan


def blocking_clients(plan: GpuPlan) -> list[ClientProcess]:
    """Processes that keep `plan` from being carried out (NVML would answer IN_USE)."""
    if plan.set_mode is not None:
        return list(plan.gpu.processes)
    touched = {d.instance.id for d in plan.destroy} | {r.instance.id for r in plan.recompute}
    return [p for p in plan.gpu.processes if p.gpu_instance_id in touched]
