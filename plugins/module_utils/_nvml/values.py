# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""What callers of the binding see instead of ctypes objects: opaque handles
(Device, GpuInstance, ComputeInstance) and frozen dataclasses of the answers.
"""

from __future__ import annotations

import typing as t
from dataclasses import asdict, dataclass

from .constants import ARCHITECTURE_NAMES


# --- values handed to callers -----------------------------------------------
class _Handle:
    """An opaque NVML handle; only the session that produced it may use it."""

    __slots__ = ("value",)

    def __init__(self, value: int | None) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.value == self.value  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.value))

    def __repr__(self) -> str:
        return "{0}(0x{1:x})".format(type(self).__name__, self.value or 0)


class Device(_Handle):
    """nvmlDevice_t: a physical GPU or a MIG device."""


class GpuInstance(_Handle):
    """nvmlGpuInstance_t."""


class ComputeInstance(_Handle):
    """nvmlComputeInstance_t."""


@dataclass(frozen=True)
class Placement:
    start: int
    size: int


@dataclass(frozen=True)
class PciInfo:
    bus_id: str
    bus_id_legacy: str
    domain: int
    bus: int
    device: int
    pci_device_id: int
    pci_subsystem_id: int


@dataclass(frozen=True)
class MemoryInfo:
    total: int
    free: int
    used: int
    reserved: int | None  # only the v2 struct reports it


@dataclass(frozen=True)
class _Mode:
    """A mode NVML reports twice: as it is now and as it will be once it takes effect."""

    current: bool
    pending: bool


class MigMode(_Mode):
    """nvmlDeviceGetMigMode; pending is the mode after the next GPU reset or reboot."""


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    used_memory: int | None
    gpu_instance_id: int | None
    compute_instance_id: int | None


@dataclass(frozen=True)
class _InstanceProfile:
    """What a GPU-instance and a compute-instance profile both report."""

    index: int  # NVML_*_INSTANCE_PROFILE_* value used to look it up
    id: int  # unique profile id: what placements/create/list take
    name: str | None  # only the V (v2 struct) call reports it
    slice_count: int
    instance_count: int
    multiprocessor_count: int


@dataclass(frozen=True)
class GpuInstanceProfile(_InstanceProfile):
    copy_engine_count: int
    decoder_count: int
    encoder_count: int
    jpeg_count: int
    ofa_count: int
    memory_size_mb: int
    is_p2p_supported: bool


@dataclass(frozen=True)
class ComputeInstanceProfile(_InstanceProfile):
    shared_copy_engine_count: int
    shared_decoder_count: int
    shared_encoder_count: int
    shared_jpeg_count: int
    shared_ofa_count: int


@dataclass(frozen=True)
class _InstanceInfo:
    id: int
    profile_id: int
    placement: Placement


class GpuInstanceInfo(_InstanceInfo):
    """nvmlGpuInstanceInfo_t, less the handles."""


class ComputeInstanceInfo(_InstanceInfo):
    """nvmlComputeInstanceInfo_t, less the handles."""


@dataclass(frozen=True)
class DeviceAttributes:
    """nvmlDeviceGetAttributes of a MIG device: what its compute instance gets of the GPU.

    The fields are nvmlDeviceAttributes_t's (structs._DeviceAttributes), in
    the struct's order: MigCalls.device_attributes fills them by position.
    """

    multiprocessor_count: int
    shared_copy_engine_count: int
    shared_decoder_count: int
    shared_encoder_count: int
    shared_jpeg_count: int
    shared_ofa_count: int
    gpu_instance_slice_count: int
    compute_instance_slice_count: int
    memory_size_mb: int


class EccMode(_Mode):
    """nvmlDeviceGetEccMode; pending is the mode after the next reboot."""


@dataclass(frozen=True)
class RemappedRows:
    correctable: int  # rows remapped for correctable errors
    uncorrectable: int  # rows remapped for uncorrectable errors
    pending: bool  # a remap waits for a GPU reset
    failure: bool  # a remap has failed at some time in the past


@dataclass(frozen=True)
class FieldValue:
    field_id: int
    scope_id: int
    nvml_return: int  # this field's own nvmlReturn_t; value is None unless NVML_SUCCESS
    value: int | float | None


@dataclass(frozen=True)
class FabricInfo:
    state: int  # NVML_GPU_FABRIC_STATE_*
    status: int  # nvmlReturn_t of the fabric probe; meaningful only when state is COMPLETED
    clique_id: int
    cluster_uuid: bytes  # NVML_GPU_FABRIC_UUID_LEN raw bytes
    health_mask: int | None  # only the versioned call reports it


def to_dict(value: t.Any) -> dict[str, t.Any]:
    """Plain dict of one of the dataclasses above (nested ones included)."""
    return asdict(value)


def architecture_name(arch: int | None) -> str:
    if arch is None:
        return "unknown"
    return ARCHITECTURE_NAMES.get(arch, "unknown")


def format_cuda_version(version: int) -> str:
    """12040 -> "12.4" (NVML_CUDA_DRIVER_VERSION_MAJOR/MINOR)."""
    return "{0}.{1}".format(version // 1000, (version % 1000) // 10)


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")
