# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""The ctypes side of the binding: the structs (field order and types exactly as
in nvml.h), the versioned struct headers, and the prototype of every NVML
entry point used (with the older entry point each one falls back to).
"""

from __future__ import annotations

import ctypes
import typing as t

from .constants import (
    NVML_DEVICE_NAME_V2_BUFFER_SIZE,
    NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE,
    NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
    NVML_ERROR_FUNCTION_NOT_FOUND,
    NVML_ERROR_LIBRARY_NOT_FOUND,
    NVML_GPU_FABRIC_UUID_LEN,
)


# --- structs (field order and types exactly as in nvml.h) -------------------
# A versioned struct (_v2, _v3) is its older layout with `version` in front and
# new fields at the end, so each layout is written once and the newer ones
# are built from it, as nvml.h grows them.
def _typed(ctype: t.Any, *names: str) -> list[tuple[str, t.Any]]:
    return [(name, ctype) for name in names]


def _uints(*names: str) -> list[tuple[str, t.Any]]:
    return _typed(ctypes.c_uint, *names)


_VERSION = ("version", ctypes.c_uint)


class _PciInfo(ctypes.Structure):
    _fields_ = [
        ("busIdLegacy", ctypes.c_char * NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE),
        *_uints("domain", "bus", "device", "pciDeviceId", "pciSubSystemId"),
        ("busId", ctypes.c_char * NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE),
    ]


class _Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class _Memory_v2(ctypes.Structure):
    # Not grown from _Memory: v2 puts `reserved` between total and free.
    _fields_ = [
        _VERSION,
        ("total", ctypes.c_ulonglong),
        ("reserved", ctypes.c_ulonglong),
        ("free", ctypes.c_ulonglong),
        ("used", ctypes.c_ulonglong),
    ]


class _ProcessInfo(ctypes.Structure):
    # nvmlProcessInfo_t as filled by nvmlDeviceGetComputeRunningProcesses_v3
    # (the nvmlProcessInfo_v2_t layout).
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong), *_uints("gpuInstanceId", "computeInstanceId")]


class _GpuInstancePlacement(ctypes.Structure):
    _fields_ = _uints("start", "size")


_GPU_INSTANCE_PROFILE = [
    *_uints(
        "id",
        "isP2pSupported",
        "sliceCount",
        "instanceCount",
        "multiprocessorCount",
        "copyEngineCount",
        "decoderCount",
        "encoderCount",
        "jpegCount",
        "ofaCount",
    ),
    ("memorySizeMB", ctypes.c_ulonglong),
]


class _GpuInstanceProfileInfo(ctypes.Structure):
    _fields_ = _GPU_INSTANCE_PROFILE


class _GpuInstanceProfileInfo_v2(ctypes.Structure):
    _fields_ = [_VERSION, *_GPU_INSTANCE_PROFILE, ("name", ctypes.c_char * NVML_DEVICE_NAME_V2_BUFFER_SIZE)]


class _GpuInstanceInfo(ctypes.Structure):
    _fields_ = [("device", ctypes.c_void_p), *_uints("id", "profileId"), ("placement", _GpuInstancePlacement)]


class _ComputeInstancePlacement(ctypes.Structure):
    _fields_ = _uints("start", "size")


# The engines a MIG device shares, in the order both structs below list them.
_SHARED_ENGINES = ("sharedCopyEngineCount", "sharedDecoderCount", "sharedEncoderCount", "sharedJpegCount", "sharedOfaCount")


class _DeviceAttributes(ctypes.Structure):
    _fields_ = [
        *_uints("multiprocessorCount", *_SHARED_ENGINES, "gpuInstanceSliceCount", "computeInstanceSliceCount"),
        ("memorySizeMB", ctypes.c_ulonglong),
    ]


_COMPUTE_INSTANCE_PROFILE = _uints("id", "sliceCount", "instanceCount", "multiprocessorCount", *_SHARED_ENGINES)


class _ComputeInstanceProfileInfo(ctypes.Structure):
    _fields_ = _COMPUTE_INSTANCE_PROFILE


class _ComputeInstanceProfileInfo_v2(ctypes.Structure):
    _fields_ = [_VERSION, *_COMPUTE_INSTANCE_PROFILE, ("name", ctypes.c_char * NVML_DEVICE_NAME_V2_BUFFER_SIZE)]


class _ComputeInstanceInfo(ctypes.Structure):
    _fields_ = [
        ("device", ctypes.c_void_p),
        ("gpuInstance", ctypes.c_void_p),
        *_uints("id", "profileId"),
        ("placement", _ComputeInstancePlacement),
    ]


class _Value(ctypes.Union):
    # nvmlValue_t
    _fields_ = [
        ("dVal", ctypes.c_double),
        ("siVal", ctypes.c_int),
        ("uiVal", ctypes.c_uint),
        ("ulVal", ctypes.c_ulong),
        ("ullVal", ctypes.c_ulonglong),
        ("sllVal", ctypes.c_longlong),
        ("usVal", ctypes.c_ushort),
    ]


class _FieldValue(ctypes.Structure):
    # nvmlFieldValue_t; nvmlValueType_t and nvmlReturn_t are C enums (int).
    _fields_ = [
        *_uints("fieldId", "scopeId"),
        *_typed(ctypes.c_longlong, "timestamp", "latencyUsec"),
        *_typed(ctypes.c_int, "valueType", "nvmlReturn"),
        ("value", _Value),
    ]


_GPU_FABRIC = [
    ("clusterUuid", ctypes.c_ubyte * NVML_GPU_FABRIC_UUID_LEN),
    ("status", ctypes.c_int),
    ("cliqueId", ctypes.c_uint),
    ("state", ctypes.c_ubyte),
]


class _GpuFabricInfo(ctypes.Structure):
    # nvmlGpuFabricInfo_t (the unversioned struct of nvmlDeviceGetGpuFabricInfo)
    _fields_ = _GPU_FABRIC


class _GpuFabricInfo_v2(ctypes.Structure):
    _fields_ = [_VERSION, *_GPU_FABRIC, ("healthMask", ctypes.c_uint)]


class _GpuFabricInfo_v3(ctypes.Structure):
    # nvmlGpuFabricInfoV_t is this one in the header NVML_H names.
    _fields_ = [*_GpuFabricInfo_v2._fields_, ("healthSummary", ctypes.c_ubyte)]


class _Temperature_v1(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint),
        ("sensorType", ctypes.c_int),
        ("temperature", ctypes.c_int),
    ]


def struct_version(struct: type, version: int) -> int:
    """NVML_STRUCT_VERSION(data, ver): sizeof(struct) | (ver << 24)."""
    return ctypes.sizeof(struct) | (version << 24)


nvmlMemory_v2 = struct_version(_Memory_v2, 2)
nvmlGpuInstanceProfileInfo_v2 = struct_version(_GpuInstanceProfileInfo_v2, 2)
nvmlComputeInstanceProfileInfo_v2 = struct_version(_ComputeInstanceProfileInfo_v2, 2)
nvmlGpuFabricInfo_v2 = struct_version(_GpuFabricInfo_v2, 2)
nvmlGpuFabricInfo_v3 = struct_version(_GpuFabricInfo_v3, 3)
nvmlTemperature_v1 = struct_version(_Temperature_v1, 1)

# --- prototypes --------------------------------------------------------------
# Every nvmlReturn_t entry point the binding may resolve, with its argtypes.
# Declaring argtypes matters: without them ctypes passes Python ints as C int
# and would truncate 64-bit handles.
_P = ctypes.POINTER
_UINT = ctypes.c_uint
_HANDLE = ctypes.c_void_p
_STR = ctypes.c_char_p

PROTOTYPES: dict[str, tuple[t.Any, ...]] = {
    "nvmlInit_v2": (),
    "nvmlInit": (),
    "nvmlInitWithFlags": (_UINT,),
    "nvmlShutdown": (),
    "nvmlSystemGetDriverVersion": (_STR, _UINT),
    "nvmlSystemGetNVMLVersion": (_STR, _UINT),
    "nvmlSystemGetCudaDriverVersion_v2": (_P(ctypes.c_int),),
    "nvmlSystemGetCudaDriverVersion": (_P(ctypes.c_int),),
    "nvmlDeviceGetCount_v2": (_P(_UINT),),
    "nvmlDeviceGetHandleByIndex_v2": (_UINT, _P(_HANDLE)),
    "nvmlDeviceGetHandleByUUID": (_STR, _P(_HANDLE)),
    "nvmlDeviceGetHandleByPciBusId_v2": (_STR, _P(_HANDLE)),
    "nvmlDeviceGetIndex": (_HANDLE, _P(_UINT)),
    "nvmlDeviceGetName": (_HANDLE, _STR, _UINT),
    "nvmlDeviceGetUUID": (_HANDLE, _STR, _UINT),
    "nvmlDeviceGetSerial": (_HANDLE, _STR, _UINT),
    "nvmlDeviceGetBoardPartNumber": (_HANDLE, _STR, _UINT),
    "nvmlDeviceGetMinorNumber": (_HANDLE, _P(_UINT)),
    "nvmlDeviceGetPciInfo_v3": (_HANDLE, _P(_PciInfo)),
    "nvmlDeviceGetPciInfo_v2": (_HANDLE, _P(_PciInfo)),
    "nvmlDeviceGetMemoryInfo_v2": (_HANDLE, _P(_Memory_v2)),
    "nvmlDeviceGetMemoryInfo": (_HANDLE, _P(_Memory)),
    "nvmlDeviceGetArchitecture": (_HANDLE, _P(_UINT)),
    "nvmlDeviceGetCudaComputeCapability": (_HANDLE, _P(ctypes.c_int), _P(ctypes.c_int)),
    "nvmlDeviceGetPersistenceMode": (_HANDLE, _P(ctypes.c_int)),
    "nvmlDeviceGetComputeRunningProcesses_v3": (_HANDLE, _P(_UINT), _P(_ProcessInfo)),
    "nvmlDeviceGetMigMode": (_HANDLE, _P(_UINT), _P(_UINT)),
    "nvmlDeviceSetMigMode": (_HANDLE, _UINT, _P(ctypes.c_int)),
    "nvmlDeviceGetGpuInstanceProfileInfoV": (_HANDLE, _UINT, _P(_GpuInstanceProfileInfo_v2)),
    "nvmlDeviceGetGpuInstanceProfileInfo": (_HANDLE, _UINT, _P(_GpuInstanceProfileInfo)),
    "nvmlDeviceGetGpuInstancePossiblePlacements_v2": (_HANDLE, _UINT, _P(_GpuInstancePlacement), _P(_UINT)),
    "nvmlDeviceGetGpuInstanceRemainingCapacity": (_HANDLE, _UINT, _P(_UINT)),
    "nvmlDeviceCreateGpuInstance": (_HANDLE, _UINT, _P(_HANDLE)),
    "nvmlDeviceCreateGpuInstanceWithPlacement": (_HANDLE, _UINT, _P(_GpuInstancePlacement), _P(_HANDLE)),
    "nvmlGpuInstanceDestroy": (_HANDLE,),
    "nvmlDeviceGetGpuInstances": (_HANDLE, _UINT, _P(_HANDLE), _P(_UINT)),
    "nvmlDeviceGetGpuInstanceById": (_HANDLE, _UINT, _P(_HANDLE)),
    "nvmlGpuInstanceGetInfo": (_HANDLE, _P(_GpuInstanceInfo)),
    "nvmlGpuInstanceGetComputeInstanceProfileInfoV": (_HANDLE, _UINT, _UINT, _P(_ComputeInstanceProfileInfo_v2)),
    "nvmlGpuInstanceGetComputeInstanceProfileInfo": (_HANDLE, _UINT, _UINT, _P(_ComputeInstanceProfileInfo)),
    "nvmlGpuInstanceGetComputeInstanceRemainingCapacity": (_HANDLE, _UINT, _P(_UINT)),
    "nvmlGpuInstanceGetComputeInstancePossiblePlacements": (
        _HANDLE,
        _UINT,
        _P(_ComputeInstancePlacement),
        _P(_UINT),
    ),
    "nvmlGpuInstanceCreateComputeInstance": (_HANDLE, _UINT, _P(_HANDLE)),
    "nvmlGpuInstanceCreateComputeInstanceWithPlacement": (
        _HANDLE,
        _UINT,
        _P(_ComputeInstancePlacement),
        _P(_HANDLE),
    ),
    "nvmlComputeInstanceDestroy": (_HANDLE,),
    "nvmlGpuInstanceGetComputeInstances": (_HANDLE, _UINT, _P(_HANDLE), _P(_UINT)),
    "nvmlGpuInstanceGetComputeInstanceById": (_HANDLE, _UINT, _P(_HANDLE)),
    "nvmlComputeInstanceGetInfo_v2": (_HANDLE, _P(_ComputeInstanceInfo)),
    "nvmlDeviceGetMaxMigDeviceCount": (_HANDLE, _P(_UINT)),
    "nvmlDeviceGetMigDeviceHandleByIndex": (_HANDLE, _UINT, _P(_HANDLE)),
    "nvmlDeviceGetGpuInstanceId": (_HANDLE, _P(_UINT)),
    "nvmlDeviceGetAttributes_v2": (_HANDLE, _P(_DeviceAttributes)),
    "nvmlDeviceGetAttributes": (_HANDLE, _P(_DeviceAttributes)),
    "nvmlDeviceGetComputeInstanceId": (_HANDLE, _P(_UINT)),
    # health reads; enums (nvmlEnableState_t, nvmlMemoryErrorType_t, ...) are C ints
    "nvmlDeviceGetEccMode": (_HANDLE, _P(ctypes.c_int), _P(ctypes.c_int)),
    "nvmlDeviceGetTotalEccErrors": (_HANDLE, ctypes.c_int, ctypes.c_int, _P(ctypes.c_ulonglong)),
    "nvmlDeviceGetRetiredPages": (_HANDLE, ctypes.c_int, _P(_UINT), _P(ctypes.c_ulonglong)),
    "nvmlDeviceGetRetiredPagesPendingStatus": (_HANDLE, _P(ctypes.c_int)),
    "nvmlDeviceGetRemappedRows": (_HANDLE, _P(_UINT), _P(_UINT), _P(_UINT), _P(_UINT)),
    "nvmlDeviceGetFieldValues": (_HANDLE, ctypes.c_int, _P(_FieldValue)),
    "nvmlDeviceGetCurrPcieLinkGeneration": (_HANDLE, _P(_UINT)),
    "nvmlDeviceGetMaxPcieLinkGeneration": (_HANDLE, _P(_UINT)),
    "nvmlDeviceGetCurrPcieLinkWidth": (_HANDLE, _P(_UINT)),
    "nvmlDeviceGetMaxPcieLinkWidth": (_HANDLE, _P(_UINT)),
    "nvmlDeviceGetPcieReplayCounter": (_HANDLE, _P(_UINT)),
    "nvmlDeviceGetNvLinkState": (_HANDLE, _UINT, _P(ctypes.c_int)),
    # One name, two struct versions (v3, then v2 on ARGUMENT_VERSION_MISMATCH):
    # the argument is declared as a plain pointer and the caller passes either.
    "nvmlDeviceGetGpuFabricInfoV": (_HANDLE, ctypes.c_void_p),
    "nvmlDeviceGetGpuFabricInfo": (_HANDLE, _P(_GpuFabricInfo)),
    "nvmlDeviceGetTemperatureV": (_HANDLE, _P(_Temperature_v1)),
    "nvmlDeviceGetTemperature": (_HANDLE, ctypes.c_int, _P(_UINT)),
    "nvmlDeviceGetTemperatureThreshold": (_HANDLE, ctypes.c_int, _P(_UINT)),
    "nvmlDeviceGetCurrentClocksEventReasons": (_HANDLE, _P(ctypes.c_ulonglong)),
    "nvmlDeviceGetCurrentClocksThrottleReasons": (_HANDLE, _P(ctypes.c_ulonglong)),
    "nvmlDeviceGetPowerUsage": (_HANDLE, _P(_UINT)),
    "nvmlDeviceGetEnforcedPowerLimit": (_HANDLE, _P(_UINT)),
}

# Older entry points the binding falls back to, and the return codes of the
# preferred call that trigger the fallback. Anything else from the preferred
# call is a real answer and is raised, not papered over.
_VERSION_GAP = frozenset({NVML_ERROR_FUNCTION_NOT_FOUND, NVML_ERROR_ARGUMENT_VERSION_MISMATCH})
FALLBACKS: dict[str, tuple[str, frozenset[int]]] = {
    "nvmlInit_v2": ("nvmlInit", frozenset({NVML_ERROR_FUNCTION_NOT_FOUND})),
    # _v2 asks libcuda for the truth; v1 falls back to a "known supported"
    # version when libcuda is missing, which is better than nothing.
    "nvmlSystemGetCudaDriverVersion_v2": (
        "nvmlSystemGetCudaDriverVersion",
        frozenset({NVML_ERROR_LIBRARY_NOT_FOUND, NVML_ERROR_FUNCTION_NOT_FOUND}),
    ),
    "nvmlDeviceGetPciInfo_v3": ("nvmlDeviceGetPciInfo_v2", frozenset({NVML_ERROR_FUNCTION_NOT_FOUND})),
    "nvmlDeviceGetMemoryInfo_v2": ("nvmlDeviceGetMemoryInfo", _VERSION_GAP),
    # Same struct; nvml.h maps the plain name to _v2 since the _v2 symbol exists.
    "nvmlDeviceGetAttributes_v2": ("nvmlDeviceGetAttributes", frozenset({NVML_ERROR_FUNCTION_NOT_FOUND})),
    "nvmlDeviceGetGpuInstanceProfileInfoV": ("nvmlDeviceGetGpuInstanceProfileInfo", _VERSION_GAP),
    "nvmlGpuInstanceGetComputeInstanceProfileInfoV": ("nvmlGpuInstanceGetComputeInstanceProfileInfo", _VERSION_GAP),
    # Health reads whose newer call the header deprecates the older one for
    # (DEPRECATED(13.0)); drivers before the newer call only have the older.
    "nvmlDeviceGetGpuFabricInfoV": ("nvmlDeviceGetGpuFabricInfo", _VERSION_GAP),
    "nvmlDeviceGetTemperatureV": ("nvmlDeviceGetTemperature", _VERSION_GAP),
    "nvmlDeviceGetCurrentClocksEventReasons": (
        "nvmlDeviceGetCurrentClocksThrottleReasons",
        frozenset({NVML_ERROR_FUNCTION_NOT_FOUND}),
    ),
}
