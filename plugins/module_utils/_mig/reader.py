# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""Reading GPUs through NVML into GpuState values: MIG mode, the GPU-instance
profiles and placements the GPU really offers (or the built-in table while MIG
is off), its GPU and compute instances and the processes holding it.
"""

from __future__ import annotations

import os
import typing as t

from .._nvml.constants import NVML_ERROR_NOT_SUPPORTED, NvmlError
from .._nvml.session import NvmlSession
from .._nvml.values import Device, GpuInstance, GpuInstanceProfile, Placement
from .profiles import known_model
from .state import _MIB, ClientProcess, ComputeInstanceState, GpuInstanceState, GpuState, Profile, migparted_name

# GPU-instance profile index -> the attribute suffix of its name, for drivers
# whose v1 profile info carries no name.
_INDEX_SUFFIX = {7: "+me", 8: "+me", 10: "+gfx", 11: "+gfx", 12: "+gfx", 13: "-me", 14: "-me", 15: "+me.all", 16: "+me.all", 17: "+gfx"}


def _process_name(pid: int, proc_root: str) -> str:
    try:
        with open(os.path.join(proc_root, str(pid), "comm"), encoding="utf-8") as handle:
            return handle.read().strip() or "unknown"
    except OSError:
        return "not visible here"


class NvmlReader:
    """Reads GpuState through NVML; every MIG call goes through the _nvml/ binding."""

    def __init__(self, session: NvmlSession, proc_root: str = "/proc") -> None:
        self.s = session
        self.proc_root = proc_root

    def device(self, index: int) -> Device:
        return self.s.device_by_index(index)

    def gpus(self) -> list[GpuState]:
        return [self.gpu(index) for index in range(self.s.device_count())]

    def gpu(self, index: int) -> GpuState:
        s = self.s
        dev = s.device_by_index(index)
        pci = s.device_pci_info(dev)
        base: dict[str, t.Any] = dict(
            index=index,
            uuid=s.device_uuid(dev),
            name=s.device_name(dev),
            pci_device_id=pci.pci_device_id,
            pci_subsystem_id=pci.pci_subsystem_id,
            processes=self._processes(dev),
        )
        try:
            mode = s.device_mig_mode(dev)
        except NvmlError as err:
            if err.code != NVML_ERROR_NOT_SUPPORTED:
                raise
            return GpuState(mig_capable=False, **base)
        # NVML's own answer first, with MIG off too: driver 580 on an H100
        # described every profile and placement with MIG disabled
        # (tests/device/h100-reading-2026-11-23.json), and it knows GPUs the
        # built-in table does not. Drivers that answer NOT_SUPPORTED with MIG
        # off (every profile) leave the table as the fallback.
        infos = s.gpu_instance_profiles(dev)
        if not mode.current and not infos:
            profiles = self._catalogue_profiles(dev, pci.pci_device_id)
            return GpuState(
                mig_capable=True, mig_enabled=False, mig_pending=mode.pending, profiles=profiles, profiles_from="catalogue" if profiles else "none", **base
            )
        total = s.device_memory(dev).total
        profiles = tuple(self._profile(info, s.gpu_instance_possible_placements(dev, info.id), total) for info in infos)
        return GpuState(
            mig_capable=True,
            mig_enabled=bool(mode.current),
            mig_pending=mode.pending,
            profiles=profiles,
            profiles_from="nvml",
            gpu_instances=self._gpu_instances(dev, infos) if mode.current else (),
            **base,
        )

    @staticmethod
    def _profile(info: GpuInstanceProfile, placements: list[Placement], total_memory: int) -> Profile:
        name = info.name or ""
        if name.startswith("MIG "):
            name = name[4:]
        suffix = name[name.index("gb") + 2 :] if "gb" in name else _INDEX_SUFFIX.get(info.index, "")
        derived = migparted_name(info.slice_count, info.memory_size_mb, total_memory, suffix)
        return Profile(
            id=info.id,
            name=name or derived,
            slices=info.slice_count,
            instances=info.instance_count,
            placements=tuple(sorted((p.start, p.size) for p in placements)),
            aliases=(derived,) if name and derived and derived != name else (),
        )

    def _catalogue_profiles(self, dev: Device, device_id: int) -> tuple[Profile, ...]:
        model = known_model(device_id)
        if model is None:
            return ()
        profiles = []
        for (profile_id, slices, instances, size, starts), names in zip(model.geometry, model.names):
            # Placements are a hardware fact NVML reports with MIG off too;
            # the catalogue's own are the fallback where it does not.
            try:
                placements = tuple(sorted((p.start, p.size) for p in self.s.gpu_instance_possible_placements(dev, profile_id)))
            except NvmlError as err:
                if err.code != NVML_ERROR_NOT_SUPPORTED:
                    raise
                placements = tuple((s, size) for s in starts)
            name, *aliases = names.split("|")
            profiles.append(Profile(profile_id, name, slices, instances, placements, tuple(aliases)))
        return tuple(profiles)

    def _gpu_instances(self, dev: Device, infos: t.Sequence[GpuInstanceProfile]) -> tuple[GpuInstanceState, ...]:
        s = self.s
        found = []
        for info in infos:
            for handle in s.gpu_instances(dev, info):
                gi = s.gpu_instance_info(handle)
                found.append(GpuInstanceState(gi.id, gi.profile_id, gi.placement.start, gi.placement.size, self._compute_instances(handle)))
        return tuple(sorted(found, key=lambda gi: gi.id))

    def _compute_instances(self, handle: GpuInstance) -> tuple[ComputeInstanceState, ...]:
        s = self.s
        found = []
        for profile in s.compute_instance_profiles(handle):
            for ci in s.compute_instances(handle, profile):
                info = s.compute_instance_info(ci)
                found.append(ComputeInstanceState(info.id, profile.slice_count, info.placement.start))
        return tuple(sorted(found, key=lambda ci: ci.id))

    def _processes(self, dev: Device) -> tuple[ClientProcess, ...]:
        try:
            processes = self.s.device_compute_processes(dev)
        except NvmlError as err:
            if err.code != NVML_ERROR_NOT_SUPPORTED:
                raise
            return ()
        return tuple(
            ClientProcess(
                pid=p.pid,
                name=_process_name(p.pid, self.proc_root),
                used_memory_mib=None if p.used_memory is None else p.used_memory // _MIB,
                gpu_instance_id=p.gpu_instance_id,
                compute_instance_id=p.compute_instance_id,
            )
            for p in sorted(processes, key=lambda p: p.pid)
        )
