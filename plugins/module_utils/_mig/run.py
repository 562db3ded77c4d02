# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""A whole run of one label, as the mig_config module and the gpufleet-mig boot
command carry it out: plan, refuse while clients hold the GPUs, apply, reset
every waiting GPU at once, finish.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field

from .._nvml.session import NvmlSession
from .apply import MigApplyError, MigController, NodePlan
from .config import ConfigEntry
from .export import index_ranges
from .hooks import HookRunner, MigHookError
from .plan import GpuPlan
from .state import GpuState

# Resets the given GPUs in one call; returns (all reset, what the tool said).
ResetGpus = t.Callable[[t.Sequence[int]], t.Tuple[bool, str]]


class MigClientsError(Exception):
    """Processes hold GPUs that the run must change or reset; nothing was touched."""

    def __init__(self, clients: list[str], before_reset: bool = False) -> None:
        super().__init__(
            (
                "a GPU client attached after the MIG mode change was requested, so no GPU was reset and the new mode stays pending: "
                if before_reset
                else "GPU clients are still attached, so nothing was changed: "
            )
            + "; ".join(clients)
        )
        self.clients = clients
        self.before_reset = before_reset


@dataclass
class RunResult:
    """What one run did, for the module and the boot command alike."""

    found: NodePlan  # the node as first read, and the plan made from it
    done: list[str] = field(default_factory=list)
    plans: list[GpuPlan] = field(default_factory=list)  # as carried out, in GPU order
    reset: list[int] = field(default_factory=list)  # GPUs a reset was asked for
    reset_output: str = ""
    waiting: list[int] = field(default_factory=list)  # GPUs still waiting for a reset or reboot at the end
    states: dict[int, GpuState] = field(default_factory=dict)  # read back at the end, per changed GPU


class MigResetError(Exception):
    """The GPU reset failed; the GPUs that did reset were finished, the others are as they were."""

    def __init__(self, message: str, result: RunResult) -> None:
        super().__init__(message)
        self.result = result


class MigRun:
    """One label on the node, carried out so that no GPU is left half-done.

    mig-parted's order: check everything first, then change. Every GPU the run
    will change *or reset* must be free of processes before the first NVML
    change; the mode changes are made; every GPU whose new mode waits for a
    reset is reset in one call; then the layout is finished on every GPU that
    did reset. A reset that fails part-way (a process that started after the
    check) still gets the GPUs that reset finished, and leaves the others in
    their old mode with the new one pending -- never MIG on without a layout.

    NVML is closed around the reset: the reset tool must see a GPU that no
    NVML client of ours holds, and the driver state is re-read after it.
    """

    def __init__(self, entries: t.Sequence[ConfigEntry], label: str, open_session: t.Callable[[], NvmlSession], proc_root: str = "/proc") -> None:
        self.entries = list(entries)
        self.label = label
        self.open_session = open_session
        self.proc_root = proc_root

    def _with_controller(self, work: t.Callable[[MigController], t.Any]) -> t.Any:
        session = self.open_session()
        try:
            return work(MigController(self.entries, self.label, session, self.proc_root))
        finally:
            session.shutdown()

    def plan(self) -> NodePlan:
        return self._with_controller(lambda c: c.plan())

    def apply(self, reset: ResetGpus | None = None, hooks: HookRunner | None = None) -> RunResult:
        """Raises MigPlanError, MigClientsError (nothing touched), MigApplyError, MigResetError, MigHookError or
        NvmlError. apply-exit runs whatever happened; its failure counts only when nothing else failed."""
        if hooks is None:
            return self._apply(reset)
        try:
            hooks.run("apply-start")
            # The hooks before a change see what will change, and may stop
            # the GPU's clients: the run reads the GPUs again after them.
            node = self.plan()
            if any(p.set_mode is not None for p in node.plans) or (reset is not None and node.reset_gpus):
                hooks.run("pre-apply-mode")
            if any(p.destroy or p.recompute or p.create for p in node.plans):
                hooks.run("pre-apply-config")
            result = self._apply(reset)
        except BaseException:
            try:
                hooks.run("apply-exit")
            except MigHookError:
                pass  # the first failure is the one to report
            raise
        hooks.run("apply-exit")
        return result

    def _apply(self, reset: ResetGpus | None) -> RunResult:
        result: RunResult = self._with_controller(lambda c: self._first_pass(c, reset is not None))
        if not result.waiting or reset is None:
            return result
        result.reset = list(result.waiting)
        all_reset, result.reset_output = reset(result.reset)
        self._with_controller(lambda c: self._finish(c, result))
        if not all_reset or result.waiting:
            finished = [i for i in result.reset if i not in result.waiting]
            raise MigResetError(
                "the GPU reset failed{0}: {1}. {2}GPU {3} {4} as {5} before the reset, with the new MIG mode pending until a reset or reboot".format(
                    " for GPU " + index_ranges(result.waiting) if result.waiting else "",
                    " ".join(result.reset_output.split()) or "no output",
                    "The layout was finished on GPU {0}, which did reset. ".format(index_ranges(finished)) if finished else "",
                    index_ranges(result.waiting),
                    "stay" if len(result.waiting) > 1 else "stays",
                    "they were" if len(result.waiting) > 1 else "it was",
                ),
                result,
            )
        return result

    def _first_pass(self, controller: MigController, resetting: bool) -> RunResult:
        node = controller.plan()
        result = RunResult(node)
        clients = node.clients_in_the_way(resetting)
        if clients:
            raise MigClientsError(clients)
        if not node.changed:
            result.plans = list(node.plans)
            result.waiting = node.reset_gpus
            return result
        applier = controller.apply(node)
        result.done, result.plans = list(applier.done), list(applier.plans)
        result.waiting = sorted(set(node.reset_gpus) | set(applier.reset_gpus))
        result.states = controller.read_back(p.gpu.index for p in node.plans if p.changed)
        if resetting and result.waiting:
            # A process that attached while the modes were changed would make
            # the reset fail part-way; look once more before resetting.
            late = [(gpu, gpu.processes) for gpu in (controller.reader.gpu(i) for i in result.waiting) if gpu.processes]
            if late:
                raise MigClientsError(
                    ["{0} ({1}): {2}".format(gpu.label, gpu.uuid, ", ".join(str(p) for p in found)) for gpu, found in late], before_reset=True
                )
        return result

    def _finish(self, controller: MigController, result: RunResult) -> None:
        node = controller.plan()
        try:
            applier = controller.apply(node)
        except MigApplyError as err:
            err.done[:0] = result.done
            raise
        result.done += applier.done
        by_index = {p.gpu.index: p for p in applier.plans}
        result.plans = [by_index.get(p.gpu.index, p) if p.gpu.index in result.reset else p for p in result.plans]
        result.waiting = sorted(set(node.reset_gpus) | set(applier.reset_gpus))
        result.states.update(controller.read_back(result.reset))
