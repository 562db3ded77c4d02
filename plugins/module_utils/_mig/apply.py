# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""Carrying plans out through NVML: MigApplier applies one GPU's plan keeping a
journal (a failure reports exactly what was done and what was not), and
MigController plans and applies a whole node.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field

from .._nvml.constants import NVML_ERROR_IN_USE, NVML_ERROR_RESET_REQUIRED, NVML_SUCCESS, NvmlError
from .._nvml.session import NvmlSession
from .._nvml.values import Device, GpuInstance, Placement
from .config import ConfigEntry
from .describe import describe_gpu, describe_target
from .export import group_gpu_problems, index_ranges
from .placement import InstanceSpec
from .plan import CreateInstance, GpuPlan, GpuTarget, RecomputeInstance, _mode_step, blocking_clients, plan_gpu, resolve_target
from .reader import NvmlReader
from .state import GpuInstanceState, GpuState, MigPlanError, _gpu_error


class MigApplyError(Exception):
    """A change failed part-way; `done` and `not_done` say exactly how far it got.

    `converges` is False when running again cannot help (the layout does not
    fit the profiles the driver reports once MIG is on): the config is wrong.
    """

    def __init__(self, message: str, done: list[str], not_done: list[str], converges: bool = True) -> None:
        super().__init__(message)
        self.done = done
        self.not_done = not_done
        self.converges = converges


class MigApplier:
    """Carries GpuPlans out through NVML, journalling every change it makes."""

    def __init__(self, session: NvmlSession, reader: NvmlReader) -> None:
        self.s = session
        self.reader = reader
        self.done: list[str] = []
        self.reset_gpus: list[int] = []
        self.plans: list[GpuPlan] = []  # as carried out (re-planned where MIG just came on)
        self._gpu_done: list[str] = []
        self._replan_failed = False

    def apply(self, plans: t.Sequence[GpuPlan]) -> None:
        for position, plan in enumerate(plans):
            self._gpu_done = []
            try:
                self.plans.append(self._gpu(plan))
            except (NvmlError, MigPlanError) as err:
                current = self._current
                not_done = ["GPU {0}: {1}".format(current.gpu.index, step) for step in current.steps() if step not in self._gpu_done]
                not_done += ["GPU {0}: {1}".format(p.gpu.index, step) for p in plans[position + 1 :] for step in p.steps()]
                raise MigApplyError(
                    "GPU {0}: {1} failed: {2}".format(plan.gpu.index, self._step, err), list(self.done), not_done, converges=not self._replan_failed
                ) from None

    def _run(self, gpu: GpuState, step: str, action: t.Callable[..., t.Any], *args: t.Any) -> t.Any:
        self._step = step
        result = action(*args)
        self.done.append("GPU {0}: {1}".format(gpu.index, step))
        self._gpu_done.append(step)
        return result

    def _gpu(self, plan: GpuPlan) -> GpuPlan:
        self._current = plan
        self._step = "reading its MIG state"
        if not plan.changed:
            if plan.awaiting_reset:
                self.reset_gpus.append(plan.gpu.index)
            return plan
        gpu = plan.gpu
        dev = self.reader.device(gpu.index)
        for destroy in plan.destroy:
            self._run(gpu, destroy.describe(), self._destroy, dev, destroy.instance)
        if plan.set_mode is not None:
            status = self._run(gpu, _mode_step(plan.set_mode), self.s.set_mig_mode, dev, plan.set_mode)
            if status == NVML_ERROR_IN_USE:
                raise MigPlanError(
                    "NVML could not switch MIG mode because the GPU is in use; stop its clients (DCGM, nvsm, kubelet pods, CUDA jobs) and run again"
                )
            if status == NVML_ERROR_RESET_REQUIRED:
                # The new mode waits for a GPU reset or reboot; instances can
                # only be made once it is active.
                self.reset_gpus.append(gpu.index)
                return plan
            if status != NVML_SUCCESS:
                raise NvmlError(status, "nvmlDeviceSetMigMode (activation status)", self.s.error_string(status))
            if plan.set_mode and gpu.profiles_from != "nvml":
                plan = self._replan(plan)
        elif plan.awaiting_reset:
            self.reset_gpus.append(gpu.index)
            return plan
        for recompute in plan.recompute:
            self._run(gpu, recompute.describe(), self._recompute, dev, recompute)
        for create in plan.create:
            self._run(gpu, create.describe(), self._create, dev, create)
        return plan

    def _destroy(self, dev: Device, instance: GpuInstanceState) -> None:
        handle = self.s.gpu_instance_by_id(dev, instance.id)
        for ci in instance.compute_instances:
            self.s.destroy_compute_instance(self.s.compute_instance_by_id(handle, ci.id))
        self.s.destroy_gpu_instance(handle)

    def _recompute(self, dev: Device, recompute: RecomputeInstance) -> None:
        handle = self.s.gpu_instance_by_id(dev, recompute.instance.id)
        for ci in recompute.instance.compute_instances:
            self.s.destroy_compute_instance(self.s.compute_instance_by_id(handle, ci.id))
        self._compute(handle, recompute.spec)

    def _create(self, dev: Device, create: CreateInstance) -> None:
        profile = create.spec.profile
        handle = self.s.create_gpu_instance(dev, profile.id, Placement(create.start, profile.size))
        self._compute(handle, create.spec)

    def _compute(self, handle: GpuInstance, spec: InstanceSpec) -> None:
        if spec.compute == (spec.profile.slices,):
            self.s.create_compute_instance(handle)  # the full-size default, as `nvidia-smi mig -cgi .. -C` makes
            return
        offered = {p.slice_count: p for p in self.s.compute_instance_profiles(handle)}
        for slices in spec.compute:
            if slices not in offered:
                raise MigPlanError(
                    "{0} offers no {1}-slice compute instance (only {2})".format(
                        spec.profile.name, slices, ", ".join("{0}c".format(s) for s in sorted(offered))
                    )
                )
            self.s.create_compute_instance(handle, offered[slices].id)

    def _replan(self, plan: GpuPlan) -> GpuPlan:
        """MIG just came on: plan again from the profiles NVML now reports."""
        step = "plan the GPU instances from the profiles NVML reports now that MIG is on"
        self._step = step
        gpu = self.reader.gpu(plan.gpu.index)
        try:
            if plan.target is None:
                raise MigPlanError("{0}: no target to plan".format(gpu.label))
            fresh = plan_gpu(gpu, resolve_target(gpu, plan.target.entry))
        except MigPlanError as err:
            # Put the GPU back as it was found: MIG on without instances runs
            # no CUDA work at all.
            self._run(gpu, "disable MIG mode again", self.s.set_mig_mode, self.reader.device(gpu.index), False)
            self._step = step
            self._replan_failed = True
            raise MigPlanError("{0} (MIG mode was switched back off)".format(err)) from None
        self._current = fresh
        self._gpu_done = []
        return fresh


# --------------------------------------------------------------------------
# the whole node
# --------------------------------------------------------------------------
@dataclass
class NodePlan:
    label: str
    plans: list[GpuPlan]
    missing: list[str] = field(default_factory=list)  # entries naming GPUs the node lacks

    @property
    def changed(self) -> bool:
        return any(p.changed for p in self.plans)

    def changes(self, resetting: bool) -> bool:
        """Whether applying changes anything: with resetting, a GPU only waiting for its reset gets it."""
        return self.changed or (resetting and bool(self.reset_gpus))

    @property
    def reset_gpus(self) -> list[int]:
        return [p.gpu.index for p in self.plans if p.awaiting_reset]

    def differences(self, missing: bool = True) -> list[str]:
        """Why the label is not applied: one line per GPU that differs, and per GPU the config names but lacks.

        An assert counts a named GPU that is not there (it may have fallen
        off the bus); the check after an apply does not, since apply skips
        those GPUs as mig-parted does and warns instead.
        """
        return [
            "GPU {0}: expected {1}, found {2}".format(p.gpu.index, describe_target(p.target), describe_gpu(p.gpu))
            for p in self.plans
            if p.target is not None and p.managed and (p.changed or p.awaiting_reset)
        ] + (self.missing if missing else [])

    def mode_differences(self) -> list[str]:
        """Like differences, for the MIG mode alone (mig-parted's `assert --mode-only`): current and pending."""
        out = []
        for plan in self.plans:
            if plan.target is None or not plan.managed:
                continue
            wanted = plan.target.mig_enabled
            if (plan.gpu.mig_enabled, plan.gpu.mig_pending) != (wanted, wanted):
                out.append("GPU {0}: expected MIG {1}, found {2}".format(plan.gpu.index, "enabled" if wanted else "disabled", describe_gpu(plan.gpu)))
        return out + self.missing

    def clients_in_the_way(self, resetting: bool = False) -> list[str]:
        """One line per GPU whose planned change (or, with resetting, its reset) attached processes would block."""
        out = []
        for plan in self.plans:
            if resetting and plan.awaiting_reset:
                # A reset fails on a GPU that processes hold; finding that
                # out mid-way would leave the GPUs reset before it half-done.
                blocking = list(plan.gpu.processes)
            elif plan.changed:
                blocking = blocking_clients(plan)
            else:
                continue
            if blocking:
                out.append("{0} ({1}): {2}".format(plan.gpu.label, plan.gpu.uuid, ", ".join(str(p) for p in blocking)))
        return out


class MigController:
    """Plans, applies or asserts one label of a config on this node."""

    def __init__(self, entries: t.Sequence[ConfigEntry], label: str, session: NvmlSession, proc_root: str = "/proc") -> None:
        self.entries = list(entries)
        self.label = label
        self.session = session
        self.reader = NvmlReader(session, proc_root)

    def plan(self) -> NodePlan:
        plans, errors = [], []
        gpus = self.reader.gpus()
        for gpu in gpus:
            try:
                plans.append(plan_gpu(gpu, self._target(gpu)))
            except MigPlanError as err:
                errors.append(err)
        problems = group_gpu_problems(errors) + self._entries_reaching_no_mig(plans)
        if problems:
            raise MigPlanError("; ".join(problems))
        return NodePlan(self.label, plans, self._missing_devices(len(gpus)))

    def _missing_devices(self, count: int) -> list[str]:
        """Entries naming GPU indices this node lacks: mig-parted skips them silently, a lost GPU looks the same."""
        out = []
        for entry in self.entries:
            absent = [i for i in entry.devices or () if i >= count]
            if absent:
                out.append(
                    "{0} selects GPU {1}, which this node does not have (it has {2})".format(
                        entry.where, index_ranges(absent), "no GPU" if not count else "GPU " + index_ranges(range(count))
                    )
                )
        return out

    def _target(self, gpu: GpuState) -> GpuTarget | None:
        chosen = [e for e in self.entries if e.selects(gpu.index, gpu.pci_device_id, gpu.pci_subsystem_id)]
        if not chosen:
            return None
        if len({(e.mig_enabled, e.mig_devices) for e in chosen}) > 1:
            raise _gpu_error(
                gpu,
                "selected by {0}, which ask for different layouts; make their devices or device-filter disjoint".format(" and ".join(e.where for e in chosen)),
            )
        entry = chosen[0]
        if not gpu.mig_capable and entry.devices is None:
            # mig-parted leaves GPUs without MIG alone when an entry selects
            # all devices, so a config written for a whole node also works on
            # a node that mixes A100s and T4s.
            return GpuTarget(entry)
        return resolve_target(gpu, entry)

    def _entries_reaching_no_mig(self, plans: t.Sequence[GpuPlan]) -> list[str]:
        """An entry asking for MIG that reaches no MIG-capable GPU is a mistake, not a no-op."""
        problems = []
        for entry in self.entries:
            selected = [p.gpu for p in plans if p.target is not None and p.target.entry is entry]
            if entry.mig_enabled and selected and not any(g.mig_capable for g in selected):
                names = " / ".join(sorted({g.name for g in selected}))
                problems.append("{0} asks for MIG on GPU {1}, but {2} has no MIG support".format(entry.where, ", ".join(str(g.index) for g in selected), names))
        return problems

    def apply(self, node: NodePlan) -> MigApplier:
        applier = MigApplier(self.session, self.reader)
        applier.apply(node.plans)
        return applier

    def read_back(self, indices: t.Iterable[int]) -> dict[int, GpuState]:
        return {index: self.reader.gpu(index) for index in indices}
