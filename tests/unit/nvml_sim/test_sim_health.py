"""The simulator's health entry points (ctypes) and simctl's health/inject commands.

Semantics checked against nvml.h (NVIDIA/go-nvml@2f9e261fe40a:gen/nvml/nvml.h):
count queries, per-value field statuses, NOT_SUPPORTED by architecture and
NVML_ERROR_GPU_IS_LOST for a GPU that fell off the bus.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from typing import Any, List, Tuple

import pytest

SIM_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))), "tests", "nvml-sim")

U = ctypes.c_uint
ULL = ctypes.c_ulonglong
P = ctypes.c_void_p
SUCCESS, INVALID_ARGUMENT, NOT_SUPPORTED, INSUFFICIENT_SIZE, GPU_IS_LOST = 0, 2, 3, 7, 15
ARGUMENT_VERSION_MISMATCH = 25


class FieldValue(ctypes.Structure):
    _fields_ = [
        ("fieldId", U),
        ("scopeId", U),
        ("timestamp", ctypes.c_longlong),
        ("latencyUsec", ctypes.c_longlong),
        ("valueType", ctypes.c_int),
        ("nvmlReturn", ctypes.c_int),
        ("value", ULL),
    ]


class FabricInfo(ctypes.Structure):
    _fields_ = [("clusterUuid", ctypes.c_ubyte * 16), ("status", ctypes.c_int), ("cliqueId", U), ("state", ctypes.c_ubyte)]


class FabricInfoV3(ctypes.Structure):
    _fields_ = [
        ("version", U),
        ("clusterUuid", ctypes.c_ubyte * 16),
        ("status", ctypes.c_int),
        ("cliqueId", U),
        ("state", ctypes.c_ubyte),
        ("healthMask", U),
        ("healthSummary", ctypes.c_ubyte),
    ]


def test_layouts_match_nvml_h() -> None:
    """nvmlFieldValue_t is 40 bytes with value at 32; the fabric structs 28 / 40 bytes."""
    assert ctypes.sizeof(FieldValue) == 40 and FieldValue.value.offset == 32
    assert ctypes.sizeof(FabricInfo) == 28 and ctypes.sizeof(FabricInfoV3) == 40


def handle(nvml: ctypes.CDLL, index: int) -> Tuple[int, int]:
    out = P()
    rc = nvml.nvmlDeviceGetHandleByIndex_v2(U(index), ctypes.byref(out))
    return rc, out.value or 0


def u32(nvml: ctypes.CDLL, func: str, dev: int) -> Tuple[int, int]:
    out = U(12345)
    rc = getattr(nvml, func)(P(dev), ctypes.byref(out))
    return rc, out.value


def ecc_total(nvml: ctypes.CDLL, dev: int, uncorrected: int, aggregate: int) -> Tuple[int, int]:
    out = ULL(0)
    rc = nvml.nvmlDeviceGetTotalEccErrors(P(dev), ctypes.c_int(uncorrected), ctypes.c_int(aggregate), ctypes.byref(out))
    return rc, out.value


def remapped(nvml: ctypes.CDLL, dev: int) -> Tuple[int, List[int]]:
    vals = [U(9), U(9), U(9), U(9)]
    rc = nvml.nvmlDeviceGetRemappedRows(P(dev), *[ctypes.byref(v) for v in vals])
    return rc, [v.value for v in vals]


def recovery(nvml: ctypes.CDLL, dev: int, field: int = 230) -> Tuple[int, FieldValue]:
    values = (FieldValue * 1)()
    values[0].fieldId = field
    rc = nvml.nvmlDeviceGetFieldValues(P(dev), ctypes.c_int(1), values)
    return rc, values[0]


def nvlink(nvml: ctypes.CDLL, dev: int, link: int) -> Tuple[int, int]:
    out = ctypes.c_int(9)
    rc = nvml.nvmlDeviceGetNvLinkState(P(dev), U(link), ctypes.byref(out))
    return rc, out.value


def simctl_cli(sim: Any, *args: str, env: Any = None) -> subprocess.CompletedProcess:
    environ = dict(os.environ, NVML_SIM_STATE=sim.state_path, NVML_SIM_RUNDIR=sim.run_dir, NVML_SIM_KMSG=os.path.join(sim.tmp, "kmsg"), **(env or {}))
    return subprocess.run(
        [sys.executable, os.path.join(SIM_DIR, "simctl.py"), *args], env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False
    )


def test_healthy_hgx_h100(sim: Any, nvml: ctypes.CDLL) -> None:
    """A fixture without faults reads as a healthy Hopper GPU with the model's values."""
    sim.render("hgx-h100-8x80gb")
    assert nvml.nvmlInit_v2() == SUCCESS
    rc, dev = handle(nvml, 0)
    assert rc == SUCCESS
    cur, pend = ctypes.c_int(9), ctypes.c_int(9)
    assert nvml.nvmlDeviceGetEccMode(P(dev), ctypes.byref(cur), ctypes.byref(pend)) == SUCCESS
    assert (cur.value, pend.value) == (1, 1)
    for unc in (0, 1):
        for agg in (0, 1):
            assert ecc_total(nvml, dev, unc, agg) == (SUCCESS, 0)
    assert ecc_total(nvml, dev, 2, 0)[0] == INVALID_ARGUMENT
    assert remapped(nvml, dev) == (SUCCESS, [0, 0, 0, 0])
    count = U(0)
    assert nvml.nvmlDeviceGetRetiredPages(P(dev), ctypes.c_int(0), ctypes.byref(count), None) == NOT_SUPPORTED
    rc, value = recovery(nvml, dev)
    assert (rc, value.nvmlReturn, value.valueType, value.value & 0xFFFFFFFF) == (SUCCESS, SUCCESS, 1, 0)
    assert value.timestamp > 0
    assert u32(nvml, "nvmlDeviceGetCurrPcieLinkGeneration", dev) == (SUCCESS, 5)
    assert u32(nvml, "nvmlDeviceGetMaxPcieLinkGeneration", dev) == (SUCCESS, 5)
    assert u32(nvml, "nvmlDeviceGetCurrPcieLinkWidth", dev) == (SUCCESS, 16)
    assert u32(nvml, "nvmlDeviceGetMaxPcieLinkWidth", dev) == (SUCCESS, 16)
    assert u32(nvml, "nvmlDeviceGetPcieReplayCounter", dev) == (SUCCESS, 0)
    assert [nvlink(nvml, dev, link) for link in range(18)] == [(SUCCESS, 1)] * 18
    assert nvlink(nvml, dev, 18)[0] == INVALID_ARGUMENT
    info = FabricInfoV3(version=40 | (3 << 24))
    assert nvml.nvmlDeviceGetGpuFabricInfoV(P(dev), ctypes.byref(info)) == SUCCESS
    # A single-node HGX board: completed, with the all-zero cluster UUID of a system outside any
    # multi-node NVLink domain (the fixture's source).
    assert (info.state, info.status, info.cliqueId) == (3, 0, 0)
    assert bytes(info.clusterUuid) == bytes(16)
    bad = FabricInfoV3(version=40 | (9 << 24))
    assert nvml.nvmlDeviceGetGpuFabricInfoV(P(dev), ctypes.byref(bad)) == ARGUMENT_VERSION_MISMATCH
    legacy = FabricInfo()
    assert nvml.nvmlDeviceGetGpuFabricInfo(P(dev), ctypes.byref(legacy)) == SUCCESS and legacy.state == 3
    temp = U(0)
    assert nvml.nvmlDeviceGetTemperature(P(dev), ctypes.c_int(0), ctypes.byref(temp)) == SUCCESS
    assert temp.value == 35
    for kind, want in ((0, 92), (1, 89)):
        assert nvml.nvmlDeviceGetTemperatureThreshold(P(dev), ctypes.c_int(kind), ctypes.byref(temp)) == SUCCESS
        assert temp.value == want
    mask = ULL(9)
    assert nvml.nvmlDeviceGetCurrentClocksEventReasons(P(dev), ctypes.byref(mask)) == SUCCESS and mask.value == 1
    assert nvml.nvmlDeviceGetCurrentClocksThrottleReasons(P(dev), ctypes.byref(mask)) == SUCCESS
    assert u32(nvml, "nvmlDeviceGetPowerUsage", dev) == (SUCCESS, 74710)
    assert u32(nvml, "nvmlDeviceGetEnforcedPowerLimit", dev) == (SUCCESS, 700000)
    assert nvml.nvmlShutdown() == SUCCESS


def test_unknown_field_is_a_per_value_not_supported(sim: Any, nvml: ctypes.CDLL) -> None:
    sim.render("t4-1x")
    assert nvml.nvmlInit_v2() == SUCCESS
    dev = handle(nvml, 0)[1]
    values = (FieldValue * 2)()
    values[0].fieldId, values[1].fieldId = 9999, 230
    assert nvml.nvmlDeviceGetFieldValues(P(dev), ctypes.c_int(2), values) == SUCCESS
    assert values[0].nvmlReturn == NOT_SUPPORTED and values[1].nvmlReturn == SUCCESS
    assert nvml.nvmlDeviceGetFieldValues(P(dev), ctypes.c_int(1), None) == INVALID_ARGUMENT
    assert nvml.nvmlShutdown() == SUCCESS


def test_pre_ampere_retires_pages_with_count_query(sim: Any, nvml: ctypes.CDLL) -> None:
    """Volta: retired pages answer (pageCount in/out, INSUFFICIENT_SIZE), remapped rows do not."""
    sim.render("v100-8x")
    with sim.edit() as state:
        state.gpu(1).fields.update(retired_sbe="2", retired_dbe="1", retired_pending="1")
    assert nvml.nvmlInit_v2() == SUCCESS
    dev = handle(nvml, 1)[1]
    assert remapped(nvml, dev)[0] == NOT_SUPPORTED
    count = U(0)
    assert nvml.nvmlDeviceGetRetiredPages(P(dev), ctypes.c_int(0), ctypes.byref(count), None) == INSUFFICIENT_SIZE
    assert count.value == 2
    addresses = (ULL * 2)()
    assert nvml.nvmlDeviceGetRetiredPages(P(dev), ctypes.c_int(0), ctypes.byref(count), addresses) == SUCCESS
    assert count.value == 2 and len(set(addresses)) == 2
    count = U(0)
    assert nvml.nvmlDeviceGetRetiredPages(P(dev), ctypes.c_int(1), ctypes.byref(count), None) == INSUFFICIENT_SIZE
    assert count.value == 1
    assert nvml.nvmlDeviceGetRetiredPages(P(dev), ctypes.c_int(2), ctypes.byref(count), None) == INVALID_ARGUMENT
    pending = ctypes.c_int(0)
    assert nvml.nvmlDeviceGetRetiredPagesPendingStatus(P(dev), ctypes.byref(pending)) == SUCCESS
    assert pending.value == 1
    healthy = handle(nvml, 0)[1]
    count = U(0)
    assert nvml.nvmlDeviceGetRetiredPages(P(healthy), ctypes.c_int(0), ctypes.byref(count), None) == SUCCESS
    assert count.value == 0
    assert nvml.nvmlShutdown() == SUCCESS


def test_no_nvlink_no_fabric_no_ecc(sim: Any, nvml: ctypes.CDLL) -> None:
    """A GPU without NVLink / fabric / ECC answers NOT_SUPPORTED for those calls only."""
    sim.render("l40s-4x")
    with sim.edit() as state:
        state.gpu(0).fields["ecc_supported"] = "0"
    assert nvml.nvmlInit_v2() == SUCCESS
    dev = handle(nvml, 0)[1]
    assert nvlink(nvml, dev, 0)[0] == NOT_SUPPORTED
    info = FabricInfo()
    assert nvml.nvmlDeviceGetGpuFabricInfo(P(dev), ctypes.byref(info)) == NOT_SUPPORTED
    cur, pend = ctypes.c_int(9), ctypes.c_int(9)
    assert nvml.nvmlDeviceGetEccMode(P(dev), ctypes.byref(cur), ctypes.byref(pend)) == NOT_SUPPORTED
    assert ecc_total(nvml, dev, 1, 0)[0] == NOT_SUPPORTED
    assert remapped(nvml, dev)[0] == NOT_SUPPORTED
    assert u32(nvml, "nvmlDeviceGetMaxPcieLinkGeneration", dev) == (SUCCESS, 4)
    other = handle(nvml, 1)[1]
    assert remapped(nvml, other) == (SUCCESS, [0, 0, 0, 0])
    assert nvml.nvmlShutdown() == SUCCESS


def test_state_without_health_keys_is_healthy(sim: Any, nvml: ctypes.CDLL) -> None:
    """An old state file (no health keys): ECC on with zero counts, link data absent -> NOT_SUPPORTED."""
    sim.render("dgx-a100-8x40gb")
    with sim.edit() as state:
        for gpu in state.of_type("gpu"):
            for key in sim.ctl.HEALTH_KEYS:
                gpu.fields.pop(key, None)
    assert nvml.nvmlInit_v2() == SUCCESS
    dev = handle(nvml, 0)[1]
    assert ecc_total(nvml, dev, 1, 1) == (SUCCESS, 0)
    assert remapped(nvml, dev) == (SUCCESS, [0, 0, 0, 0])
    assert recovery(nvml, dev)[1].nvmlReturn == SUCCESS
    assert u32(nvml, "nvmlDeviceGetCurrPcieLinkWidth", dev)[0] == NOT_SUPPORTED
    assert u32(nvml, "nvmlDeviceGetPowerUsage", dev)[0] == NOT_SUPPORTED
    assert nvml.nvmlShutdown() == SUCCESS


def test_remapped_rows_not_supported_with_mig_instances(sim: Any, nvml: ctypes.CDLL) -> None:
    """nvml.h: on MIG-enabled GPUs with active instances the remapped-row query is not supported."""
    sim.render("dgx-a100-mig-mixed")
    shown = sim.show()
    assert nvml.nvmlInit_v2() == SUCCESS
    for gpu in shown["gpus"]:
        rc = remapped(nvml, handle(nvml, gpu["index"])[1])[0]
        assert rc == (NOT_SUPPORTED if gpu["gis"] else SUCCESS), gpu["index"]
    assert nvml.nvmlShutdown() == SUCCESS


def test_a_rack_tray_reports_its_nvlink_domain(sim: Any, nvml: ctypes.CDLL) -> None:
    """A GB300 NVL72 tray is in a multi-node NVLink domain: every GPU reports the rack's cluster UUID and clique."""
    sim.render("gb300-nvl72-tray")
    assert nvml.nvmlInit_v2() == SUCCESS
    count = U(0)
    assert nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) == SUCCESS and count.value == 4
    for index in range(4):
        info = FabricInfoV3(version=40 | (3 << 24))
        assert nvml.nvmlDeviceGetGpuFabricInfoV(P(handle(nvml, index)[1]), ctypes.byref(info)) == SUCCESS
        assert (info.state, info.status, info.cliqueId) == (3, 0, 1)
        assert bytes(info.clusterUuid).hex() == "3c9e1f207a4b4d2e8f615b0a9c7d2e14"
    assert nvml.nvmlShutdown() == SUCCESS


def test_lost_gpu(sim: Any, nvml: ctypes.CDLL) -> None:
    """lost=1: every call on that GPU, and its handle lookups, return GPU_IS_LOST; the others work."""
    sim.render("hgx-h100-8x80gb")
    shown = sim.show()["gpus"]
    assert nvml.nvmlInit_v2() == SUCCESS
    # handles stay valid across sessions: one taken before the GPU fell off the bus
    before = handle(nvml, 2)[1]
    good = handle(nvml, 3)[1]
    assert nvml.nvmlShutdown() == SUCCESS
    assert simctl_cli(sim, "inject", "gpu-lost", "--gpu", "2").returncode == 0
    assert nvml.nvmlInit_v2() == SUCCESS
    count = U(0)
    assert nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) == SUCCESS and count.value == 8
    assert handle(nvml, 2)[0] == GPU_IS_LOST
    out = P()
    assert nvml.nvmlDeviceGetHandleByUUID(shown[2]["uuid"].encode(), ctypes.byref(out)) == GPU_IS_LOST
    assert nvml.nvmlDeviceGetHandleByPciBusId_v2(shown[2]["bus_id"].encode(), ctypes.byref(out)) == GPU_IS_LOST
    assert u32(nvml, "nvmlDeviceGetPowerUsage", before)[0] == GPU_IS_LOST
    assert ecc_total(nvml, before, 1, 0)[0] == GPU_IS_LOST
    assert recovery(nvml, before)[0] == GPU_IS_LOST
    assert u32(nvml, "nvmlDeviceGetIndex", before)[0] == GPU_IS_LOST
    assert u32(nvml, "nvmlDeviceGetPowerUsage", good) == (SUCCESS, 74710)
    assert nvml.nvmlShutdown() == SUCCESS


def test_faults_take_precedence_over_health(sim: Any, nvml: ctypes.CDLL) -> None:
    sim.render("t4-1x")
    with sim.edit() as state:
        state.records.append(sim.ctl.Record("fault", {"call": "nvmlDeviceGetPowerUsage", "error": "999", "mode": "always", "skip": "0", "gpu": "0"}))
    assert nvml.nvmlInit_v2() == SUCCESS
    assert u32(nvml, "nvmlDeviceGetPowerUsage", handle(nvml, 0)[1])[0] == 999
    assert nvml.nvmlShutdown() == SUCCESS


@pytest.mark.parametrize(
    "fault, extra, check",
    [
        ("ecc-burst", [], lambda n, d: ecc_total(n, d, 0, 0) == (SUCCESS, 100) and ecc_total(n, d, 1, 1) == (SUCCESS, 1)),
        ("ecc-burst", ["--corrected", "5", "--uncorrected", "0"], lambda n, d: ecc_total(n, d, 0, 1) == (SUCCESS, 5)),
        ("remap-pending", [], lambda n, d: remapped(n, d) == (SUCCESS, [0, 1, 1, 0])),
        ("remap-failure", [], lambda n, d: remapped(n, d) == (SUCCESS, [0, 0, 0, 1])),
        (
            "link-degrade",
            [],
            lambda n, d: (
                (u32(n, "nvmlDeviceGetCurrPcieLinkGeneration", d), u32(n, "nvmlDeviceGetCurrPcieLinkWidth", d), u32(n, "nvmlDeviceGetMaxPcieLinkWidth", d))
                == ((0, 3), (0, 8), (0, 16))
            ),
        ),
        ("link-degrade", ["--gen", "4", "--width", "4"], lambda n, d: u32(n, "nvmlDeviceGetCurrPcieLinkWidth", d) == (0, 4)),
        ("nvlink-down", ["--link", "5"], lambda n, d: nvlink(n, d, 5) == (SUCCESS, 0) and nvlink(n, d, 4) == (SUCCESS, 1)),
        ("gpu-lost", [], lambda n, d: u32(n, "nvmlDeviceGetPowerUsage", d)[0] == GPU_IS_LOST),
    ],
)
def test_inject(sim: Any, nvml: ctypes.CDLL, fault: str, extra: List[str], check: Any) -> None:
    """Each named fault changes exactly what NVML reports for that GPU; `clear` restores health."""
    sim.render("dgx-a100-8x40gb")
    assert nvml.nvmlInit_v2() == SUCCESS
    dev = handle(nvml, 1)[1]
    other = handle(nvml, 0)[1]
    assert not check(nvml, dev)
    assert nvml.nvmlShutdown() == SUCCESS
    proc = simctl_cli(sim, "inject", fault, "--gpu", "1", *extra)
    assert proc.returncode == 0, proc.stderr
    assert nvml.nvmlInit_v2() == SUCCESS
    assert check(nvml, dev)
    assert not check(nvml, other)
    assert nvml.nvmlShutdown() == SUCCESS
    assert simctl_cli(sim, "inject", "clear", "--gpu", "1").returncode == 0
    assert nvml.nvmlInit_v2() == SUCCESS
    assert not check(nvml, dev)
    assert nvml.nvmlShutdown() == SUCCESS


def test_inject_refuses_what_the_gpu_lacks(sim: Any) -> None:
    sim.render("v100-8x")
    proc = simctl_cli(sim, "inject", "remap-pending", "--gpu", "0")
    assert proc.returncode == 2 and "does not remap rows" in proc.stderr
    proc = simctl_cli(sim, "inject", "nvlink-down", "--gpu", "0", "--link", "6")
    assert proc.returncode == 2 and "6 NVLink links" in proc.stderr
    proc = simctl_cli(sim, "health", "--gpu", "0", "bogus=1")
    assert proc.returncode == 2


def test_health_sets_and_removes_keys(sim: Any) -> None:
    sim.render("t4-1x")
    assert simctl_cli(sim, "health", "--gpu", "0", "temp=91", "clock_event_reasons=0x40").returncode == 0
    gpu = sim.show()["gpus"][0]
    assert (gpu["temp"], gpu["clock_event_reasons"]) == (91, 0x40)
    assert simctl_cli(sim, "health", "--gpu", "0", "temp=").returncode == 0
    assert "temp" not in sim.show()["gpus"][0]
    assert simctl_cli(sim, "health", "--gpu", "0", "fabric_state=sideways").returncode == 2


def test_xid_appends_kmsg_records(sim: Any) -> None:
    """The driver's formats: lower-case 'PCI:dddd:bb:dd', sequence numbers continue."""
    sim.render("dgx-a100-8x40gb")
    kmsg = os.path.join(sim.tmp, "kmsg")
    assert simctl_cli(sim, "inject", "xid", "--gpu", "0", "--xid", "79").returncode == 0
    assert (
        simctl_cli(sim, "inject", "xid", "--gpu", "7", "--xid", "48", "--text", "DBE (double bit error)", "--pid", "4242", "--name", "python3").returncode == 0
    )
    assert simctl_cli(sim, "inject", "xid", "--gpu", "0", "--fallen-off-bus").returncode == 0
    lines = open(kmsg, encoding="utf-8").read().splitlines()
    assert oct(os.stat(kmsg).st_mode & 0o777) == "0o600"
    heads = [line.split(";", 1)[0].split(",") for line in lines]
    assert [h[0] for h in heads] == ["3", "3", "3"] and [h[1] for h in heads] == ["0", "1", "2"]
    assert [h[3] for h in heads] == ["-", "-", "-"]
    bus7 = sim.show()["gpus"][7]["bus_id"]  # 00000000:BD:00.0
    assert [line.split(";", 1)[1] for line in lines] == [
        "NVRM: Xid (PCI:0000:07:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
        f"NVRM: Xid (PCI:0000:{bus7[9:11].lower()}:00): 48, pid=4242, name=python3, DBE (double bit error)",
        "NVRM: GPU 0000:07:00.0: GPU has fallen off the bus.",
    ]
    proc = simctl_cli(sim, "inject", "gpu-lost", "--gpu", "1", "--log")
    assert proc.returncode == 0 and len(proc.stdout.splitlines()) == 2
    assert len(open(kmsg, encoding="utf-8").read().splitlines()) == 5
