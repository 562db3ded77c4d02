# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Thin ctypes binding of the NVML calls gpufleet.nvidia needs.

Runs on the managed host with its own Python (3.8+, standard library only), so
no pynvml package has to be installed there. The library is found exactly as
NVIDIA's tools find it: ``dlopen("libnvidia-ml.so.1")`` through the dynamic
loader, unless a path is given.

Struct layouts and constants follow ``nvml.h`` field by field; callers only see
plain dataclasses and the opaque handle classes below, never ctypes objects.
"""

from __future__ import annotations

import ctypes
import typing as t
from dataclasses import asdict, dataclass

DEFAULT_LIBRARY = "libnvidia-ml.so.1"

# --- nvmlReturn_t ----------------------------------------------------------
NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_ALREADY_INITIALIZED = 5
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_INSUFFICIENT_POWER = 8
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_IRQ_ISSUE = 11
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_CORRUPTED_INFOROM = 14
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_OPERATING_SYSTEM = 17
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_IN_USE = 19
NVML_ERROR_MEMORY = 20
NVML_ERROR_NO_DATA = 21
NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22
NVML_ERROR_INSUFFICIENT_RESOURCES = 23
NVML_ERROR_FREQ_NOT_SUPPORTED = 24
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
NVML_ERROR_DEPRECATED = 26
NVML_ERROR_NOT_READY = 27
NVML_ERROR_GPU_NOT_FOUND = 28
NVML_ERROR_INVALID_STATE = 29
NVML_ERROR_UNKNOWN = 999

ERROR_NAMES = {value: name for name, value in sorted(globals().items()) if name.startswith("NVML_ERROR_") or name == "NVML_SUCCESS"}

# --- buffer sizes (nvmlConstants) ------------------------------------------
NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96
NVML_DEVICE_PART_NUMBER_BUFFER_SIZE = 80
NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80
NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE = 80
NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96
NVML_DEVICE_SERIAL_BUFFER_SIZE = 30
NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE = 32
NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE = 16

# --- nvmlInitWithFlags flags -------------------------------------------------
NVML_INIT_FLAG_NO_GPUS = 1

# --- nvmlEnableState_t -----------------------------------------------------
NVML_FEATURE_DISABLED = 0
NVML_FEATURE_ENABLED = 1

# --- nvmlDeviceArchitecture_t (an unsigned int, not an enum) ---------------
NVML_DEVICE_ARCH_KEPLER = 2
NVML_DEVICE_ARCH_MAXWELL = 3
NVML_DEVICE_ARCH_PASCAL = 4
NVML_DEVICE_ARCH_VOLTA = 5
NVML_DEVICE_ARCH_TURING = 6
NVML_DEVICE_ARCH_AMPERE = 7
NVML_DEVICE_ARCH_ADA = 8
NVML_DEVICE_ARCH_HOPPER = 9
NVML_DEVICE_ARCH_BLACKWELL = 10
NVML_DEVICE_ARCH_RUBIN = 13
NVML_DEVICE_ARCH_UNKNOWN = 0xFFFFFFFF

ARCHITECTURE_NAMES = {
    NVML_DEVICE_ARCH_KEPLER: "kepler",
    NVML_DEVICE_ARCH_MAXWELL: "maxwell",
    NVML_DEVICE_ARCH_PASCAL: "pascal",
    NVML_DEVICE_ARCH_VOLTA: "volta",
    NVML_DEVICE_ARCH_TURING: "turing",
    NVML_DEVICE_ARCH_AMPERE: "ampere",
    NVML_DEVICE_ARCH_ADA: "ada",
    NVML_DEVICE_ARCH_HOPPER: "hopper",
    NVML_DEVICE_ARCH_BLACKWELL: "blackwell",
    NVML_DEVICE_ARCH_RUBIN: "rubin",
}

# --- MIG -------------------------------------------------------------------
NVML_DEVICE_MIG_DISABLE = 0x0
NVML_DEVICE_MIG_ENABLE = 0x1

# GPU-instance profile *indices*. They select a row of the profile table; the
# profile *id* NVML hands back (19, 14, 9, ... on 8-slice GPUs) is a different
# number, and it is the id that placements, create and list calls take.
NVML_GPU_INSTANCE_PROFILE_1_SLICE = 0x0
NVML_GPU_INSTANCE_PROFILE_2_SLICE = 0x1
NVML_GPU_INSTANCE_PROFILE_3_SLICE = 0x2
NVML_GPU_INSTANCE_PROFILE_4_SLICE = 0x3
NVML_GPU_INSTANCE_PROFILE_7_SLICE = 0x4
NVML_GPU_INSTANCE_PROFILE_8_SLICE = 0x5
NVML_GPU_INSTANCE_PROFILE_6_SLICE = 0x6
NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 = 0x7
NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1 = 0x8
NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2 = 0x9
NVML_GPU_INSTANCE_PROFILE_1_SLICE_GFX = 0xA
NVML_GPU_INSTANCE_PROFILE_2_SLICE_GFX = 0xB
NVML_GPU_INSTANCE_PROFILE_4_SLICE_GFX = 0xC
NVML_GPU_INSTANCE_PROFILE_1_SLICE_NO_ME = 0xD
NVML_GPU_INSTANCE_PROFILE_2_SLICE_NO_ME = 0xE
NVML_GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME = 0xF
NVML_GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME = 0x10
NVML_GPU_INSTANCE_PROFILE_3_SLICE_GFX = 0x11
NVML_GPU_INSTANCE_PROFILE_COUNT = 0x12

NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE = 0x0
NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE = 0x1
NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE = 0x2
NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE = 0x3
NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE = 0x4
NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE = 0x5
NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE = 0x6
NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1 = 0x7
NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE_NVL = 0x8
NVML_COMPUTE_INSTANCE_PROFILE_COUNT = 0x9

NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED = 0x0

# --- health reads (values as in nvml.h; NVML_H names the commit) -------------
NVML_H = "NVIDIA/go-nvml@2f9e261fe40a:gen/nvml/nvml.h"

# nvmlMemoryErrorType_t; "single bit" / "double bit" are the deprecated
# aliases of corrected / uncorrected (NVML_SINGLE_BIT_ECC).
NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
# nvmlEccCounterType_t: volatile counts reset when the driver loads,
# aggregate counts persist for the lifetime of the device.
NVML_VOLATILE_ECC = 0
NVML_AGGREGATE_ECC = 1
# nvmlPageRetirementCause_t
NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0
NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1
# nvmlTemperatureSensors_t / nvmlTemperatureThresholds_t
NVML_TEMPERATURE_GPU = 0
NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0
NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1
NVML_NVLINK_MAX_LINKS = 36
# nvmlValueType_t: how nvmlFieldValue_t.value is to be read.
NVML_VALUE_TYPE_DOUBLE = 0
NVML_VALUE_TYPE_UNSIGNED_INT = 1
NVML_VALUE_TYPE_UNSIGNED_LONG = 2
NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3
NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4
NVML_VALUE_TYPE_SIGNED_INT = 5
NVML_VALUE_TYPE_UNSIGNED_SHORT = 6
# Field ids for nvmlDeviceGetFieldValues.
NVML_FI_DEV_GET_GPU_RECOVERY_ACTION = 230
# nvmlDeviceGpuRecoveryAction_t: the value of NVML_FI_DEV_GET_GPU_RECOVERY_ACTION.
NVML_GPU_RECOVERY_ACTION_NONE = 0
NVML_GPU_RECOVERY_ACTION_GPU_RESET = 1
NVML_GPU_RECOVERY_ACTION_NODE_REBOOT = 2
NVML_GPU_RECOVERY_ACTION_DRAIN_P2P = 3
NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET = 4
NVML_GPU_RECOVERY_ACTION_RECOVER_IMEX_DOMAIN = 5
# nvmlGpuFabricState_t (an unsigned char)
NVML_GPU_FABRIC_STATE_NOT_SUPPORTED = 0
NVML_GPU_FABRIC_STATE_NOT_STARTED = 1
NVML_GPU_FABRIC_STATE_IN_PROGRESS = 2
NVML_GPU_FABRIC_STATE_COMPLETED = 3
NVML_GPU_FABRIC_UUID_LEN = 16
# nvmlClocksEventReasons bits (the *ThrottleReason* names are aliases).
NVML_CLOCKS_EVENT_REASON_GPU_IDLE = 0x1
NVML_CLOCKS_EVENT_REASON_APPLICATIONS_CLOCKS_SETTING = 0x2
NVML_CLOCKS_EVENT_REASON_SW_POWER_CAP = 0x4
NVML_CLOCKS_EVENT_REASON_HW_SLOWDOWN = 0x8
NVML_CLOCKS_EVENT_REASON_SYNC_BOOST = 0x10
NVML_CLOCKS_EVENT_REASON_SW_THERMAL_SLOWDOWN = 0x20
NVML_CLOCKS_EVENT_REASON_HW_THERMAL_SLOWDOWN = 0x40
NVML_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN = 0x80
NVML_CLOCKS_EVENT_REASON_DISPLAY_CLOCK_SETTING = 0x100

# Process info reports this GI/CI id when the process is not inside a MIG
# instance, and NVML_VALUE_NOT_AVAILABLE (-1 as unsigned long long) as its
# memory when the driver cannot tell (WDDM, some containers).
_INVALID_INSTANCE_ID = 0xFFFFFFFF
_VALUE_NOT_AVAILABLE_ULL = 0xFFFFFFFFFFFFFFFF

# Profile tables are enumerated "until INVALID_ARGUMENT" so new profile
# indices work without a code change; the cap only guards against a broken
# library that never says INVALID_ARGUMENT.
_MAX_PROFILE_INDEX = 64

HINTS = {
    NVML_ERROR_UNINITIALIZED: "NVML was not initialized (nvmlInit failed or nvmlShutdown was called)",
    NVML_ERROR_NO_PERMISSION: "run as root (become: true)",
    NVML_ERROR_DRIVER_NOT_LOADED: "the nvidia kernel module is not loaded",
    NVML_ERROR_LIBRARY_NOT_FOUND: ("a library NVML depends on could not be loaded (libnvidia-ml.so.1 itself, or libcuda.so.1 for CUDA queries)"),
    NVML_ERROR_FUNCTION_NOT_FOUND: "the driver is too old for this call",
    NVML_ERROR_CORRUPTED_INFOROM: "the GPU's infoROM is corrupted; contact the vendor",
    NVML_ERROR_GPU_IS_LOST: "the GPU fell off the bus; check dmesg / reset or reboot",
    NVML_ERROR_RESET_REQUIRED: "the GPU needs a reset (nvidia-smi -r) or a reboot",
    NVML_ERROR_OPERATING_SYSTEM: "the GPU device nodes are blocked by the operating system or cgroups",
    NVML_ERROR_LIB_RM_VERSION_MISMATCH: (
        "driver/library version mismatch: the loaded kernel module differs from the installed user-space driver; reboot or reload the nvidia modules"
    ),
    NVML_ERROR_IN_USE: "the GPU is in use; stop its clients (nvidia-persistenced, dcgm, kubelet, CUDA jobs) and retry",
    NVML_ERROR_INSUFFICIENT_RESOURCES: "not enough free MIG slices for this instance (check placements and order)",
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH: "the driver does not know this struct version",
    NVML_ERROR_GPU_NOT_FOUND: "no NVIDIA GPU was found",
}


class NvmlError(Exception):
    """An NVML call returned something other than NVML_SUCCESS."""

    def __init__(self, code: int, function: str, text: str | None = None, hint: str | None = None) -> None:
        self.code = code
        self.function = function
        self.text = text or "NVML error {0}".format(code)
        self.hint = hint or HINTS.get(code)
        super().__init__(str(self))

    @property
    def name(self) -> str:
        return ERROR_NAMES.get(self.code, "NVML_ERROR_{0}".format(self.code))

    def __str__(self) -> str:
        msg = "{0}: {1} ({2})".format(self.function, self.text, self.name)
        if self.hint:
            msg += "; " + self.hint
        return msg


class NvmlLibraryNotFoundError(NvmlError):
    """dlopen() of the NVML library failed; the text is the loader's message."""

    def __init__(self, path: str, loader_message: str) -> None:
        self.path = path
        super().__init__(
            NVML_ERROR_LIBRARY_NOT_FOUND,
            "dlopen",
            loader_message,
            hint="the NVIDIA user-space driver (Debian: libnvidia-ml1) is not installed or not on the loader path",
        )


# --- structs (field order and types exactly as in nvml.h) -------------------
class _PciInfo(ctypes.Structure):
    _fields_ = [
        ("busIdLegacy", ctypes.c_char * NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE),
        ("domain", ctypes.c_uint),
        ("bus", ctypes.c_uint),
        ("device", ctypes.c_uint),
        ("pciDeviceId", ctypes.c_uint),
        ("pciSubSystemId", ctypes.c_uint),
        ("busId", ctypes.c_char * NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE),
    ]


class _Memory(ctypes.Structure):
    _fields_ = [
        ("total", ctypes.c_ulonglong),
        ("free", ctypes.c_ulonglong),
        ("used", ctypes.c_ulonglong),
    ]


class _Memory_v2(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint),
        ("total", ctypes.c_ulonglong),
        ("reserved", ctypes.c_ulonglong),
        ("free", ctypes.c_ulonglong),
        ("used", ctypes.c_ulonglong),
    ]


class _ProcessInfo(ctypes.Structure):
    # nvmlProcessInfo_t as filled by nvmlDeviceGetComputeRunningProcesses_v3
    # (the nvmlProcessInfo_v2_t layout).
    _fields_ = [
        ("pid", ctypes.c_uint),
        ("usedGpuMemory", ctypes.c_ulonglong),
        ("gpuInstanceId", ctypes.c_uint),
        ("computeInstanceId", ctypes.c_uint),
    ]


class _GpuInstancePlacement(ctypes.Structure):
    _fields_ = [("start", ctypes.c_uint), ("size", ctypes.c_uint)]


class _GpuInstanceProfileInfo(ctypes.Structure):
    _fields_ = [
        ("id", ctypes.c_uint),
        ("isP2pSupported", ctypes.c_uint),
        ("sliceCount", ctypes.c_uint),
        ("instanceCount", ctypes.c_uint),
        ("multiprocessorCount", ctypes.c_uint),
        ("copyEngineCount", ctypes.c_uint),
        ("decoderCount", ctypes.c_uint),
        ("encoderCount", ctypes.c_uint),
        ("jpegCount", ctypes.c_uint),
        ("ofaCount", ctypes.c_uint),
        ("memorySizeMB", ctypes.c_ulonglong),
    ]


class _GpuInstanceProfileInfo_v2(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint),
        ("id", ctypes.c_uint),
        ("isP2pSupported", ctypes.c_uint),
        ("sliceCount", ctypes.c_uint),
        ("instanceCount", ctypes.c_uint),
        ("multiprocessorCount", ctypes.c_uint),
        ("copyEngineCount", ctypes.c_uint),
        ("decoderCount", ctypes.c_uint),
        ("encoderCount", ctypes.c_uint),
        ("jpegCount", ctypes.c_uint),
        ("ofaCount", ctypes.c_uint),
        ("memorySizeMB", ctypes.c_ulonglong),
        ("name", ctypes.c_char * NVML_DEVICE_NAME_V2_BUFFER_SIZE),
    ]


class _GpuInstanceInfo(ctypes.Structure):
    _fields_ = [
        ("device", ctypes.c_void_p),
        ("id", ctypes.c_uint),
        ("profileId", ctypes.c_uint),
        ("placement", _GpuInstancePlacement),
    ]


class _ComputeInstancePlacement(ctypes.Structure):
    _fields_ = [("start", ctypes.c_uint), ("size", ctypes.c_uint)]


class _DeviceAttributes(ctypes.Structure):
    _fields_ = [
        ("multiprocessorCount", ctypes.c_uint),
        ("sharedCopyEngineCount", ctypes.c_uint),
        ("sharedDecoderCount", ctypes.c_uint),
        ("sharedEncoderCount", ctypes.c_uint),
        ("sharedJpegCount", ctypes.c_uint),
        ("sharedOfaCount", ctypes.c_uint),
        ("gpuInstanceSliceCount", ctypes.c_uint),
        ("computeInstanceSliceCount", ctypes.c_uint),
        ("memorySizeMB", ctypes.c_ulonglong),
    ]


class _ComputeInstanceProfileInfo(ctypes.Structure):
    _fields_ = [
        ("id", ctypes.c_uint),
        ("sliceCount", ctypes.c_uint),
        ("instanceCount", ctypes.c_uint),
        ("multiprocessorCount", ctypes.c_uint),
        ("sharedCopyEngineCount", ctypes.c_uint),
        ("sharedDecoderCount", ctypes.c_uint),
        ("sharedEncoderCount", ctypes.c_uint),
        ("sharedJpegCount", ctypes.c_uint),
        ("sharedOfaCount", ctypes.c_uint),
    ]


class _ComputeInstanceProfileInfo_v2(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint),
        ("id", ctypes.c_uint),
        ("sliceCount", ctypes.c_uint),
        ("instanceCount", ctypes.c_uint),
        ("multiprocessorCount", ctypes.c_uint),
        ("sharedCopyEngineCount", ctypes.c_uint),
        ("sharedDecoderCount", ctypes.c_uint),
        ("sharedEncoderCount", ctypes.c_uint),
        ("sharedJpegCount", ctypes.c_uint),
        ("sharedOfaCount", ctypes.c_uint),
        ("name", ctypes.c_char * NVML_DEVICE_NAME_V2_BUFFER_SIZE),
    ]


class _ComputeInstanceInfo(ctypes.Structure):
    _fields_ = [
        ("device", ctypes.c_void_p),
        ("gpuInstance", ctypes.c_void_p),
        ("id", ctypes.c_uint),
        ("profileId", ctypes.c_uint),
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
        ("fieldId", ctypes.c_uint),
        ("scopeId", ctypes.c_uint),
        ("timestamp", ctypes.c_longlong),
        ("latencyUsec", ctypes.c_longlong),
        ("valueType", ctypes.c_int),
        ("nvmlReturn", ctypes.c_int),
        ("value", _Value),
    ]


class _GpuFabricInfo(ctypes.Structure):
    # nvmlGpuFabricInfo_t (the unversioned struct of nvmlDeviceGetGpuFabricInfo)
    _fields_ = [
        ("clusterUuid", ctypes.c_ubyte * NVML_GPU_FABRIC_UUID_LEN),
        ("status", ctypes.c_int),
        ("cliqueId", ctypes.c_uint),
        ("state", ctypes.c_ubyte),
    ]


class _GpuFabricInfo_v2(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint),
        ("clusterUuid", ctypes.c_ubyte * NVML_GPU_FABRIC_UUID_LEN),
        ("status", ctypes.c_int),
        ("cliqueId", ctypes.c_uint),
        ("state", ctypes.c_ubyte),
        ("healthMask", ctypes.c_uint),
    ]


class _GpuFabricInfo_v3(ctypes.Structure):
    # nvmlGpuFabricInfoV_t is this one in the header NVML_H names.
    _fields_ = [
        ("version", ctypes.c_uint),
        ("clusterUuid", ctypes.c_ubyte * NVML_GPU_FABRIC_UUID_LEN),
        ("status", ctypes.c_int),
        ("cliqueId", ctypes.c_uint),
        ("state", ctypes.c_ubyte),
        ("healthMask", ctypes.c_uint),
        ("healthSummary", ctypes.c_ubyte),
    ]


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
class MigMode:
    current: bool
    pending: bool


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    used_memory: int | None
    gpu_instance_id: int | None
    compute_instance_id: int | None


@dataclass(frozen=True)
class GpuInstanceProfile:
    index: int  # NVML_GPU_INSTANCE_PROFILE_* value used to look it up
    id: int  # unique profile id: what placements/create/list take
    name: str | None  # only the V (v2 struct) call reports it
    slice_count: int
    instance_count: int
    multiprocessor_count: int
    copy_engine_count: int
    decoder_count: int
    encoder_count: int
    jpeg_count: int
    ofa_count: int
    memory_size_mb: int
    is_p2p_supported: bool


@dataclass(frozen=True)
class GpuInstanceInfo:
    id: int
    profile_id: int
    placement: Placement


@dataclass(frozen=True)
class ComputeInstanceProfile:
    index: int  # NVML_COMPUTE_INSTANCE_PROFILE_* value used to look it up
    id: int
    name: str | None
    slice_count: int
    instance_count: int
    multiprocessor_count: int
    shared_copy_engine_count: int
    shared_decoder_count: int
    shared_encoder_count: int
    shared_jpeg_count: int
    shared_ofa_count: int


@dataclass(frozen=True)
class DeviceAttributes:
    """nvmlDeviceGetAttributes of a MIG device: what its compute instance gets of the GPU."""

    multiprocessor_count: int
    shared_copy_engine_count: int
    shared_decoder_count: int
    shared_encoder_count: int
    shared_jpeg_count: int
    shared_ofa_count: int
    gpu_instance_slice_count: int
    compute_instance_slice_count: int
    memory_size_mb: int


@dataclass(frozen=True)
class ComputeInstanceInfo:
    id: int
    profile_id: int
    placement: Placement


@dataclass(frozen=True)
class EccMode:
    current: bool
    pending: bool  # the mode after the next reboot


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


# --- the session ---------------------------------------------------------------
class NvmlSession:
    """One loaded NVML library and its init/shutdown lifetime.

    Use as a context manager (nvmlInit on enter, nvmlShutdown on exit) or call
    init()/shutdown() yourself. NVML reference-counts init, so several sessions
    on the same library are fine.
    """

    def __init__(self, library: str | None = None) -> None:
        self.library = library or DEFAULT_LIBRARY
        try:
            self._dll = ctypes.CDLL(self.library)
        except OSError as exc:
            raise NvmlLibraryNotFoundError(self.library, str(exc)) from None
        self._functions: dict[str, t.Any] = {}
        # Symbols resolved so far, in first-use order. Tests use it to learn
        # which entry points a code path really touches.
        self.resolved: list[str] = []
        self.initialized = False

    # -- plumbing --------------------------------------------------------------
    def _function(self, name: str) -> t.Any:
        func = self._functions.get(name)
        if func is None:
            try:
                func = getattr(self._dll, name)
            except AttributeError:
                # An older driver simply lacks newer symbols; report it the
                # way NVML itself reports a missing entry point.
                raise NvmlError(NVML_ERROR_FUNCTION_NOT_FOUND, name, "Function Not Found") from None
            func.restype = ctypes.c_int
            func.argtypes = PROTOTYPES[name]
            self._functions[name] = func
            self.resolved.append(name)
        return func

    def error_string(self, code: int) -> str:
        try:
            func = self._dll.nvmlErrorString
        except AttributeError:
            return "NVML error {0}".format(code)
        func.restype = ctypes.c_char_p
        func.argtypes = (ctypes.c_int,)
        raw = func(code)
        return _text(raw) if raw else "NVML error {0}".format(code)

    def error(self, code: int, function: str) -> NvmlError:
        return NvmlError(code, function, self.error_string(code))

    def _status(self, name: str, *args: t.Any) -> int:
        """Call and return the raw nvmlReturn_t (for loops that expect codes)."""
        return int(self._function(name)(*args))

    def _call(self, name: str, *args: t.Any) -> None:
        ret = self._status(name, *args)
        if ret != NVML_SUCCESS:
            raise self.error(ret, name)

    def _call_with_fallback(self, name: str, args: tuple[t.Any, ...], fallback_args: tuple[t.Any, ...]) -> str:
        """Call `name`, or its FALLBACKS entry; returns the name that answered."""
        try:
            self._call(name, *args)
            return name
        except NvmlError as err:
            older, triggers = FALLBACKS[name]
            if err.code not in triggers:
                raise
        self._call(older, *fallback_args)
        return older

    def _string(self, name: str, size: int, *handle: t.Any) -> str:
        buf = ctypes.create_string_buffer(size)
        self._call(name, *handle, buf, size)
        return _text(buf.value)

    def _uint(self, name: str, *args: t.Any) -> int:
        value = ctypes.c_uint(0)
        self._call(name, *args, ctypes.byref(value))
        return value.value

    # -- lifetime --------------------------------------------------------------
    def init(self) -> None:
        try:
            self._call_with_fallback("nvmlInit_v2", (), ())
        except NvmlError as err:
            if err.code != NVML_ERROR_GPU_NOT_FOUND:
                raise
            # A driver without GPUs (all excluded, or fallen off the bus) is
            # still a driver: nvidia-smi answers "No devices were found" and
            # the versions, and so do we.
            self._call("nvmlInitWithFlags", NVML_INIT_FLAG_NO_GPUS)
        self.initialized = True

    def shutdown(self) -> None:
        if self.initialized:
            self.initialized = False
            self._call("nvmlShutdown")

    def __enter__(self) -> NvmlSession:
        self.init()
        return self

    def __exit__(self, exc_type: t.Any, exc: t.Any, tb: t.Any) -> None:
        try:
            self.shutdown()
        except NvmlError:
            # Never mask the error that is already unwinding the block.
            if exc_type is None:
                raise

    # -- system ----------------------------------------------------------------
    def driver_version(self) -> str:
        return self._string("nvmlSystemGetDriverVersion", NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE)

    def nvml_version(self) -> str:
        return self._string("nvmlSystemGetNVMLVersion", NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE)

    def cuda_driver_version_int(self) -> int:
        value = ctypes.c_int(0)
        self._call_with_fallback("nvmlSystemGetCudaDriverVersion_v2", (ctypes.byref(value),), (ctypes.byref(value),))
        return value.value

    def cuda_driver_version(self) -> str:
        return format_cuda_version(self.cuda_driver_version_int())

    def device_count(self) -> int:
        return self._uint("nvmlDeviceGetCount_v2")

    # -- device handles ----------------------------------------------------------
    def _handle(self, name: str, *args: t.Any) -> int | None:
        handle = ctypes.c_void_p()
        self._call(name, *args, ctypes.byref(handle))
        return handle.value

    def device_by_index(self, index: int) -> Device:
        return Device(self._handle("nvmlDeviceGetHandleByIndex_v2", index))

    def device_by_uuid(self, uuid: str) -> Device:
        return Device(self._handle("nvmlDeviceGetHandleByUUID", uuid.encode()))

    def device_by_pci_bus_id(self, bus_id: str) -> Device:
        return Device(self._handle("nvmlDeviceGetHandleByPciBusId_v2", bus_id.encode()))

    # -- device queries (work on MIG device handles too where NVML allows) --------
    def device_index(self, device: Device) -> int:
        return self._uint("nvmlDeviceGetIndex", device.value)

    def device_name(self, device: Device) -> str:
        return self._string("nvmlDeviceGetName", NVML_DEVICE_NAME_V2_BUFFER_SIZE, device.value)

    def device_uuid(self, device: Device) -> str:
        return self._string("nvmlDeviceGetUUID", NVML_DEVICE_UUID_V2_BUFFER_SIZE, device.value)

    def device_serial(self, device: Device) -> str:
        return self._string("nvmlDeviceGetSerial", NVML_DEVICE_SERIAL_BUFFER_SIZE, device.value)

    def device_board_part_number(self, device: Device) -> str:
        return self._string("nvmlDeviceGetBoardPartNumber", NVML_DEVICE_PART_NUMBER_BUFFER_SIZE, device.value)

    def device_minor_number(self, device: Device) -> int:
        return self._uint("nvmlDeviceGetMinorNumber", device.value)

    def device_pci_info(self, device: Device) -> PciInfo:
        pci = _PciInfo()
        args = (device.value, ctypes.byref(pci))
        used = self._call_with_fallback("nvmlDeviceGetPciInfo_v3", args, args)
        bus_id = _text(pci.busId)
        if used != "nvmlDeviceGetPciInfo_v3":
            # v2 fills busId in the legacy 4-digit-domain form; rebuild the
            # NVML_DEVICE_PCI_BUS_ID_FMT form so the value does not depend on
            # the driver's age.
            bus_id = "{0:08X}:{1:02X}:{2:02X}.0".format(pci.domain, pci.bus, pci.device)
        return PciInfo(
            bus_id=bus_id,
            bus_id_legacy=_text(pci.busIdLegacy),
            domain=pci.domain,
            bus=pci.bus,
            device=pci.device,
            pci_device_id=pci.pciDeviceId,
            pci_subsystem_id=pci.pciSubSystemId,
        )

    def device_memory(self, device: Device) -> MemoryInfo:
        mem_v2 = _Memory_v2(version=nvmlMemory_v2)
        mem_v1 = _Memory()
        used = self._call_with_fallback(
            "nvmlDeviceGetMemoryInfo_v2",
            (device.value, ctypes.byref(mem_v2)),
            (device.value, ctypes.byref(mem_v1)),
        )
        if used == "nvmlDeviceGetMemoryInfo_v2":
            return MemoryInfo(total=mem_v2.total, free=mem_v2.free, used=mem_v2.used, reserved=mem_v2.reserved)
        return MemoryInfo(total=mem_v1.total, free=mem_v1.free, used=mem_v1.used, reserved=None)

    def device_architecture(self, device: Device) -> int:
        return self._uint("nvmlDeviceGetArchitecture", device.value)

    def device_compute_capability(self, device: Device) -> tuple[int, int]:
        major, minor = ctypes.c_int(0), ctypes.c_int(0)
        self._call("nvmlDeviceGetCudaComputeCapability", device.value, ctypes.byref(major), ctypes.byref(minor))
        return major.value, minor.value

    def device_persistence_mode(self, device: Device) -> bool:
        mode = ctypes.c_int(0)
        self._call("nvmlDeviceGetPersistenceMode", device.value, ctypes.byref(mode))
        return mode.value == NVML_FEATURE_ENABLED

    def device_compute_processes(self, device: Device) -> list[ProcessInfo]:
        name = "nvmlDeviceGetComputeRunningProcesses_v3"
        count = ctypes.c_uint(0)
        ret = self._status(name, device.value, ctypes.byref(count), None)
        # Processes come and go between the sizing call and the real one, so
        # allocate some slack and retry a few times on INSUFFICIENT_SIZE.
        for _attempt in range(5):
            if ret == NVML_SUCCESS and count.value == 0:
                return []
            if ret not in (NVML_SUCCESS, NVML_ERROR_INSUFFICIENT_SIZE):
                raise self.error(ret, name)
            size = count.value + 8
            infos = (_ProcessInfo * size)()
            count = ctypes.c_uint(size)
            ret = self._status(name, device.value, ctypes.byref(count), infos)
            if ret == NVML_SUCCESS:
                return [self._process(infos[i]) for i in range(count.value)]
        raise self.error(ret, name)

    @staticmethod
    def _process(info: _ProcessInfo) -> ProcessInfo:
        def instance(value: int) -> int | None:
            return None if value == _INVALID_INSTANCE_ID else value

        used = info.usedGpuMemory
        return ProcessInfo(
            pid=info.pid,
            used_memory=None if used == _VALUE_NOT_AVAILABLE_ULL else used,
            gpu_instance_id=instance(info.gpuInstanceId),
            compute_instance_id=instance(info.computeInstanceId),
        )

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

    # -- health reads ---------------------------------------------------------------------
    # One method per NVML call, each with the signature NVML_H gives it. They
    # raise NvmlError like every other query; which codes mean "this GPU or
    # driver cannot tell" is the caller's decision (_nvml_health.read_health).
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
