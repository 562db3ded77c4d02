# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""nvml.h's values: the library's name, the return codes (with their names and
the hints people read next to them), the enums and buffer sizes the binding
passes, and NvmlError, the one exception every NVML call raises.
"""

from __future__ import annotations

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
