# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The MIG calls of the binding: MIG mode, GPU-instance and compute-instance
profiles, placements, instances, and MIG device handles.
"""

from __future__ import annotations

import ctypes
import typing as t

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


class MigCalls(NvmlLibrary):
    """NVML's MIG entry points, one method per call."""

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

    # -- GPU-instance profiles -------------------------------------------------------
    def gpu_instance_profile(self, device: Device, index: int) -> GpuInstanceProfile | None:
        """Profile at NVML_GPU_INSTANCE_PROFILE_* `index`; None when the GPU lacks it.

        Raises NvmlError(INVALID_ARGUMENT) past the end of the table.
        """
        info_v2 = _GpuInstanceProfileInfo_v2(version=nvmlGpuInstanceProfileInfo_v2)
        info_v1 = _GpuInstanceProfileInfo()
        try:
            used = self._call_with_fallback(
                "nvmlDeviceGetGpuInstanceProfileInfoV",
                (device.value, index, ctypes.byref(info_v2)),
                (device.value, index, ctypes.byref(info_v1)),
            )
        except NvmlError as err:
            if err.code == NVML_ERROR_NOT_SUPPORTED:
                return None
            raise
        info: t.Any = info_v2 if used == "nvmlDeviceGetGpuInstanceProfileInfoV" else info_v1
        return GpuInstanceProfile(
            index=index,
            id=info.id,
            name=_text(info_v2.name) if info is info_v2 else None,
            slice_count=info.sliceCount,
            instance_count=info.instanceCount,
            multiprocessor_count=info.multiprocessorCount,
            copy_engine_count=info.copyEngineCount,
            decoder_count=info.decoderCount,
            encoder_count=info.encoderCount,
            jpeg_count=info.jpegCount,
            ofa_count=info.ofaCount,
            memory_size_mb=info.memorySizeMB,
            is_p2p_supported=bool(info.isP2pSupported),
        )

    def gpu_instance_profiles(self, device: Device) -> list[GpuInstanceProfile]:
        """All GPU-instance profiles the device offers, in index order."""
        profiles = []
        for index in range(_MAX_PROFILE_INDEX):
            try:
                profile = self.gpu_instance_profile(device, index)
            except NvmlError as err:
                if err.code == NVML_ERROR_INVALID_ARGUMENT:
                    break
                raise
            if profile is not None:
                profiles.append(profile)
        return profiles

    def gpu_instance_possible_placements(self, device: Device, profile_id: int) -> list[Placement]:
        name = "nvmlDeviceGetGpuInstancePossiblePlacements_v2"
        count = ctypes.c_uint(0)
        self._call(name, device.value, profile_id, None, ctypes.byref(count))
        if count.value == 0:
            return []
        placements = (_GpuInstancePlacement * count.value)()
        self._call(name, device.value, profile_id, placements, ctypes.byref(count))
        return [Placement(p.start, p.size) for p in placements[: count.value]]

    def gpu_instance_remaining_capacity(self, device: Device, profile_id: int) -> int:
        return self._uint("nvmlDeviceGetGpuInstanceRemainingCapacity", device.value, profile_id)

    # -- GPU instances -----------------------------------------------------------------
    def gpu_instances(self, device: Device, profile: GpuInstanceProfile) -> list[GpuInstance]:
        """Existing GPU instances of one profile (the buffer is sized by the profile)."""
        size = max(profile.instance_count, 1)
        handles = (ctypes.c_void_p * size)()
        count = ctypes.c_uint(size)
        self._call("nvmlDeviceGetGpuInstances", device.value, profile.id, handles, ctypes.byref(count))
        return [GpuInstance(handles[i]) for i in range(count.value)]

    def gpu_instance_by_id(self, device: Device, gpu_instance_id: int) -> GpuInstance:
        return GpuInstance(self._handle("nvmlDeviceGetGpuInstanceById", device.value, gpu_instance_id))

    def gpu_instance_info(self, gpu_instance: GpuInstance) -> GpuInstanceInfo:
        info = _GpuInstanceInfo()
        self._call("nvmlGpuInstanceGetInfo", gpu_instance.value, ctypes.byref(info))
        return GpuInstanceInfo(
            id=info.id,
            profile_id=info.profileId,
            placement=Placement(info.placement.start, info.placement.size),
        )

    def create_gpu_instance(self, device: Device, profile_id: int, placement: Placement | None = None) -> GpuInstance:
        """Create a GPU instance; with a placement (preferred: no fragmentation
        surprises) or, without one, wherever the driver chooses."""
        if placement is None:
            return GpuInstance(self._handle("nvmlDeviceCreateGpuInstance", device.value, profile_id))
        where = _GpuInstancePlacement(placement.start, placement.size)
        return GpuInstance(
            self._handle("nvmlDeviceCreateGpuInstanceWithPlacement", device.value, profile_id, ctypes.byref(where)),
        )

    def destroy_gpu_instance(self, gpu_instance: GpuInstance) -> None:
        """Destroy a GPU instance; its compute instances must be destroyed first (else IN_USE)."""
        self._call("nvmlGpuInstanceDestroy", gpu_instance.value)

    # -- compute-instance profiles and compute instances -----------------------------
    def compute_instance_profile(
        self,
        gpu_instance: GpuInstance,
        index: int,
        engine_profile: int = NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
    ) -> ComputeInstanceProfile | None:
        """CI profile at NVML_COMPUTE_INSTANCE_PROFILE_* `index`; None when absent."""
        info_v2 = _ComputeInstanceProfileInfo_v2(version=nvmlComputeInstanceProfileInfo_v2)
        info_v1 = _ComputeInstanceProfileInfo()
        try:
            used = self._call_with_fallback(
                "nvmlGpuInstanceGetComputeInstanceProfileInfoV",
                (gpu_instance.value, index, engine_profile, ctypes.byref(info_v2)),
                (gpu_instance.value, index, engine_profile, ctypes.byref(info_v1)),
            )
        except NvmlError as err:
            if err.code == NVML_ERROR_NOT_SUPPORTED:
                return None
            raise
        info: t.Any = info_v2 if used == "nvmlGpuInstanceGetComputeInstanceProfileInfoV" else info_v1
        return ComputeInstanceProfile(
            index=index,
            id=info.id,
            name=_text(info_v2.name) if info is info_v2 else None,
            slice_count=info.sliceCount,
            instance_count=info.instanceCount,
            multiprocessor_count=info.multiprocessorCount,
            shared_copy_engine_count=info.sharedCopyEngineCount,
            shared_decoder_count=info.sharedDecoderCount,
            shared_encoder_count=info.sharedEncoderCount,
            shared_jpeg_count=info.sharedJpegCount,
            shared_ofa_count=info.sharedOfaCount,
        )

    def compute_instance_profiles(self, gpu_instance: GpuInstance) -> list[ComputeInstanceProfile]:
        profiles = []
        for index in range(_MAX_PROFILE_INDEX):
            try:
                profile = self.compute_instance_profile(gpu_instance, index)
            except NvmlError as err:
                if err.code == NVML_ERROR_INVALID_ARGUMENT:
                    break
                raise
            if profile is not None:
                profiles.append(profile)
        return profiles

    def full_compute_instance_profile(self, gpu_instance: GpuInstance) -> ComputeInstanceProfile:
        """The CI profile spanning the whole GI: what `nvidia-smi mig -cgi ... -C` creates."""
        profiles = self.compute_instance_profiles(gpu_instance)
        if not profiles:
            raise NvmlError(NVML_ERROR_NOT_SUPPORTED, "nvmlGpuInstanceGetComputeInstanceProfileInfoV", "no compute-instance profile")
        return max(profiles, key=lambda p: (p.slice_count, -p.index))

    def compute_instance_possible_placements(self, gpu_instance: GpuInstance, profile_id: int) -> list[Placement]:
        name = "nvmlGpuInstanceGetComputeInstancePossiblePlacements"
        count = ctypes.c_uint(0)
        self._call(name, gpu_instance.value, profile_id, None, ctypes.byref(count))
        if count.value == 0:
            return []
        placements = (_ComputeInstancePlacement * count.value)()
        self._call(name, gpu_instance.value, profile_id, placements, ctypes.byref(count))
        return [Placement(p.start, p.size) for p in placements[: count.value]]

    def compute_instance_remaining_capacity(self, gpu_instance: GpuInstance, profile_id: int) -> int:
        return self._uint("nvmlGpuInstanceGetComputeInstanceRemainingCapacity", gpu_instance.value, profile_id)

    def compute_instances(self, gpu_instance: GpuInstance, profile: ComputeInstanceProfile) -> list[ComputeInstance]:
        size = max(profile.instance_count, 1)
        handles = (ctypes.c_void_p * size)()
        count = ctypes.c_uint(size)
        self._call("nvmlGpuInstanceGetComputeInstances", gpu_instance.value, profile.id, handles, ctypes.byref(count))
        return [ComputeInstance(handles[i]) for i in range(count.value)]

    def compute_instance_by_id(self, gpu_instance: GpuInstance, compute_instance_id: int) -> ComputeInstance:
        return ComputeInstance(
            self._handle(
                "nvmlGpuInstanceGetComputeInstanceById",
                gpu_instance.value,
                compute_instance_id,
            )
        )

    def compute_instance_info(self, compute_instance: ComputeInstance) -> ComputeInstanceInfo:
        info = _ComputeInstanceInfo()
        self._call("nvmlComputeInstanceGetInfo_v2", compute_instance.value, ctypes.byref(info))
        return ComputeInstanceInfo(
            id=info.id,
            profile_id=info.profileId,
            placement=Placement(info.placement.start, info.placement.size),
        )

    def create_compute_instance(
        self,
        gpu_instance: GpuInstance,
        profile_id: int | None = None,
        placement: Placement | None = None,
    ) -> ComputeInstance:
        """Create a compute instance; profile_id None = the full-size default CI."""
        if profile_id is None:
            profile_id = self.full_compute_instance_profile(gpu_instance).id
        if placement is None:
            return ComputeInstance(self._handle("nvmlGpuInstanceCreateComputeInstance", gpu_instance.value, profile_id))
        where = _ComputeInstancePlacement(placement.start, placement.size)
        return ComputeInstance(
            self._handle(
                "nvmlGpuInstanceCreateComputeInstanceWithPlacement",
                gpu_instance.value,
                profile_id,
                ctypes.byref(where),
            )
        )

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
        return DeviceAttributes(
            multiprocessor_count=attrs.multiprocessorCount,
            shared_copy_engine_count=attrs.sharedCopyEngineCount,
            shared_decoder_count=attrs.sharedDecoderCount,
            shared_encoder_count=attrs.sharedEncoderCount,
            shared_jpeg_count=attrs.sharedJpegCount,
            shared_ofa_count=attrs.sharedOfaCount,
            gpu_instance_slice_count=attrs.gpuInstanceSliceCount,
            compute_instance_slice_count=attrs.computeInstanceSliceCount,
            memory_size_mb=attrs.memorySizeMB,
        )

    def mig_device_gpu_instance_id(self, mig_device: Device) -> int:
        return self._uint("nvmlDeviceGetGpuInstanceId", mig_device.value)

    def mig_device_compute_instance_id(self, mig_device: Device) -> int:
        return self._uint("nvmlDeviceGetComputeInstanceId", mig_device.value)
