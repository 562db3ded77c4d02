# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""What a GPU offers and has: its GPU-instance profiles, its GPU and compute
instances and the processes holding it, as plain values read once, and the
names mig-parted gives them. MigPlanError (a GPU cannot take a layout) lives here because
it carries the GpuState it is about.
"""

from __future__ import annotations

from dataclasses import dataclass

_MIB = 1024 * 1024
_GIB = 1024 * _MIB


class MigPlanError(Exception):
    """A GPU cannot take the layout asked for; the message says exactly why.

    `gpu` and `reason` (the message without the GPU) let a node's problems be
    grouped: eight GPUs refusing a layout for the same reason read as one line.
    """

    def __init__(self, message: str, gpu: GpuState | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.gpu = gpu
        self.reason = reason


def _gpu_error(gpu: GpuState, reason: str) -> MigPlanError:
    return MigPlanError("{0}: {1}".format(gpu.label, reason), gpu, reason)


@dataclass(frozen=True)
class Profile:
    """A GPU-instance profile as the GPU offers it."""

    id: int  # the profile id NVML's placement/create calls take (19 = 1g on 8-slice GPUs)
    name: str  # as NVML names it, e.g. 1g.5gb
    slices: int  # compute slices: the N of Ng
    instances: int  # at most this many on one GPU
    placements: tuple[tuple[int, int], ...]  # (start, size) in memory slices, sorted by start
    aliases: tuple[str, ...] = ()  # other names configs use for it (mig-parted derives names from memory)

    @property
    def size(self) -> int:
        return self.placements[0][1] if self.placements else 0

    def known_as(self, name: str) -> bool:
        return name == self.name or name in self.aliases

    def starts_text(self) -> str:
        starts = [start for start, _size in self.placements]
        if len(starts) > 2 and starts == list(range(starts[0], starts[-1] + 1)):
            text = "{0}-{1}".format(starts[0], starts[-1])
        else:
            text = ",".join(str(s) for s in starts)
        return "{{{0}}}:{1}".format(text, self.size)


@dataclass(frozen=True)
class ComputeInstanceState:
    id: int
    slices: int
    start: int


@dataclass(frozen=True)
class GpuInstanceState:
    id: int
    profile_id: int
    start: int
    size: int
    compute_instances: tuple[ComputeInstanceState, ...] = ()

    @property
    def compute(self) -> tuple[int, ...]:
        """Slice counts of the compute instances, largest first."""
        return tuple(sorted((ci.slices for ci in self.compute_instances), reverse=True))


@dataclass(frozen=True)
class ClientProcess:
    pid: int
    name: str
    used_memory_mib: int | None
    gpu_instance_id: int | None
    compute_instance_id: int | None

    def __str__(self) -> str:
        where = ""
        if self.gpu_instance_id is not None:
            where = ", GPU instance {0}".format(self.gpu_instance_id)
            if self.compute_instance_id is not None:
                where += " / compute instance {0}".format(self.compute_instance_id)
        memory = "" if self.used_memory_mib is None else ", {0} MiB".format(self.used_memory_mib)
        return "pid {0} ({1}{2}{3})".format(self.pid, self.name, where, memory)


@dataclass(frozen=True)
class GpuState:
    index: int
    uuid: str
    name: str
    pci_device_id: int
    pci_subsystem_id: int
    mig_capable: bool
    mig_enabled: bool = False
    mig_pending: bool = False  # the mode after the next reset/reboot
    profiles: tuple[Profile, ...] = ()
    profiles_from: str = "none"  # nvml | catalogue | none
    gpu_instances: tuple[GpuInstanceState, ...] = ()
    processes: tuple[ClientProcess, ...] = ()

    @property
    def label(self) -> str:
        return "GPU {0} ({1})".format(self.index, self.name)

    @property
    def compute_slices(self) -> int:
        return max((p.slices for p in self.profiles), default=0)

    @property
    def memory_slices(self) -> int:
        return max((s + z for p in self.profiles for s, z in p.placements), default=0)

    def profile_by_id(self, profile_id: int) -> Profile | None:
        return next((p for p in self.profiles if p.id == profile_id), None)

    def profile_named(self, name: str) -> Profile | None:
        return next((p for p in self.profiles if p.known_as(name)), None)

    def profile_name(self, profile_id: int) -> str:
        profile = self.profile_by_id(profile_id)
        return profile.name if profile else "profile {0}".format(profile_id)


def migparted_name(slices: int, profile_memory_mib: int, gpu_memory_bytes: int, suffix: str = "") -> str:
    """The name nvidia-mig-parted gives a profile: memory rounded up to eighths of the GPU.

    mig-parted (pkg/types/mig_profile.go) derives "<g>g.<n>gb" from memory
    instead of using the driver's name, so configs written for it can say
    7g.80gb where nvidia-smi shows 7g.79gb; accepting both keeps such configs
    working unchanged.
    """
    if gpu_memory_bytes <= 0:
        return ""
    fraction = -(-profile_memory_mib * _MIB * 8 // gpu_memory_bytes) / 8  # ceil to eighths
    total_gb = -(-gpu_memory_bytes // _GIB)
    return "{0}g.{1}gb{2}".format(slices, int(fraction * total_gb + 0.5), suffix)
