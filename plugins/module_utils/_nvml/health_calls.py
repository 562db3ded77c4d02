# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""The health reads of the binding: ECC, retired pages, remapped rows, field
values, PCIe, NVLink, fabric, temperature, clock event reasons and power, one
method per NVML call with the signature NVML_H gives it.
"""

from __future__ import annotations

import ctypes
import typing as t

from .constants import (
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
    NVML_ERROR_INSUFFICIENT_SIZE,
    NVML_FEATURE_ENABLED,
    NVML_SUCCESS,
    NVML_TEMPERATURE_GPU,
    NVML_VALUE_TYPE_DOUBLE,
    NVML_VALUE_TYPE_SIGNED_INT,
    NVML_VALUE_TYPE_SIGNED_LONG_LONG,
    NVML_VALUE_TYPE_UNSIGNED_INT,
    NVML_VALUE_TYPE_UNSIGNED_LONG,
    NVML_VALUE_TYPE_UNSIGNED_LONG_LONG,
    NVML_VALUE_TYPE_UNSIGNED_SHORT,
    NvmlError,
)
from .library import NvmlLibrary
from .structs import (
    FALLBACKS,
    _FieldValue,
    _GpuFabricInfo,
    _GpuFabricInfo_v2,
    _GpuFabricInfo_v3,
    _Temperature_v1,
    nvmlGpuFabricInfo_v2,
    nvmlGpuFabricInfo_v3,
    nvmlTemperature_v1,
)
from .values import Device, EccMode, FabricInfo, FieldValue, RemappedRows


class HealthCalls(NvmlLibrary):
    """NVML's health entry points; which answers mean "cannot tell" is _nvml/health.py's decision."""

    # One method per NVML call, each with the signature NVML_H gives it. They
    # raise NvmlError like every other query; which codes mean "this GPU or
    # driver cannot tell" is the caller's decision (_nvml/health.py, read_health).
    def device_ecc_mode(self, device: Device) -> EccMode:
        current, pending = ctypes.c_int(0), ctypes.c_int(0)
        self._call("nvmlDeviceGetEccMode", device.value, ctypes.byref(current), ctypes.byref(pending))
        return EccMode(current=current.value == NVML_FEATURE_ENABLED, pending=pending.value == NVML_FEATURE_ENABLED)

    def device_total_ecc_errors(self, device: Device, error_type: int, counter_type: int) -> int:
        """nvmlDeviceGetTotalEccErrors(NVML_MEMORY_ERROR_TYPE_*, NVML_VOLATILE_ECC/NVML_AGGREGATE_ECC)."""
        count = ctypes.c_ulonglong(0)
        self._call("nvmlDeviceGetTotalEccErrors", device.value, error_type, counter_type, ctypes.byref(count))
        return count.value

    def device_retired_pages_count(self, device: Device, cause: int) -> int:
        """How many pages are retired (or pending retirement) for `cause`; the addresses are not read.

        NVML's sizing call: pageCount 0 and no buffer answers SUCCESS when
        there are none, INSUFFICIENT_SIZE with the count when there are some.
        """
        name = "nvmlDeviceGetRetiredPages"
        count = ctypes.c_uint(0)
        ret = self._status(name, device.value, cause, ctypes.byref(count), None)
        if ret not in (NVML_SUCCESS, NVML_ERROR_INSUFFICIENT_SIZE):
            raise self.error(ret, name)
        return count.value

    def device_retired_pages_pending(self, device: Device) -> bool:
        pending = ctypes.c_int(0)
        self._call("nvmlDeviceGetRetiredPagesPendingStatus", device.value, ctypes.byref(pending))
        return pending.value == NVML_FEATURE_ENABLED

    def device_remapped_rows(self, device: Device) -> RemappedRows:
        corr, unc, pending, failure = ctypes.c_uint(0), ctypes.c_uint(0), ctypes.c_uint(0), ctypes.c_uint(0)
        self._call(
            "nvmlDeviceGetRemappedRows",
            device.value,
            ctypes.byref(corr),
            ctypes.byref(unc),
            ctypes.byref(pending),
            ctypes.byref(failure),
        )
        return RemappedRows(
            correctable=corr.value,
            uncorrectable=unc.value,
            pending=bool(pending.value),
            failure=bool(failure.value),
        )

    def device_field_values(self, device: Device, field_ids: t.Sequence[int]) -> list[FieldValue]:
        """One nvmlDeviceGetFieldValues call; each field carries its own return code."""
        values = (_FieldValue * len(field_ids))()
        for slot, field_id in zip(values, field_ids):
            slot.fieldId = field_id
        self._call("nvmlDeviceGetFieldValues", device.value, len(field_ids), values)
        return [
            FieldValue(
                field_id=v.fieldId,
                scope_id=v.scopeId,
                nvml_return=v.nvmlReturn,
                value=_field_value(v) if v.nvmlReturn == NVML_SUCCESS else None,
            )
            for v in values
        ]

    def device_pcie_link_generation_current(self, device: Device) -> int:
        return self._uint("nvmlDeviceGetCurrPcieLinkGeneration", device.value)

    def device_pcie_link_generation_max(self, device: Device) -> int:
        """The highest generation this GPU *and this system* allow (nvidia-smi's pcie.link.gen.max)."""
        return self._uint("nvmlDeviceGetMaxPcieLinkGeneration", device.value)

    def device_pcie_link_width_current(self, device: Device) -> int:
        return self._uint("nvmlDeviceGetCurrPcieLinkWidth", device.value)

    def device_pcie_link_width_max(self, device: Device) -> int:
        """The widest link this GPU *and this system* allow (nvidia-smi's pcie.link.width.max)."""
        return self._uint("nvmlDeviceGetMaxPcieLinkWidth", device.value)

    def device_pcie_replay_counter(self, device: Device) -> int:
        return self._uint("nvmlDeviceGetPcieReplayCounter", device.value)

    def device_nvlink_state(self, device: Device, link: int) -> bool:
        active = ctypes.c_int(0)
        self._call("nvmlDeviceGetNvLinkState", device.value, link, ctypes.byref(active))
        return active.value == NVML_FEATURE_ENABLED

    def device_fabric_info(self, device: Device) -> FabricInfo:
        """nvmlDeviceGetGpuFabricInfoV with the v3 struct, else v2, else nvmlDeviceGetGpuFabricInfo.

        v3 (healthSummary) is what the header NVML_H names defines; drivers
        from before it answer ARGUMENT_VERSION_MISMATCH to v3 and take v2,
        and drivers from before the V call only have the unversioned one.
        """
        name = "nvmlDeviceGetGpuFabricInfoV"
        info: t.Any = _GpuFabricInfo_v3(version=nvmlGpuFabricInfo_v3)
        try:
            ret = self._status(name, device.value, ctypes.byref(info))
            if ret == NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
                info = _GpuFabricInfo_v2(version=nvmlGpuFabricInfo_v2)
                ret = self._status(name, device.value, ctypes.byref(info))
        except NvmlError as err:  # the symbol itself is missing
            ret = err.code
        if ret == NVML_SUCCESS:
            health_mask: int | None = info.healthMask
        else:
            older, triggers = FALLBACKS[name]
            if ret not in triggers:
                raise self.error(ret, name)
            info = _GpuFabricInfo()
            self._call(older, device.value, ctypes.byref(info))
            health_mask = None
        return FabricInfo(
            state=info.state,
            status=info.status,
            clique_id=info.cliqueId,
            cluster_uuid=bytes(info.clusterUuid),
            health_mask=health_mask,
        )

    def device_temperature(self, device: Device, sensor: int = NVML_TEMPERATURE_GPU) -> int:
        """Degrees C: nvmlDeviceGetTemperatureV, else the deprecated nvmlDeviceGetTemperature."""
        reading = _Temperature_v1(version=nvmlTemperature_v1, sensorType=sensor)
        legacy = ctypes.c_uint(0)
        used = self._call_with_fallback(
            "nvmlDeviceGetTemperatureV",
            (device.value, ctypes.byref(reading)),
            (device.value, sensor, ctypes.byref(legacy)),
        )
        return reading.temperature if used == "nvmlDeviceGetTemperatureV" else legacy.value

    def device_temperature_threshold(self, device: Device, threshold: int) -> int:
        """Degrees C for NVML_TEMPERATURE_THRESHOLD_*."""
        value = ctypes.c_uint(0)
        self._call("nvmlDeviceGetTemperatureThreshold", device.value, threshold, ctypes.byref(value))
        return value.value

    def device_clock_event_reasons(self, device: Device) -> int:
        """Bit mask of nvmlClocksEventReason*; the ...ThrottleReasons call on drivers before the rename."""
        mask = ctypes.c_ulonglong(0)
        args = (device.value, ctypes.byref(mask))
        self._call_with_fallback("nvmlDeviceGetCurrentClocksEventReasons", args, args)
        return mask.value

    def device_power_usage(self, device: Device) -> int:
        """Milliwatts (a one-second average on Ampere and later except GA100, instantaneous before)."""
        return self._uint("nvmlDeviceGetPowerUsage", device.value)

    def device_enforced_power_limit(self, device: Device) -> int:
        """Milliwatts: the limit the driver enforces after every limiter, out-of-band ones included."""
        return self._uint("nvmlDeviceGetEnforcedPowerLimit", device.value)


def _field_value(value: _FieldValue) -> int | float | None:
    """The member of the nvmlValue_t union that valueType names; None for a type this binding does not know."""
    member = {
        NVML_VALUE_TYPE_DOUBLE: "dVal",
        NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
        NVML_VALUE_TYPE_UNSIGNED_LONG: "ulVal",
        NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
        NVML_VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
        NVML_VALUE_TYPE_SIGNED_INT: "siVal",
        NVML_VALUE_TYPE_UNSIGNED_SHORT: "usVal",
    }.get(value.valueType)
    return None if member is None else getattr(value.value, member)
