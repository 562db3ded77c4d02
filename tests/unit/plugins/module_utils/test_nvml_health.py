# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""read_health through the real ctypes binding, against a fake NVML library.

The fake's entry points are C callbacks (ctypes.CFUNCTYPE) built from the
binding's own prototypes, so every argument and every out-pointer crosses
the real ctypes marshalling; a GPU is a dict of answers, and an entry point
the fake lacks is a missing symbol, exactly as on an older driver. The
simulated library covers the same reads in test_nvml_info.py once it has
them.
"""

from __future__ import annotations

import copy
import ctypes
import typing as t

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils._nvml import constants as nvml_constants
from ansible_collections.gpufleet.nvidia.plugins.module_utils._nvml import health as nvml_health
from ansible_collections.gpufleet.nvidia.plugins.module_utils._nvml import session as nvml_session
from ansible_collections.gpufleet.nvidia.plugins.module_utils._nvml import structs as nvml_structs
from ansible_collections.gpufleet.nvidia.plugins.module_utils._nvml import values as nvml_values

HANDLE = 0x5A5A0000


def _ok(*pairs: t.Any) -> int:
    """Write values through (pointer, value) pairs; NVML_SUCCESS."""
    for pointer, value in pairs:
        pointer[0] = value
    return nvml_constants.NVML_SUCCESS


class FakeNvml:
    """Stands in for the CDLL: attribute lookup is symbol lookup."""

    def __init__(self, gpu: dict[str, t.Any], missing: t.Iterable[str] = (), errors: dict[str, int] | None = None):
        self.gpu = gpu
        self.missing = set(missing)
        self.errors = dict(errors or {})
        self.calls: list[tuple[t.Any, ...]] = []
        self._keep: dict[str, t.Any] = {}

    def __getattr__(self, name: str) -> t.Any:
        if not name.startswith("nvml"):
            raise AttributeError(name)
        impl = getattr(self, "_" + name, None)
        if name in self.missing or impl is None:
            raise AttributeError(name)
        if name not in self._keep:

            def entry(*args: t.Any) -> int:
                assert args[0] == HANDLE, "the handle reached the library unchanged"
                self.calls.append((name,) + args[1:])
                if name in self.errors:
                    return self.errors[name]
                return impl(*args[1:])

            self._keep[name] = ctypes.CFUNCTYPE(ctypes.c_int, *nvml_structs.PROTOTYPES[name])(entry)
        return self._keep[name]

    # -- entry points (pointer arguments arrive as ctypes pointers) ------------
    def _answer(self, key: str) -> t.Any:
        value = self.gpu.get(key)
        return nvml_constants.NVML_ERROR_NOT_SUPPORTED if value is None else value

    def _nvmlDeviceGetEccMode(self, current: t.Any, pending: t.Any) -> int:
        mode = self._answer("ecc_mode")
        return mode if isinstance(mode, int) else _ok((current, mode[0]), (pending, mode[1]))

    def _nvmlDeviceGetTotalEccErrors(self, error_type: int, counter: int, out: t.Any) -> int:
        counts = self._answer("ecc")
        return counts if isinstance(counts, int) else _ok((out, counts[(error_type, counter)]))

    def _nvmlDeviceGetRetiredPages(self, cause: int, count: t.Any, addresses: t.Any) -> int:
        pages = self._answer("retired")
        if isinstance(pages, int):
            return pages
        assert not addresses, "only the count is asked for"
        count[0] = pages[cause]
        return nvml_constants.NVML_ERROR_INSUFFICIENT_SIZE if pages[cause] else nvml_constants.NVML_SUCCESS

    def _nvmlDeviceGetRetiredPagesPendingStatus(self, pending: t.Any) -> int:
        value = self.gpu.get("retired_pending")
        return nvml_constants.NVML_ERROR_NOT_SUPPORTED if value is None else _ok((pending, value))

    def _nvmlDeviceGetRemappedRows(self, corr: t.Any, unc: t.Any, pending: t.Any, failure: t.Any) -> int:
        rows = self._answer("remap")
        return rows if isinstance(rows, int) else _ok(*zip((corr, unc, pending, failure), rows))

    def _nvmlDeviceGetFieldValues(self, count: int, values: t.Any) -> int:
        for i in range(count):
            answer = self.gpu.get("fields", {}).get(values[i].fieldId)
            if answer is None:
                values[i].nvmlReturn = nvml_constants.NVML_ERROR_NOT_SUPPORTED
                continue
            value_type, value = answer
            values[i].valueType = value_type
            values[i].nvmlReturn = nvml_constants.NVML_SUCCESS
            member = {
                nvml_constants.NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
                nvml_constants.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
                nvml_constants.NVML_VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
            }[value_type]
            setattr(values[i].value, member, value)
        return nvml_constants.NVML_SUCCESS

    def _uint(self, key: str, out: t.Any) -> int:
        value = self.gpu.get(key)
        return nvml_constants.NVML_ERROR_NOT_SUPPORTED if value is None else _ok((out, value))

    def _nvmlDeviceGetCurrPcieLinkGeneration(self, out: t.Any) -> int:
        return self._uint("gen", out)

    def _nvmlDeviceGetMaxPcieLinkGeneration(self, out: t.Any) -> int:
        return self._uint("gen_max", out)

    def _nvmlDeviceGetCurrPcieLinkWidth(self, out: t.Any) -> int:
        return self._uint("width", out)

    def _nvmlDeviceGetMaxPcieLinkWidth(self, out: t.Any) -> int:
        return self._uint("width_max", out)

    def _nvmlDeviceGetPcieReplayCounter(self, out: t.Any) -> int:
        return self._uint("replay", out)

    def _nvmlDeviceGetNvLinkState(self, link: int, active: t.Any) -> int:
        links = self.gpu.get("nvlinks")
        if links is None:
            return nvml_constants.NVML_ERROR_NOT_SUPPORTED
        if link >= len(links):
            return nvml_constants.NVML_ERROR_INVALID_ARGUMENT
        return _ok((active, links[link]))

    def _fabric(self, info: t.Any) -> None:
        state, status, clique, uuid = self.gpu["fabric"]
        info.state, info.status, info.cliqueId = state, status, clique
        info.clusterUuid[:] = list(uuid)

    def _nvmlDeviceGetGpuFabricInfoV(self, address: int) -> int:
        if self.gpu.get("fabric") is None:
            return nvml_constants.NVML_ERROR_NOT_SUPPORTED
        version = ctypes.c_uint.from_address(address).value
        known = {nvml_structs.nvmlGpuFabricInfo_v3: nvml_structs._GpuFabricInfo_v3, nvml_structs.nvmlGpuFabricInfo_v2: nvml_structs._GpuFabricInfo_v2}
        if version not in known or version not in self.gpu.get("fabric_versions", known):
            return nvml_constants.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        info = known[version].from_address(address)
        self._fabric(info)
        info.healthMask = 0
        return nvml_constants.NVML_SUCCESS

    def _nvmlDeviceGetGpuFabricInfo(self, info: t.Any) -> int:
        if self.gpu.get("fabric") is None:
            return nvml_constants.NVML_ERROR_NOT_SUPPORTED
        self._fabric(info[0])
        return nvml_constants.NVML_SUCCESS

    def _nvmlDeviceGetTemperatureV(self, reading: t.Any) -> int:
        assert reading[0].version == nvml_structs.nvmlTemperature_v1 and reading[0].sensorType == nvml_constants.NVML_TEMPERATURE_GPU
        reading[0].temperature = self._answer("temp")
        return nvml_constants.NVML_SUCCESS

    def _nvmlDeviceGetTemperature(self, sensor: int, out: t.Any) -> int:
        assert sensor == nvml_constants.NVML_TEMPERATURE_GPU
        return _ok((out, self._answer("temp")))

    def _nvmlDeviceGetTemperatureThreshold(self, threshold: int, out: t.Any) -> int:
        return _ok((out, self.gpu["thresholds"][threshold]))

    def _nvmlDeviceGetCurrentClocksEventReasons(self, mask: t.Any) -> int:
        return _ok((mask, self._answer("clocks")))

    def _nvmlDeviceGetCurrentClocksThrottleReasons(self, mask: t.Any) -> int:
        return _ok((mask, self._answer("clocks")))

    def _nvmlDeviceGetPowerUsage(self, out: t.Any) -> int:
        return self._uint("power_mw", out)

    def _nvmlDeviceGetEnforcedPowerLimit(self, out: t.Any) -> int:
        return self._uint("power_limit_mw", out)


CLUSTER = bytes(range(0x10, 0x20))
# An H100 SXM on an NVSwitch node: 18 links, links 3 and 7 down.
HOPPER: dict[str, t.Any] = {
    "ecc_mode": (1, 1),
    "ecc": {(0, 0): 5, (1, 0): 1, (0, 1): 70, (1, 1): 2},
    "retired": None,
    "retired_pending": None,
    "remap": (4, 1, 1, 0),
    "fields": {nvml_constants.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION: (nvml_constants.NVML_VALUE_TYPE_UNSIGNED_INT, 1)},
    "gen": 5,
    "gen_max": 5,
    "width": 8,
    "width_max": 16,
    "replay": 12,
    "nvlinks": [0 if link in (3, 7) else 1 for link in range(18)],
    "fabric": (nvml_constants.NVML_GPU_FABRIC_STATE_COMPLETED, nvml_constants.NVML_SUCCESS, 32766, CLUSTER),
    "temp": 41,
    "thresholds": {nvml_constants.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN: 92, nvml_constants.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: 87},
    "clocks": 0x1 | 0x4 | 0x40 | 0x1000,
    "power_mw": 71234,
    "power_limit_mw": 700000,
}
HOPPER_HEALTH = {
    "ecc": {"mode_current": True, "mode_pending": True, "volatile": {"corrected": 5, "uncorrected": 1}, "aggregate": {"corrected": 70, "uncorrected": 2}},
    "retired_pages": {"single_bit_ecc": None, "double_bit_ecc": None, "pending": None},
    "remapped_rows": {"correctable": 4, "uncorrectable": 1, "pending": True, "failure": False},
    "recovery_action": 1,
    "pcie": {"gen_current": 5, "gen_max": 5, "width_current": 8, "width_max": 16, "replay_counter": 12},
    "nvlink": [{"link": link, "active": link not in (3, 7)} for link in range(18)],
    "fabric": {"state": "completed", "status": "NVML_SUCCESS", "clique_id": 32766, "cluster_uuid": "10111213-1415-1617-1819-1a1b1c1d1e1f", "waited_s": None},
    "temperature": {"current_c": 41, "slowdown_c": 87, "shutdown_c": 92},
    # 0x1000 is a bit this binding has no name for: kept in the mask, not named.
    "clock_event_reasons": {"mask": 0x1045, "active": ["gpu_idle", "sw_power_cap", "hw_thermal_slowdown"]},
    "power": {"draw_w": 71.234, "limit_w": 700.0},
}


@pytest.fixture
def read(monkeypatch: pytest.MonkeyPatch) -> t.Callable[..., t.Any]:
    """read(gpu, missing=(), errors={}) -> (health, fake): read_health through a session on the fake."""

    def run(gpu: dict[str, t.Any], missing: t.Iterable[str] = (), errors: dict[str, int] | None = None) -> t.Any:
        fake = FakeNvml(gpu, missing, errors)
        monkeypatch.setattr(ctypes, "CDLL", lambda path: fake)
        session = nvml_session.NvmlSession("fake-libnvidia-ml.so.1")
        return nvml_health.read_health(session, nvml_values.Device(HANDLE)), fake

    return run


def test_every_read_of_a_hopper_gpu(read: t.Any) -> None:
    health, fake = read(HOPPER)
    assert health == HOPPER_HEALTH
    called = {call[0] for call in fake.calls}
    # Newest entry points only: no fallback was needed.
    assert called == set(nvml_health.HEALTH_CALLS) - {"nvmlDeviceGetGpuFabricInfo", "nvmlDeviceGetTemperature", "nvmlDeviceGetCurrentClocksThrottleReasons"}
    # Links past the GPU's 18 answer INVALID_ARGUMENT and are absent; all 36 are asked.
    assert [call[1] for call in fake.calls if call[0] == "nvmlDeviceGetNvLinkState"] == list(range(36))


def test_empty_health_has_the_same_shape() -> None:
    def shape(value: t.Any) -> t.Any:
        return {k: shape(v) for k, v in value.items()} if isinstance(value, dict) else None

    empty = nvml_health.empty_health()
    assert shape({k: v for k, v in empty.items() if k not in ("nvlink", "fabric")}) == shape(
        {k: v for k, v in HOPPER_HEALTH.items() if k not in ("nvlink", "fabric")}
    )
    assert (empty["nvlink"], empty["fabric"]) == ([], None)


def test_pre_ampere_retired_pages_and_no_remapper(read: t.Any) -> None:
    volta = dict(HOPPER, retired={0: 0, 1: 3}, retired_pending=1, remap=None, fabric=None, nvlinks=None, fields={})
    health, fake = read(volta)
    assert health["retired_pages"] == {"single_bit_ecc": 0, "double_bit_ecc": 3, "pending": True}
    assert health["remapped_rows"] == {"correctable": None, "uncorrectable": None, "pending": None, "failure": None}
    assert (health["fabric"], health["nvlink"], health["recovery_action"]) == (None, [], None)
    # The sizing call only, one per cause.
    assert [c[1] for c in fake.calls if c[0] == "nvmlDeviceGetRetiredPages"] == [0, 1]


def test_old_driver_falls_back_to_the_older_calls(read: t.Any) -> None:
    """A driver from before the V / EventReasons calls: the deprecated ones answer the same."""
    newer = ("nvmlDeviceGetGpuFabricInfoV", "nvmlDeviceGetTemperatureV", "nvmlDeviceGetCurrentClocksEventReasons")
    health, fake = read(HOPPER, missing=newer)
    assert health == HOPPER_HEALTH
    called = [c[0] for c in fake.calls]
    assert not set(newer) & set(called)
    assert {"nvmlDeviceGetGpuFabricInfo", "nvmlDeviceGetTemperature", "nvmlDeviceGetCurrentClocksThrottleReasons"} <= set(called)


def test_fabric_v2_when_the_driver_does_not_know_v3(read: t.Any) -> None:
    health, fake = read(dict(HOPPER, fabric_versions={nvml_structs.nvmlGpuFabricInfo_v2}))
    assert health["fabric"] == HOPPER_HEALTH["fabric"]
    assert [c[0] for c in fake.calls].count("nvmlDeviceGetGpuFabricInfoV") == 2
    assert "nvmlDeviceGetGpuFabricInfo" not in [c[0] for c in fake.calls]


@pytest.mark.parametrize(
    "state,name",
    [
        (nvml_constants.NVML_GPU_FABRIC_STATE_NOT_STARTED, "not_started"),
        (nvml_constants.NVML_GPU_FABRIC_STATE_IN_PROGRESS, "in_progress"),
        (nvml_constants.NVML_GPU_FABRIC_STATE_NOT_SUPPORTED, "not_supported"),
    ],
)
def test_fabric_before_the_probe_completes(read: t.Any, state: int, name: str) -> None:
    health, _fake = read(dict(HOPPER, fabric=(state, nvml_constants.NVML_ERROR_UNKNOWN, 7, CLUSTER)))
    # The header: status, clique and cluster mean something only once completed.
    assert health["fabric"] == {"state": name, "status": None, "clique_id": None, "cluster_uuid": None, "waited_s": None}


def test_fabric_probe_failure_is_reported_by_name(read: t.Any) -> None:
    health, _fake = read(dict(HOPPER, fabric=(nvml_constants.NVML_GPU_FABRIC_STATE_COMPLETED, nvml_constants.NVML_ERROR_NOT_READY, 0, CLUSTER)))
    assert health["fabric"]["status"] == "NVML_ERROR_NOT_READY"


def test_recovery_action_field_not_known_to_the_driver(read: t.Any) -> None:
    """nvmlDeviceGetFieldValues succeeds; the field's own nvmlReturn says NOT_SUPPORTED."""
    health, fake = read(dict(HOPPER, fields={}))
    assert health["recovery_action"] is None
    assert [c for c in fake.calls if c[0] == "nvmlDeviceGetFieldValues"][0][1] == 1


def test_recovery_action_of_another_value_type(read: t.Any) -> None:
    fields = {nvml_constants.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION: (nvml_constants.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, 4)}
    health, _fake = read(dict(HOPPER, fields=fields))
    assert health["recovery_action"] == 4


# Which leaves each entry point answers for (the rest must stay as in HOPPER_HEALTH).
LEAVES = {
    "nvmlDeviceGetEccMode": [("ecc", "mode_current"), ("ecc", "mode_pending")],
    "nvmlDeviceGetTotalEccErrors": [
        ("ecc", "volatile", "corrected"),
        ("ecc", "volatile", "uncorrected"),
        ("ecc", "aggregate", "corrected"),
        ("ecc", "aggregate", "uncorrected"),
    ],
    "nvmlDeviceGetRemappedRows": [("remapped_rows", k) for k in ("correctable", "uncorrectable", "pending", "failure")],
    "nvmlDeviceGetFieldValues": [("recovery_action",)],
    "nvmlDeviceGetCurrPcieLinkGeneration": [("pcie", "gen_current")],
    "nvmlDeviceGetMaxPcieLinkGeneration": [("pcie", "gen_max")],
    "nvmlDeviceGetCurrPcieLinkWidth": [("pcie", "width_current")],
    "nvmlDeviceGetMaxPcieLinkWidth": [("pcie", "width_max")],
    "nvmlDeviceGetPcieReplayCounter": [("pcie", "replay_counter")],
    "nvmlDeviceGetNvLinkState": [("nvlink",)],
    "nvmlDeviceGetGpuFabricInfoV": [("fabric",)],
    "nvmlDeviceGetTemperatureV": [("temperature", "current_c")],
    "nvmlDeviceGetTemperatureThreshold": [("temperature", "slowdown_c"), ("temperature", "shutdown_c")],
    "nvmlDeviceGetCurrentClocksEventReasons": [("clock_event_reasons", "mask"), ("clock_event_reasons", "active")],
    "nvmlDeviceGetPowerUsage": [("power", "draw_w")],
    "nvmlDeviceGetEnforcedPowerLimit": [("power", "limit_w")],
}
# Pre-Ampere entry points, checked on a Volta-like GPU.
PRE_AMPERE_LEAVES = {
    "nvmlDeviceGetRetiredPages": [("retired_pages", "single_bit_ecc"), ("retired_pages", "double_bit_ecc")],
    "nvmlDeviceGetRetiredPagesPendingStatus": [("retired_pages", "pending")],
}
# What an unanswered leaf reads as: lists empty, everything else null.
EMPTY = {("nvlink",): [], ("clock_event_reasons", "active"): []}
# The older entry point a missing newer one falls back to (then nothing degrades).
FALLS_BACK = {"nvmlDeviceGetGpuFabricInfoV", "nvmlDeviceGetTemperatureV", "nvmlDeviceGetCurrentClocksEventReasons"}


def test_every_health_call_is_in_the_matrix() -> None:
    older = {nvml_structs.FALLBACKS[name][0] for name in FALLS_BACK}
    assert set(LEAVES) | set(PRE_AMPERE_LEAVES) | older == set(nvml_health.HEALTH_CALLS)


def _set(tree: dict[str, t.Any], path: tuple[str, ...], value: t.Any) -> None:
    for key in path[:-1]:
        tree = tree[key]
    tree[path[-1]] = value


UNAVAILABLE_ERRORS = ("NOT_SUPPORTED", "FUNCTION_NOT_FOUND", "NO_PERMISSION", "NO_DATA")


@pytest.mark.parametrize("error", UNAVAILABLE_ERRORS)
@pytest.mark.parametrize("call", sorted(set(LEAVES) | set(PRE_AMPERE_LEAVES)))
def test_an_unavailable_call_nulls_only_its_own_leaves(read: t.Any, call: str, error: str) -> None:
    gpu = HOPPER
    if call in PRE_AMPERE_LEAVES:
        gpu = dict(HOPPER, retired={0: 2, 1: 1}, retired_pending=0)
    clean, _fake = read(gpu)
    if error == "FUNCTION_NOT_FOUND":
        health, fake = read(gpu, missing=[call])
    else:
        health, fake = read(gpu, errors={call: getattr(nvml_constants, "NVML_ERROR_" + error)})
    expected = copy.deepcopy(clean)
    if not (error == "FUNCTION_NOT_FOUND" and call in FALLS_BACK):
        for path in dict(LEAVES, **PRE_AMPERE_LEAVES)[call]:
            _set(expected, path, EMPTY.get(path))
    assert health == expected
    if error == "FUNCTION_NOT_FOUND" and call == "nvmlDeviceGetNvLinkState":
        assert not [c for c in fake.calls if c[0] == call]


@pytest.mark.parametrize("error", ["GPU_IS_LOST", "UNKNOWN", "UNINITIALIZED", "ARGUMENT_VERSION_MISMATCH"])
@pytest.mark.parametrize("call", sorted(set(LEAVES) - FALLS_BACK))
def test_other_errors_propagate(read: t.Any, call: str, error: str) -> None:
    code = getattr(nvml_constants, "NVML_ERROR_" + error)
    with pytest.raises(nvml_constants.NvmlError) as caught:
        read(HOPPER, errors={call: code})
    assert (caught.value.code, caught.value.function) == (code, call)


@pytest.mark.parametrize("call", sorted(FALLS_BACK))
def test_lost_gpu_on_a_newer_call_is_not_papered_over_by_the_fallback(read: t.Any, call: str) -> None:
    with pytest.raises(nvml_constants.NvmlError) as caught:
        read(HOPPER, errors={call: nvml_constants.NVML_ERROR_GPU_IS_LOST})
    assert (caught.value.code, caught.value.function) == (nvml_constants.NVML_ERROR_GPU_IS_LOST, call)


def test_struct_layouts_match_the_header() -> None:
    """sizeof as the C compiler lays nvml.h's structs out on LP64 (NVML_H): field by field,
    a 16-byte UUID, ints aligned to 4, long long to 8, trailing padding to the largest member."""
    assert ctypes.sizeof(nvml_structs._FieldValue) == 40 and nvml_structs._FieldValue.value.offset == 32
    assert nvml_structs._FieldValue.nvmlReturn.offset == 28
    assert ctypes.sizeof(nvml_structs._GpuFabricInfo) == 28 and nvml_structs._GpuFabricInfo.state.offset == 24
    assert ctypes.sizeof(nvml_structs._GpuFabricInfo_v2) == 36 and nvml_structs._GpuFabricInfo_v2.healthMask.offset == 32
    assert ctypes.sizeof(nvml_structs._GpuFabricInfo_v3) == 40 and nvml_structs._GpuFabricInfo_v3.healthSummary.offset == 36
    assert ctypes.sizeof(nvml_structs._Temperature_v1) == 12
    # NVML_STRUCT_VERSION(data, ver) = sizeof | ver << 24
    assert (nvml_structs.nvmlGpuFabricInfo_v2, nvml_structs.nvmlGpuFabricInfo_v3, nvml_structs.nvmlTemperature_v1) == (0x02000024, 0x03000028, 0x0100000C)
