# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""The MIG calls of the binding: MIG mode, GPU-instance and compute-instance
profiles, placements, instances, and MIG device handles.
"""

from __future__ import annotations

import ctypes
import typing as t
from operator import attrgetter

from .constants import (
    _MAX_PROFILE_INDEX,
    NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
    NVML_DEVICE_MIG_DISABLE,
    NVML_DEVICE_MIG_ENABLE,
    NVML_ERROR_INVALID_ARGUMENT,
    NVML_ERROR_NOT_FOUND,
    NVML_ERROR_NOT_SUPPORTED,
    NvmlError,
)
from .library import NvmlLibrary
from .structs import (
    _ComputeInstanceInfo,
    _ComputeInstancePlacement,
    _ComputeInstanceProfileInfo,
    _ComputeInstanceProfileInfo_v2,
    _DeviceAttributes,
    _GpuInstanceInfo,
    _GpuInstancePlacement,
    _GpuInstanceProfileInfo,
    _GpuInstanceProfileInfo_v2,
    nvmlComputeInstanceProfileInfo_v2,
    nvmlGpuInstanceProfileInfo_v2,
)
from .values import (
    ComputeInstance,
    ComputeInstanceInfo,
    ComputeInstanceProfile,
    Device,
    DeviceAttributes,
    GpuInstance,
    GpuInstanceInfo,
    GpuInstanceProfile,
    MigMode,
    Placement,
    _text,
)

# Each profile kind's own fields, read from either struct version (the fields
# both kinds share are read in MigCalls._versioned_profile).
_PROFILE_FIELDS: dict[t.Any, dict[str, t.Callable[[t.Any], t.Any]]] = {
    GpuInstanceProfile: {
        "copy_engine_count": attrgetter("copyEngineCount"),
        "decoder_count": attrgetter("decoderCount"),
        "encoder_count": attrgetter("encoderCount"),
        "jpeg_count": attrgetter("jpegCount"),
        "ofa_count": attrgetter("ofaCount"),
        "memory_size_mb": attrgetter("memorySizeMB"),
        "is_p2p_supported": lambda info: bool(info.isP2pSupported),
    },
    ComputeInstanceProfile: {
        "shared_copy_engine_count": attrgetter("sharedCopyEngineCount"),
        "shared_decoder_count": attrgetter("sharedDecoderCount"),
        "shared_encoder_count": attrgetter("sharedEncoderCount"),
        "shared_jpeg_count": attrgetter("sharedJpegCount"),
        "shared_ofa_count": attrgetter("sharedOfaCount"),
    },
}


class MigCalls(NvmlLibrary):
    """NVML's MIG entry points, one method per call.

    Grouped by what they do, each GPU-instance call next to its
    compute-instance twin: the two go through one of the helpers below.
    """

    # -- the shapes the GI and CI calls share ------------------------------------------
    def _versioned_profile(
        self,
        kind: t.Any,
        name: str,
        index: int,
        args: tuple[t.Any, ...],
        info_v2: t.Any,
        info_v1: t.Any,
    ) -> t.Any:
        """A profile read through NVML's V call or its v1 fallback (only the V
        struct has a name), as `kind`; None when the GPU or GPU instance lacks
        the profile."""
        try:
            used = self._call_with_fallback(name, (*args, ctypes.byref(info_v2)), (*args, ctypes.byref(info_v1)))
        except NvmlError as err:
            if err.code == NVML_ERROR_NOT_SUPPORTED:
                return None
            raise
        info = info_v2 if used == name else info_v1
        return kind(
            index=index,
            id=info.id,
            name=_text(info_v2.name) if info is info_v2 else None,
            slice_count=info.sliceCount,
            instance_count=info.instanceCount,
            multiprocessor_count=info.multiprocessorCount,
            **{field: read(info) for field, read in _PROFILE_FIELDS[kind].items()},
        )

    @staticmethod
    def _profiles_by_index(read: t.Callable[[int], t.Any]) -> list[t.Any]:
        """Every profile `read(index)` finds, in index order: NVML answers
        INVALID_ARGUMENT past the end of its profile table."""
        profiles = []
        for index in range(_MAX_PROFILE_INDEX):
            try:
                profile = read(index)
            except NvmlError as err:
                if err.code == NVML_ERROR_INVALID_ARGUMENT:
                    break
                raise
            if profile is not None:
                profiles.append(profile)
        return profiles

    def _possible_placements(self, name: str, owner: t.Any, profile_id: int, struct: t.Any) -> list[Placement]:
        """NVML's two-call pattern: ask the count, then fill a buffer of that size."""
        count = ctypes.c_uint(0)
        self._call(name, owner.value, profile_id, None, ctypes.byref(count))
        if count.value == 0:
            return []
        placements = (struct * count.value)()
        self._call(name, owner.value, profile_id, placements, ctypes.byref(count))
        return [Placement(p.start, p.size) for p in placements[: count.value]]

    def _instances(self, name: str, owner: t.Any, profile: t.Any, wrap: t.Callable[[t.Any], t.Any]) -> list[t.Any]:
        """Existing instances of one profile (the buffer is sized by the profile)."""
        size = max(profile.instance_count, 1)
        handles = (ctypes.c_void_p * size)()
        count = ctypes.c_uint(size)
        self._call(name, owner.value, profile.id, handles, ctypes.byref(count))
        return [wrap(handles[i]) for i in range(count.value)]

    def _instance_info(self, kind: t.Any, name: str, instance: t.Any, info: t.Any) -> t.Any:
        self._call(name, instance.value, ctypes.byref(info))
        return kind(id=info.id, profile_id=info.profileId, placement=Placement(info.placement.start, info.placement.size))

    def _create(self, name: str, owner: t.Any, profile_id: int, placement: Placement | None, struct: t.Any) -> t.Any:
        """Create at a placement (no fragmentation surprises) through the
        ...WithPlacement call, or without one wherever the driver chooses."""
        if placement is None:
            return self._handle(name, owner.value, profile_id)
        where = struct(placement.start, placement.size)
        return self._handle(name + "WithPlacement", owner.value, profile_id, ctypes.byref(where))

    # -- MIG mode ------------------------------------------------------------------
    def device_mig_mode(self, device: Device) -> MigMode:
        current, pending = ctypes.c_uint(0), ctypes.c_uint(0)
        self._call("nvmlDeviceGetMigMode", device.value, ctypes.byref(current), ctypes.byref(pending))
        return MigMode(current=current.value == NVML_DEVICE_MIG_ENABLE, pending=pending.value == NVML_DEVICE_MIG_ENABLE)

    def set_mig_mode(self, device: Device, enabled: bool) -> int:
        """Request a MIG mode; returns NVML's activationStatus code.

        NVML_SUCCESS means the mode is active now; RESET_REQUIRED means it is
        pending until a GPU reset or reboot; IN_USE means clients kept the
        driver from unbinding the GPU. Re-query handles and the minor number
        afterwards: NVML may have reset the device.
        """
        status = ctypes.c_int(0)
        mode = NVML_DEVICE_MIG_ENABLE if enabled else NVML_DEVICE_MIG_DISABLE
        self._call("nvmlDeviceSetMigMode", device.value, mode, ctypes.byref(status))
        return status.value

    # -- profiles: a GPU's GPU-instance profiles, a GPU instance's compute-instance profiles ---
    def gpu_instance_profile(self, device: Device, index: int) -> GpuInstanceProfile | None:
        """Profile at NVML_GPU_INSTANCE_PROFILE_* `index`; None when the GPU lacks it.

        Raises NvmlError(INVALID_ARGUMENT) past the end of the table.
        """
        return self._versioned_profile(
            GpuInstanceProfile,
            "nvmlDeviceGetGpuInstanceProfileInfoV",
            index,
            (device.value, index),
            _GpuInstanceProfileInfo_v2(version=nvmlGpuInstanceProfileInfo_v2),
            _GpuInstanceProfileInfo(),
        )

    def gpu_instance_profiles(self, device: Device) -> list[GpuInstanceProfile]:
        """All GPU-instance profiles the device offers, in index order."""
        return self._profiles_by_index(lambda index: self.gpu_instance_profile(device, index))

    def compute_instance_profile(
        self,
        gpu_instance: GpuInstance,
        index: int,
        engine_profile: int = NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
    ) -> ComputeInstanceProfile | None:
        """CI profile at NVML_COMPUTE_INSTANCE_PROFILE_* `index`; None when absent."""
        return self._versioned_profile(
            ComputeInstanceProfile,
            "nvmlGpuInstanceGetComputeInstanceProfileInfoV",
            index,
            (gpu_instance.value, index, engine_profile),
            _ComputeInstanceProfileInfo_v2(version=nvmlComputeInstanceProfileInfo_v2),
            _ComputeInstanceProfileInfo(),
        )

    def compute_instance_profiles(self, gpu_instance: GpuInstance) -> list[ComputeInstanceProfile]:
        return self._profiles_by_index(lambda index: self.compute_instance_profile(gpu_instance, index))

    def full_compute_instance_profile(self, gpu_instance: GpuInstance) -> ComputeInstanceProfile:
        """The CI profile spanning the whole GI: what `nvidia-smi mig -cgi ... -C` creates."""
        profiles = self.compute_instance_profiles(gpu_instance)
        if not profiles:
            raise NvmlError(NVML_ERROR_NOT_SUPPORTED, "nvmlGpuInstanceGetComputeInstanceProfileInfoV", "no compute-instance profile")
        return max(profiles, key=lambda p: (p.slice_count, -p.index))

    # -- where a profile fits: its possible placements and remaining capacity --------
    def gpu_instance_possible_placements(self, device: Device, profile_id: int) -> list[Placement]:
        return self._possible_placements("nvmlDeviceGetGpuInstancePossiblePlacements_v2", device, profile_id, _GpuInstancePlacement)

    def compute_instance_possible_placements(self, gpu_instance: GpuInstance, profile_id: int) -> list[Placement]:
        return self._possible_placements("nvmlGpuInstanceGetComputeInstancePossiblePlacements", gpu_instance, profile_id, _ComputeInstancePlacement)

    def gpu_instance_remaining_capacity(self, device: Device, profile_id: int) -> int:
        return self._uint("nvmlDeviceGetGpuInstanceRemainingCapacity", device.value, profile_id)

    def compute_instance_remaining_capacity(self, gpu_instance: GpuInstance, profile_id: int) -> int:
        return self._uint("nvmlGpuInstanceGetComputeInstanceRemainingCapacity", gpu_instance.value, profile_id)

    # -- instances: list, look up, read, create, destroy -----------------------------
    def gpu_instances(self, device: Device, profile: GpuInstanceProfile) -> list[GpuInstance]:
        return self._instances("nvmlDeviceGetGpuInstances", device, profile, GpuInstance)

    def compute_instances(self, gpu_instance: GpuInstance, profile: ComputeInstanceProfile) -> list[ComputeInstance]:
        return self._instances("nvmlGpuInstanceGetComputeInstances", gpu_instance, profile, ComputeInstance)

    def gpu_instance_by_id(self, device: Device, gpu_instance_id: int) -> GpuInstance:
        return GpuInstance(self._handle("nvmlDeviceGetGpuInstanceById", device.value, gpu_instance_id))

    def compute_instance_by_id(self, gpu_instance: GpuInstance, compute_instance_id: int) -> ComputeInstance:
        return ComputeInstance(
            self._handle(
                "nvmlGpuInstanceGetComputeInstanceById",
                gpu_instance.value,
                compute_instance_id,
            )
        )

    def gpu_instance_info(self, gpu_instance: GpuInstance) -> GpuInstanceInfo:
        return self._instance_info(GpuInstanceInfo, "nvmlGpuInstanceGetInfo", gpu_instance, _GpuInstanceInfo())

    def compute_instance_info(self, compute_instance: ComputeInstance) -> ComputeInstanceInfo:
        return self._instance_info(ComputeInstanceInfo, "nvmlComputeInstanceGetInfo_v2", compute_instance, _ComputeInstanceInfo())

    def create_gpu_instance(self, device: Device, profile_id: int, placement: Placement | None = None) -> GpuInstance:
        """Create a GPU instance, at a placement when one is given."""
        return GpuInstance(self._create("nvmlDeviceCreateGpuInstance", device, profile_id, placement, _GpuInstancePlacement))

    def create_compute_instance(
        self,
        gpu_instance: GpuInstance,
        profile_id: int | None = None,
        placement: Placement | None = None,
    ) -> ComputeInstance:
        """Create a compute instance; profile_id None = the full-size default CI."""
        if profile_id is None:
            profile_id = self.full_compute_instance_profile(gpu_instance).id
        return ComputeInstance(self._create("nvmlGpuInstanceCreateComputeInstance", gpu_instance, profile_id, placement, _ComputeInstancePlacement))

    def destroy_gpu_instance(self, gpu_instance: GpuInstance) -> None:
        """Destroy a GPU instance; its compute instances must be destroyed first (else IN_USE)."""
        self._call("nvmlGpuInstanceDestroy", gpu_instance.value)

    def destroy_compute_instance(self, compute_instance: ComputeInstance) -> None:
        self._call("nvmlComputeInstanceDestroy", compute_instance.value)

    # -- MIG devices -----------------------------------------------------------------------
    def max_mig_device_count(self, device: Device) -> int:
        return self._uint("nvmlDeviceGetMaxMigDeviceCount", device.value)

    def mig_device_by_index(self, device: Device, index: int) -> Device | None:
        """MIG device at `index`, or None: the index space is sparse (NOT_FOUND)."""
        try:
            return Device(self._handle("nvmlDeviceGetMigDeviceHandleByIndex", device.value, index))
        except NvmlError as err:
            if err.code == NVML_ERROR_NOT_FOUND:
                return None
            raise

    def mig_devices(self, device: Device) -> list[Device]:
        devices = []
        for index in range(self.max_mig_device_count(device)):
            mig = self.mig_device_by_index(device, index)
            if mig is not None:
                devices.append(mig)
        return devices

    def device_attributes(self, device: Device) -> DeviceAttributes:
        attrs = _DeviceAttributes()
        self._call_with_fallback("nvmlDeviceGetAttributes_v2", (device.value, ctypes.byref(attrs)), (device.value, ctypes.byref(attrs)))
        # DeviceAttributes has the struct's fields in the struct's order.
        return DeviceAttributes(*(getattr(attrs, field) for field, _ctype in _DeviceAttributes._fields_))

    def mig_device_gpu_instance_id(self, mig_device: Device) -> int:
        return self._uint("nvmlDeviceGetGpuInstanceId", mig_device.value)

    def mig_device_compute_instance_id(self, mig_device: Device) -> int:
        return self._uint("nvmlDeviceGetComputeInstanceId", mig_device.value)
