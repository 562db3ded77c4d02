# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""The hardware health of one GPU, read through NVML: ``read_health(session, device)``.

Standard library only (it runs on the node: nvml_info and the boot check both
use it). Every leaf is the plain answer of one NVML call, named in
HEALTH_CALLS; judging the answers is _verify/health.py's business, not this one's.

A call this GPU or driver cannot answer leaves its leaves null (UNAVAILABLE).
NVML_ERROR_GPU_IS_LOST and every other error propagate as NvmlError: the
caller decides what a lost GPU means for its report.
"""

from __future__ import annotations

import typing as t

from .constants import (
    ERROR_NAMES,
    NVML_AGGREGATE_ECC,
    NVML_CLOCKS_EVENT_REASON_APPLICATIONS_CLOCKS_SETTING,
    NVML_CLOCKS_EVENT_REASON_DISPLAY_CLOCK_SETTING,
    NVML_CLOCKS_EVENT_REASON_GPU_IDLE,
    NVML_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN,
    NVML_CLOCKS_EVENT_REASON_HW_SLOWDOWN,
    NVML_CLOCKS_EVENT_REASON_HW_THERMAL_SLOWDOWN,
    NVML_CLOCKS_EVENT_REASON_SW_POWER_CAP,
    NVML_CLOCKS_EVENT_REASON_SW_THERMAL_SLOWDOWN,
    NVML_CLOCKS_EVENT_REASON_SYNC_BOOST,
    NVML_ERROR_FUNCTION_NOT_FOUND,
    NVML_ERROR_INVALID_ARGUMENT,
    NVML_ERROR_NO_DATA,
    NVML_ERROR_NO_PERMISSION,
    NVML_ERROR_NOT_SUPPORTED,
    NVML_FI_DEV_GET_GPU_RECOVERY_ACTION,
    NVML_GPU_FABRIC_STATE_COMPLETED,
    NVML_GPU_FABRIC_STATE_IN_PROGRESS,
    NVML_GPU_FABRIC_STATE_NOT_STARTED,
    NVML_GPU_FABRIC_STATE_NOT_SUPPORTED,
    NVML_MEMORY_ERROR_TYPE_CORRECTED,
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
    NVML_NVLINK_MAX_LINKS,
    NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR,
    NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
    NVML_SUCCESS,
    NVML_TEMPERATURE_GPU,
    NVML_TEMPERATURE_THRESHOLD_SHUTDOWN,
    NVML_TEMPERATURE_THRESHOLD_SLOWDOWN,
    NVML_VOLATILE_ECC,
    NvmlError,
)
from .session import NvmlSession, answer_or_none
from .values import Device, to_dict

T = t.TypeVar("T")

# "This GPU or driver cannot tell": the field becomes null. NO_PERMISSION
# counts because an unprivileged read of health must still report the rest,
# NO_DATA because a counter that has never been sampled is not an error.
UNAVAILABLE = frozenset(
    {
        NVML_ERROR_NOT_SUPPORTED,
        NVML_ERROR_FUNCTION_NOT_FOUND,
        NVML_ERROR_NO_PERMISSION,
        NVML_ERROR_NO_DATA,
    }
)
# nvmlDeviceGetNvLinkState answers INVALID_ARGUMENT for a link index beyond
# the GPU's links: such a link does not exist, it is not an error.
_NO_SUCH_LINK = UNAVAILABLE | {NVML_ERROR_INVALID_ARGUMENT}

# Every NVML entry point read_health may call (fallbacks included), for tests
# and the real-GPU check.
HEALTH_CALLS = (
    "nvmlDeviceGetEccMode",
    "nvmlDeviceGetTotalEccErrors",
    "nvmlDeviceGetRetiredPages",
    "nvmlDeviceGetRetiredPagesPendingStatus",
    "nvmlDeviceGetRemappedRows",
    "nvmlDeviceGetFieldValues",
    "nvmlDeviceGetCurrPcieLinkGeneration",
    "nvmlDeviceGetMaxPcieLinkGeneration",
    "nvmlDeviceGetCurrPcieLinkWidth",
    "nvmlDeviceGetMaxPcieLinkWidth",
    "nvmlDeviceGetPcieReplayCounter",
    "nvmlDeviceGetNvLinkState",
    "nvmlDeviceGetGpuFabricInfoV",
    "nvmlDeviceGetGpuFabricInfo",
    "nvmlDeviceGetTemperatureV",
    "nvmlDeviceGetTemperature",
    "nvmlDeviceGetTemperatureThreshold",
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetCurrentClocksThrottleReasons",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetEnforcedPowerLimit",
)

FABRIC_STATES = {
    NVML_GPU_FABRIC_STATE_NOT_SUPPORTED: "not_supported",
    NVML_GPU_FABRIC_STATE_NOT_STARTED: "not_started",
    NVML_GPU_FABRIC_STATE_IN_PROGRESS: "in_progress",
    NVML_GPU_FABRIC_STATE_COMPLETED: "completed",
}
# The states of a registration that has not finished yet (nvml_info's fabric_wait reads them again).
FABRIC_PENDING = frozenset(("not_started", "in_progress"))

# In bit order, so `active` lists reasons in a stable order.
CLOCK_EVENT_REASONS = (
    (NVML_CLOCKS_EVENT_REASON_GPU_IDLE, "gpu_idle"),
    (NVML_CLOCKS_EVENT_REASON_APPLICATIONS_CLOCKS_SETTING, "applications_clocks_setting"),
    (NVML_CLOCKS_EVENT_REASON_SW_POWER_CAP, "sw_power_cap"),
    (NVML_CLOCKS_EVENT_REASON_HW_SLOWDOWN, "hw_slowdown"),
    (NVML_CLOCKS_EVENT_REASON_SYNC_BOOST, "sync_boost"),
    (NVML_CLOCKS_EVENT_REASON_SW_THERMAL_SLOWDOWN, "sw_thermal_slowdown"),
    (NVML_CLOCKS_EVENT_REASON_HW_THERMAL_SLOWDOWN, "hw_thermal_slowdown"),
    (NVML_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN, "hw_power_brake_slowdown"),
    (NVML_CLOCKS_EVENT_REASON_DISPLAY_CLOCK_SETTING, "display_clock_setting"),
)


def empty_health() -> dict[str, t.Any]:
    """The shape read_health returns, every leaf null: what a GPU reports that could not be read."""
    return {
        "ecc": {
            "mode_current": None,
            "mode_pending": None,
            "volatile": {"corrected": None, "uncorrected": None},
            "aggregate": {"corrected": None, "uncorrected": None},
        },
        "retired_pages": {"single_bit_ecc": None, "double_bit_ecc": None, "pending": None},
        "remapped_rows": {"correctable": None, "uncorrectable": None, "pending": None, "failure": None},
        "recovery_action": None,
        "pcie": {"gen_current": None, "gen_max": None, "width_current": None, "width_max": None, "replay_counter": None},
        "nvlink": [],
        "fabric": None,
        "temperature": {"current_c": None, "slowdown_c": None, "shutdown_c": None},
        "clock_event_reasons": {"mask": None, "active": []},
        "power": {"draw_w": None, "limit_w": None},
    }


def _optional(query: t.Callable[..., T], *args: t.Any) -> T | None:
    return answer_or_none(UNAVAILABLE, query, *args)


def read_health(session: NvmlSession, device: Device) -> dict[str, t.Any]:
    """Health of one physical GPU (see empty_health for the shape).

    Raises NvmlError for NVML_ERROR_GPU_IS_LOST and any other error that is
    not in UNAVAILABLE.
    """
    s, dev, opt = session, device, _optional
    health = empty_health()

    ecc = health["ecc"]
    mode = opt(s.device_ecc_mode, dev)
    if mode is not None:
        ecc.update(mode_current=mode.current, mode_pending=mode.pending)
    for key, counter in (("volatile", NVML_VOLATILE_ECC), ("aggregate", NVML_AGGREGATE_ECC)):
        ecc[key] = {
            "corrected": opt(s.device_total_ecc_errors, dev, NVML_MEMORY_ERROR_TYPE_CORRECTED, counter),
            "uncorrected": opt(s.device_total_ecc_errors, dev, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, counter),
        }

    health["retired_pages"] = {
        "single_bit_ecc": opt(s.device_retired_pages_count, dev, NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS),
        "double_bit_ecc": opt(s.device_retired_pages_count, dev, NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR),
        "pending": opt(s.device_retired_pages_pending, dev),
    }

    rows = opt(s.device_remapped_rows, dev)
    if rows is not None:
        # RemappedRows' fields are the fact's keys, in the same order.
        health["remapped_rows"] = to_dict(rows)

    # The call answers SUCCESS even when a field is unknown to the driver: the
    # field's own nvmlReturn says so, and its value is then undefined.
    fields = opt(s.device_field_values, dev, [NVML_FI_DEV_GET_GPU_RECOVERY_ACTION])
    if fields and fields[0].nvml_return == NVML_SUCCESS and fields[0].value is not None:
        health["recovery_action"] = int(fields[0].value)

    health["pcie"] = {
        "gen_current": opt(s.device_pcie_link_generation_current, dev),
        "gen_max": opt(s.device_pcie_link_generation_max, dev),
        "width_current": opt(s.device_pcie_link_width_current, dev),
        "width_max": opt(s.device_pcie_link_width_max, dev),
        "replay_counter": opt(s.device_pcie_replay_counter, dev),
    }

    health["nvlink"] = _nvlinks(s, dev)
    health["fabric"] = read_fabric(s, dev)

    health["temperature"] = {
        "current_c": opt(s.device_temperature, dev, NVML_TEMPERATURE_GPU),
        "slowdown_c": opt(s.device_temperature_threshold, dev, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN),
        "shutdown_c": opt(s.device_temperature_threshold, dev, NVML_TEMPERATURE_THRESHOLD_SHUTDOWN),
    }

    mask = opt(s.device_clock_event_reasons, dev)
    if mask is not None:
        health["clock_event_reasons"] = {
            "mask": mask,
            "active": [name for bit, name in CLOCK_EVENT_REASONS if mask & bit],
        }

    health["power"] = {
        "draw_w": _watts(opt(s.device_power_usage, dev)),
        "limit_w": _watts(opt(s.device_enforced_power_limit, dev)),
    }
    return health


def _nvlinks(s: NvmlSession, dev: Device) -> list[dict[str, t.Any]]:
    links = []
    for link in range(NVML_NVLINK_MAX_LINKS):
        try:
            active = s.device_nvlink_state(dev, link)
        except NvmlError as err:
            if err.code == NVML_ERROR_FUNCTION_NOT_FOUND:
                break  # no such entry point: no other link will answer either
            if err.code in _NO_SUCH_LINK:
                continue
            raise
        links.append({"link": link, "active": active})
    return links


def read_fabric(s: NvmlSession, dev: Device) -> dict[str, t.Any] | None:
    """The GPU's NVLink fabric registration (see empty_health), or None where it has no fabric."""
    info = _optional(s.device_fabric_info, dev)
    if info is None:
        return None
    # The header: status, clique and cluster are meaningful only once the
    # probe has completed.
    completed = info.state == NVML_GPU_FABRIC_STATE_COMPLETED
    return {
        "state": FABRIC_STATES.get(info.state, "unknown"),
        "status": ERROR_NAMES.get(info.status, "NVML_ERROR_{0}".format(info.status)) if completed else None,
        "clique_id": info.clique_id if completed else None,
        "cluster_uuid": _uuid(info.cluster_uuid) if completed else None,
        "waited_s": None,
    }


def _uuid(raw: bytes) -> str:
    """16 bytes in the 8-4-4-4-12 form nvidia-smi prints the fabric's cluster UUID in."""
    text = raw.hex()
    return "-".join((text[:8], text[8:12], text[12:16], text[16:20], text[20:]))


def _watts(milliwatts: int | None) -> float | None:
    return None if milliwatts is None else round(milliwatts / 1000.0, 3)
