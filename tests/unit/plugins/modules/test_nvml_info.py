# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""nvml_info against the simulated NVML library (one subprocess per module run).

Expectations are derived from the fixtures (`simctl.py show`), never
hard-coded, and the fault matrix is generated from the NVML symbols the module
really resolves on clean runs, so a new NVML call cannot go untested.
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import shutil
import subprocess
import tempfile
import threading
import typing as t
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils._nvml import constants as nvml_constants
from ansible_collections.gpufleet.nvidia.plugins.module_utils._nvml import health as nvml_health
from ansible_collections.gpufleet.nvidia.plugins.module_utils._nvml import structs as nvml_structs
from ansible_collections.gpufleet.nvidia.plugins.modules import nvml_info
from ansible_collections.gpufleet.nvidia.tests.unit.plugins import nvml_sim
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.nvml_expected import (
    cuda_version,
    differences,
    expected_facts,
    lost_gpu,
)

PREFERRED_FIXTURE = "dgx-a100-mig-mixed"

# Injected into every call of the matrix. NOT_SUPPORTED and
# FUNCTION_NOT_FOUND must degrade (or fall back); the rest must fail cleanly.
MATRIX_ERRORS = (
    "NOT_SUPPORTED",
    "FUNCTION_NOT_FOUND",
    "NO_PERMISSION",
    "GPU_IS_LOST",
    "UNKNOWN",
    "INSUFFICIENT_SIZE",
    "ARGUMENT_VERSION_MISMATCH",
    "UNINITIALIZED",
)
ERROR_CODES = {name[len("NVML_ERROR_") :]: code for code, name in nvml_constants.ERROR_NAMES.items() if code}
UNAVAILABLE = {nvml_constants.NVML_ERROR_NOT_SUPPORTED, nvml_constants.NVML_ERROR_FUNCTION_NOT_FOUND}


def degradations(actual: t.Any, clean: t.Any, path: str = "nvml") -> list[str]:
    """What differs from the clean run other than values degraded to null/empty/false/unknown."""
    if actual == clean or actual is None or actual == [] or actual is False or actual == "unknown":
        return []
    if isinstance(clean, dict) and isinstance(actual, dict) and set(actual) == set(clean):
        found = []
        for key in clean:
            found += degradations(actual[key], clean[key], path + "." + key)
        return found
    if isinstance(clean, list) and isinstance(actual, list) and len(actual) == len(clean):
        found = []
        for index, (item, want) in enumerate(zip(actual, clean)):
            found += degradations(item, want, "{0}[{1}]".format(path, index))
        if found:
            # A degraded sort key (an id that became null) may reorder a list:
            # accept it when every item still matches a distinct clean item.
            unmatched = list(clean)
            for item in actual:
                match = next((want for want in unmatched if not degradations(item, want)), None)
                if match is None:
                    return found
                unmatched.remove(match)
            return []
        return found
    return ["{0}: {1!r} is neither the clean value {2!r} nor degraded".format(path, actual, clean)]


def assert_exit(outcome: dict[str, t.Any]) -> dict[str, t.Any]:
    assert outcome["kind"] == "exit", (outcome.get("result") or {}).get("msg") or outcome["traceback"]
    result = outcome["result"]
    assert result["changed"] is False
    assert set(result) == {"changed", "nvml"}
    return result["nvml"]


def assert_fail(outcome: dict[str, t.Any]) -> dict[str, t.Any]:
    assert outcome["kind"] == "fail", outcome["traceback"] or outcome["result"]
    result = outcome["result"]
    assert result["failed"] is True
    assert "nvml" in result
    assert "Traceback" not in result["msg"]
    return result


# --- per-fixture facts ------------------------------------------------------------------
def test_there_are_node_fixtures() -> None:
    assert len(nvml_sim.node_fixtures()) >= 5


@pytest.mark.parametrize("gather", [False, True], ids=["facts", "with-profiles"])
@pytest.mark.parametrize("fixture", [p.stem for p in nvml_sim.node_fixtures()])
def test_facts_match_fixture(sim_node: t.Any, fixture: str, gather: bool) -> None:
    node = sim_node(fixture)
    before = node.show()
    nvml = assert_exit(node.run(gather_mig_profiles=gather))
    assert differences(nvml, expected_facts(before, str(nvml_sim.build()), gather)) == []
    # Read-only: the simulated node is exactly as before.
    assert node.show() == before


def test_check_mode_reports_the_same(sim_node: t.Any) -> None:
    node = sim_node(PREFERRED_FIXTURE)
    normal = assert_exit(node.run())
    checked = assert_exit(node.run(_ansible_check_mode=True))
    assert checked == normal


def test_mixed_fixture_exercises_every_mig_shape(sim_node: t.Any) -> None:
    """Guard the guard: the fixture-derived comparison must see real MIG data."""
    nvml = assert_exit(sim_node(PREFERRED_FIXTURE).run(gather_mig_profiles=True))
    migs = [gpu["mig"] for gpu in nvml["gpus"]]
    assert any(len(m["gpu_instances"]) > 1 for m in migs)
    assert any(len(gi["compute_instances"]) > 1 for m in migs for gi in m["gpu_instances"])
    assert any(m["pending_change"] for m in migs)
    assert any(m["profiles"] for m in migs)
    assert any(p["gpu_instance_id"] is not None for gpu in nvml["gpus"] for p in gpu["processes"])
    assert any(p["gpu_instance_id"] is None for gpu in nvml["gpus"] for p in gpu["processes"])


# --- library / driver states -----------------------------------------------------------------
def test_library_not_found(tmp_path: Path) -> None:
    missing = str(tmp_path / "nowhere" / "libnvidia-ml.so.1")
    nvml = assert_exit(nvml_sim.run_module_subprocess("nvml_info", {"library": missing}, tmp_path))
    assert nvml["status"] == "library_not_found"
    assert nvml["driver_loaded"] is False
    assert nvml["library"] == missing
    assert "cannot open shared object file" in nvml["reason"]
    assert (nvml["gpu_count"], nvml["gpus"], nvml["driver_version"], nvml["cuda_driver_version"]) == (0, [], None, None)


def test_default_library_is_found_by_the_loader(sim_library: Path, sim_node: t.Any) -> None:
    node = sim_node("t4-1x")
    env = dict(node.env, LD_LIBRARY_PATH=str(sim_library.parent))
    nvml = assert_exit(nvml_sim.run_module_subprocess("nvml_info", {}, node.workdir / "default", env))
    assert nvml["library"] == "libnvidia-ml.so.1"
    assert differences(nvml, expected_facts(node.show(), "libnvidia-ml.so.1", False)) == []


def test_default_library_missing_from_loader_path(tmp_path: Path) -> None:
    if subprocess.run(["ldconfig", "-p"], stdout=subprocess.PIPE, check=False).stdout.find(b"libnvidia-ml.so.1") >= 0:
        pytest.skip("this host has a libnvidia-ml.so.1 on the loader path")
    env = {"LD_LIBRARY_PATH": ""}
    nvml = assert_exit(nvml_sim.run_module_subprocess("nvml_info", {}, tmp_path, env))
    assert (nvml["status"], nvml["driver_loaded"], nvml["library"]) == ("library_not_found", False, "libnvidia-ml.so.1")


def test_driver_not_loaded(sim_node: t.Any) -> None:
    node = sim_node("dgx-a100-8x40gb")
    node.set("driver_loaded=0")
    nvml = assert_exit(node.run())
    assert (nvml["status"], nvml["driver_loaded"], nvml["gpu_count"], nvml["gpus"]) == ("driver_not_loaded", False, 0, [])
    assert "NVML_ERROR_DRIVER_NOT_LOADED" in nvml["reason"]
    assert "the nvidia kernel module is not loaded" in nvml["reason"]


@pytest.mark.parametrize(
    ("error", "status", "driver_loaded", "reason_part"),
    [
        ("DRIVER_NOT_LOADED", "driver_not_loaded", False, "the nvidia kernel module is not loaded"),
        ("LIBRARY_NOT_FOUND", "library_not_found", False, "NVML_ERROR_LIBRARY_NOT_FOUND"),
        ("LIB_RM_VERSION_MISMATCH", "version_mismatch", True, "reboot or reload the nvidia modules"),
    ],
)
def test_init_status(sim_node: t.Any, error: str, status: str, driver_loaded: bool, reason_part: str) -> None:
    node = sim_node("hgx-h100-8x80gb")
    node.fault("nvmlInit", error)
    outcome = node.run()
    nvml = assert_exit(outcome)
    assert (nvml["status"], nvml["driver_loaded"], nvml["gpu_count"], nvml["gpus"]) == (status, driver_loaded, 0, [])
    assert reason_part in nvml["reason"]
    assert "nvmlShutdown" not in outcome["resolved"]  # init failed: nothing to shut down


def test_init_no_permission_fails_clearly(sim_node: t.Any) -> None:
    node = sim_node("hgx-h100-8x80gb")
    node.fault("nvmlInit", "NO_PERMISSION")
    result = assert_fail(node.run())
    assert result["msg"] == ("nvmlInit_v2 failed: Insufficient Permissions (NVML_ERROR_NO_PERMISSION); run as root (become: true)")
    assert result["nvml"]["reason"] == result["msg"]


def test_no_gpus_still_reports_the_driver(sim_node: t.Any) -> None:
    node = sim_node("t4-1x")
    lines = node.state.read_text(encoding="utf-8").splitlines()
    node.state.write_text("\n".join(line for line in lines if not line.startswith("gpu ")) + "\n", encoding="utf-8")
    outcome = node.run()
    nvml = assert_exit(outcome)
    assert (nvml["status"], nvml["gpu_count"], nvml["gpus"], nvml["driver_version"]) == ("ok", 0, [], "535.230.02")
    assert "nvmlInitWithFlags" in outcome["resolved"]


def test_cuda_version_falls_back_to_v1_without_libcuda(sim_node: t.Any) -> None:
    node = sim_node("hgx-h200-8x141gb")
    node.set("libcuda=0")
    outcome = node.run()
    nvml = assert_exit(outcome)
    assert nvml["cuda_driver_version"] == cuda_version(node.show()["system"]["cuda_driver_version"])
    assert outcome["resolved"].index("nvmlSystemGetCudaDriverVersion_v2") < outcome["resolved"].index("nvmlSystemGetCudaDriverVersion")


def test_unprivileged_user_gets_facts_but_not_placements(sim_node: t.Any) -> None:
    node = sim_node(PREFERRED_FIXTURE)
    unprivileged = {"NVML_SIM_EUID": "1000"}
    nvml = assert_exit(node.run(extra_env=unprivileged))
    assert differences(nvml, expected_facts(node.show(), str(nvml_sim.build()), False)) == []
    result = assert_fail(node.run(extra_env=unprivileged, gather_mig_profiles=True))
    assert result["msg"].startswith("nvmlDeviceGetGpuInstancePossiblePlacements_v2 failed for GPU 0 (GPU-")
    assert result["msg"].endswith("(NVML_ERROR_NO_PERMISSION); run as root (become: true)")


def test_failure_returns_partial_facts_and_shuts_down(sim_node: t.Any) -> None:
    node = sim_node(PREFERRED_FIXTURE)
    clean = assert_exit(node.run())
    node.fault("nvmlDeviceGetSerial", "UNKNOWN", once=True, skip=2)
    outcome = node.run()
    result = assert_fail(outcome)
    uuid = clean["gpus"][2]["uuid"]
    assert result["msg"] == "nvmlDeviceGetSerial failed for GPU 2 ({0}): Unknown Error (NVML_ERROR_UNKNOWN)".format(uuid)
    partial = result["nvml"]
    assert partial["gpus"][:2] == clean["gpus"][:2]
    assert len(partial["gpus"]) == 3
    assert (partial["gpus"][2]["uuid"], partial["gpus"][2]["name"], partial["gpus"][2]["serial"]) == (uuid, clean["gpus"][2]["name"], None)
    assert outcome["resolved"][-1] == "nvmlShutdown"
    # The `once` fault is used up: the next run is clean again.
    assert assert_exit(node.run()) == clean


def test_gpu_lost_mid_read_is_reported_and_the_other_gpus_read(sim_node: t.Any) -> None:
    node = sim_node(PREFERRED_FIXTURE)
    clean = assert_exit(node.run())
    node.fault("nvmlDeviceGetSerial", "GPU_IS_LOST", gpu=2)
    nvml = assert_exit(node.run())
    lost = [gpu["index"] for gpu in nvml["gpus"] if gpu["lost"]]
    assert lost == [2]
    # What was read before the loss stays; everything after keeps its default.
    assert (nvml["gpus"][2]["uuid"], nvml["gpus"][2]["name"]) == (clean["gpus"][2]["uuid"], clean["gpus"][2]["name"])
    assert nvml["gpus"][2]["serial"] is None and nvml["gpus"][2]["pci"] is None
    assert nvml["gpus"][2]["health"] == nvml_health.empty_health()
    assert nvml["gpus"][:2] + nvml["gpus"][3:] == clean["gpus"][:2] + clean["gpus"][3:]


@pytest.mark.parametrize("error", ["GPU_IS_LOST", "UNKNOWN"])
def test_gpu_whose_handle_is_refused_is_lost(sim_node: t.Any, error: str) -> None:
    """A real driver answers a fallen-off GPU's handle with GPU_IS_LOST or, as often, UNKNOWN."""
    node = sim_node("hgx-h100-8x80gb")
    clean = assert_exit(node.run())
    node.fault("nvmlDeviceGetHandleByIndex_v2", error, gpu=3)
    outcome = node.run()
    nvml = assert_exit(outcome)
    assert nvml["gpus"][3] == lost_gpu(3, False)
    assert [gpu for gpu in nvml["gpus"] if gpu["index"] != 3] == [gpu for gpu in clean["gpus"] if gpu["index"] != 3]
    assert outcome["resolved"][-1] == "nvmlShutdown"


def test_other_errors_on_the_handle_still_fail(sim_node: t.Any) -> None:
    node = sim_node("hgx-h100-8x80gb")
    node.fault("nvmlDeviceGetHandleByIndex_v2", "INSUFFICIENT_POWER", gpu=3)
    result = assert_fail(node.run())
    assert result["msg"].startswith("nvmlDeviceGetHandleByIndex_v2 failed for GPU 3: ")


def test_gather_health_false_reads_no_health(sim_node: t.Any) -> None:
    node = sim_node("hgx-h100-8x80gb")
    outcome = node.run(gather_health=False)
    nvml = assert_exit(outcome)
    assert differences(nvml, expected_facts(node.show(), str(nvml_sim.build()), False, gather_health=False)) == []
    assert not set(outcome["resolved"]) & set(nvml_health.HEALTH_CALLS)
    assert all("health" not in gpu and gpu["lost"] is False for gpu in nvml["gpus"])


# --- health on the simulator: `simctl health` sets a GPU's keys (FORMAT.md) -----------------
@functools.cache
def sim_exports(symbol: str) -> bool:
    return hasattr(ctypes.CDLL(str(nvml_sim.build())), symbol)


# (keys set on GPU 1, the symbol that reads them, the path of a leaf and its value after)
HEALTH_CASES = {
    "ecc-burst": (["ecc_vol_corr=250", "ecc_vol_uncorr=3", "ecc_agg_uncorr=3"], "nvmlDeviceGetTotalEccErrors", ("ecc", "volatile", "uncorrected"), 3),
    "remap-pending": (["remap_uncorr=1", "remap_pending=1"], "nvmlDeviceGetRemappedRows", ("remapped_rows", "pending"), True),
    "remap-failure": (["remap_failure=1"], "nvmlDeviceGetRemappedRows", ("remapped_rows", "failure"), True),
    "recovery-action": (["recovery_action=2"], "nvmlDeviceGetFieldValues", ("recovery_action",), 2),
    "link-degrade": (["pcie_gen=3", "pcie_width=8"], "nvmlDeviceGetCurrPcieLinkWidth", ("pcie", "width_current"), 8),
    "nvlink-down": (["nvlink_down=2,5"], "nvmlDeviceGetNvLinkState", ("nvlink", 5, "active"), False),
    "hot": (["temp=91", "clock_event_reasons=0x40"], "nvmlDeviceGetCurrentClocksEventReasons", ("clock_event_reasons", "active"), ["hw_thermal_slowdown"]),
}


@pytest.mark.parametrize("case", sorted(HEALTH_CASES))
def test_health_fault_is_read(sim_node: t.Any, case: str) -> None:
    keys, symbol, path, value = HEALTH_CASES[case]
    if not sim_exports(symbol):
        pytest.skip("the built simulator does not export {0} yet (issue 20, branch i20-sim)".format(symbol))
    node = sim_node("hgx-h100-8x80gb")
    clean = assert_exit(node.run())
    node.simctl("health", "--gpu", "1", *keys)
    nvml = assert_exit(node.run())
    leaf = nvml["gpus"][1]["health"]
    for key in path:
        leaf = leaf[key]
    assert leaf == value
    assert differences(nvml, expected_facts(node.show(), str(nvml_sim.build()), False)) == []
    assert nvml["gpus"][0] == clean["gpus"][0]


def test_simulated_lost_gpu(sim_node: t.Any) -> None:
    if not sim_exports("nvmlDeviceGetEccMode"):
        pytest.skip("the built simulator has no health records yet (issue 20, branch i20-sim)")
    node = sim_node("hgx-h100-8x80gb")
    node.simctl("health", "--gpu", "6", "lost=1")
    nvml = assert_exit(node.run())
    assert nvml["gpus"][6] == lost_gpu(6, False)
    assert [gpu["index"] for gpu in nvml["gpus"] if gpu["lost"]] == [6]


# --- fabric_wait: GPUs whose NVLink fabric registration is still starting -------------------------
def test_a_registration_that_finishes_while_waited_for_reads_completed(sim_node: t.Any) -> None:
    node = sim_node("hgx-h100-8x80gb")
    node.set("fabric_state=in_progress", gpu=2)
    # Fabric Manager finishing about a second into the module's wait.
    later = threading.Timer(1.0, node.set, args=("fabric_state=completed",), kwargs={"gpu": 2})
    later.start()
    try:
        nvml = assert_exit(node.run(fabric_wait=30))
    finally:
        later.join()
    fabric = nvml["gpus"][2]["health"]["fabric"]
    assert fabric["state"] == "completed" and fabric["status"] == "NVML_SUCCESS"
    assert 1 <= fabric["waited_s"] < 30, fabric
    # Only the pending GPU was waited for.
    assert {gpu["health"]["fabric"]["waited_s"] for gpu in nvml["gpus"] if gpu["index"] != 2} == {None}


def test_a_registration_still_starting_when_the_wait_is_up_says_so(sim_node: t.Any) -> None:
    node = sim_node("hgx-h100-8x80gb")
    node.set("fabric_state=not_started", gpu=1)
    nvml = assert_exit(node.run(fabric_wait=2))
    assert nvml["gpus"][1]["health"]["fabric"] == {"state": "not_started", "status": None, "clique_id": None, "cluster_uuid": None, "waited_s": 2}
    # Without a wait the GPU is read once.
    assert assert_exit(node.run())["gpus"][1]["health"]["fabric"]["waited_s"] is None


def test_a_gpu_lost_while_waited_for_is_reported_lost_and_an_error_of_the_new_session_fails_by_name(sim_node: t.Any) -> None:
    node = sim_node("hgx-h100-8x80gb")
    node.set("fabric_state=in_progress", gpu=2)
    # The first read passes; GPU 2 falls off the bus when read again.
    node.fault("nvmlDeviceGetGpuFabricInfoV", "GPU_IS_LOST", skip=1, gpu=2)
    nvml = assert_exit(node.run(fabric_wait=10))
    assert [gpu["index"] for gpu in nvml["gpus"] if gpu["lost"]] == [2]
    # NVML refusing the session the wait opens: a failure naming the call, not a traceback.
    node = sim_node("hgx-h100-8x80gb")
    node.set("fabric_state=in_progress", gpu=2)
    node.fault("nvmlInit_v2", "UNKNOWN", skip=1)
    result = assert_fail(node.run(fabric_wait=10))
    assert result["msg"].startswith("nvmlInit_v2 failed: "), result["msg"]


def test_a_negative_fabric_wait_is_refused(sim_node: t.Any) -> None:
    outcome = sim_node("hgx-h100-8x80gb").run(fabric_wait=-1)
    assert outcome["kind"] == "fail", outcome
    assert outcome["result"]["msg"] == "fabric_wait is -1: give the seconds to wait, or 0 not to wait"


def test_error_inside_a_gpu_instance_names_it(sim_node: t.Any) -> None:
    node = sim_node(PREFERRED_FIXTURE)
    node.fault("nvmlComputeInstanceGetInfo_v2", "UNKNOWN", gpu=2)
    result = assert_fail(node.run())
    assert re.match(r"nvmlComputeInstanceGetInfo_v2 failed for GPU 2 \(GPU-[0-9a-f-]+\) GPU instance 1: ", result["msg"])


def test_real_libnvidia_ml_without_kernel_driver(tmp_path: Path) -> None:
    """Debian's real libnvidia-ml1 on a host without the nvidia kernel module (the Packer bake case)."""
    path = os.environ.get("GPUFLEET_REAL_LIBNVML")
    if not path:
        pytest.skip("GPUFLEET_REAL_LIBNVML is not set (path to a real libnvidia-ml.so.1, e.g. from Debian's libnvidia-ml1 package extracted with dpkg -x)")
    assert os.path.isfile(path), "GPUFLEET_REAL_LIBNVML={0} does not exist".format(path)
    # Not /dev/nvidiactl: NVML running as root creates that node itself.
    if os.path.exists("/proc/driver/nvidia/version"):
        pytest.fail("this test expects a host without the nvidia kernel module, but it is loaded")
    # Real NVML running as root creates /dev/nvidiactl even without a driver;
    # leave the test host as it was.
    had_ctl_node = os.path.exists("/dev/nvidiactl")
    try:
        outcome = nvml_sim.run_module_subprocess("nvml_info", {"library": path}, tmp_path)
    finally:
        if not had_ctl_node and os.path.exists("/dev/nvidiactl"):
            os.remove("/dev/nvidiactl")
    nvml = assert_exit(outcome)
    assert (nvml["status"], nvml["driver_loaded"], nvml["library"]) == ("driver_not_loaded", False, path)
    assert nvml["reason"].startswith("{0} loaded, but nvmlInit_v2: Driver Not Loaded".format(path))
    assert outcome["resolved"] == ["nvmlInit_v2"]


# --- the fault matrix: every NVML call the module makes x injected errors --------------------
@functools.cache
def clean_runs() -> dict[str, dict[str, t.Any]]:
    """Outcome of a clean gather_mig_profiles run on every node fixture (computed once)."""
    nvml_sim.build()
    runs = {}
    workdir = Path(tempfile.mkdtemp(prefix="nvml-info-clean-"))
    try:
        for fixture in nvml_sim.node_fixtures():
            node = nvml_sim.SimNode(workdir / fixture.stem, fixture)
            outcome = node.run(gather_mig_profiles=True)
            if outcome["kind"] != "exit":
                raise RuntimeError("clean run on {0} did not succeed: {1}".format(fixture.stem, outcome))
            runs[fixture.stem] = outcome
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return runs


def matrix_targets() -> list[tuple[str, str]]:
    """(call, fixture) for every symbol resolved in a clean run, on a fixture that makes the call."""
    runs = clean_runs()
    order = sorted(runs, key=lambda name: name != PREFERRED_FIXTURE)
    calls: list[str] = []
    for name in order:
        calls += [c for c in runs[name]["resolved"] if c not in calls]
    return [(call, next(name for name in order if call in runs[name]["resolved"])) for call in calls]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "nvml_call" in metafunc.fixturenames:
        targets = matrix_targets()
        metafunc.parametrize(("nvml_call", "fixture"), targets, ids=[target[0] for target in targets])


def test_matrix_covers_the_binding() -> None:
    calls = [target[0] for target in matrix_targets()]
    assert set(calls) <= set(nvml_structs.PROTOTYPES)
    # The calls the module cannot do without are all really made.
    assert nvml_info.NvmlFactsCollector.REQUIRED_CALLS - {"nvmlInit", "nvmlInitWithFlags"} <= set(calls)
    assert len(calls) >= 25


def _device_scoped(call: str) -> bool:
    return call.startswith(("nvmlDevice", "nvmlGpuInstance", "nvmlComputeInstance")) and call != "nvmlDeviceGetCount_v2"


def _should_degrade(call: str, code: int) -> bool:
    fallback = nvml_structs.FALLBACKS.get(call)
    if fallback and code in fallback[1]:
        return True  # the older entry point answers instead
    if call in nvml_health.HEALTH_CALLS and code in nvml_health.UNAVAILABLE:
        return True
    return code in UNAVAILABLE and call not in nvml_info.NvmlFactsCollector.REQUIRED_CALLS


def _loses_the_gpu(call: str, code: int) -> bool:
    if call == "nvmlDeviceGetHandleByIndex_v2":
        return code in (nvml_constants.NVML_ERROR_GPU_IS_LOST, nvml_constants.NVML_ERROR_UNKNOWN)
    return code == nvml_constants.NVML_ERROR_GPU_IS_LOST and _device_scoped(call)


def _without_lost(gpu: dict[str, t.Any]) -> dict[str, t.Any]:
    return {key: value for key, value in gpu.items() if key != "lost"}


@pytest.mark.parametrize("error", MATRIX_ERRORS)
def test_injected_error(sim_node: t.Any, nvml_call: str, fixture: str, error: str) -> None:
    if nvml_call == "nvmlDeviceGetRetiredPages" and error == "INSUFFICIENT_SIZE":
        pytest.skip("not an error of this call: its sizing answer 'there are pages' (count read as given)")
    clean = clean_runs()[fixture]["result"]["nvml"]
    node = sim_node(fixture)
    node.fault(nvml_call, error)
    outcome = node.run(gather_mig_profiles=True)
    assert outcome["kind"] in ("exit", "fail"), outcome["traceback"]
    code = ERROR_CODES[error]

    if _should_degrade(nvml_call, code):
        nvml = assert_exit(outcome)
        assert nvml["status"] == "ok"
        assert degradations(nvml, clean) == []
        return

    if _loses_the_gpu(nvml_call, code):
        # Every GPU that makes the call is lost; it keeps what was read before
        # (degraded otherwise), the others are read in full, nothing fails.
        nvml = assert_exit(outcome)
        assert len(nvml["gpus"]) == len(clean["gpus"])
        assert any(gpu["lost"] for gpu in nvml["gpus"])
        for gpu, want in zip(nvml["gpus"], clean["gpus"]):
            if gpu["lost"]:
                assert degradations(_without_lost(gpu), _without_lost(want)) == []
            else:
                assert gpu == want
        return

    result = assert_fail(outcome)
    msg = result["msg"]
    assert msg.startswith(nvml_call + " failed"), msg
    assert "(NVML_ERROR_{0})".format(error) in msg
    hint = nvml_constants.HINTS.get(code)
    if hint:
        assert msg.endswith("; " + hint)
    partial = result["nvml"]
    if nvml_call.startswith("nvmlInit"):
        assert partial["gpus"] == [] and partial["reason"] == msg
        return
    assert partial["driver_loaded"] is True
    assert outcome["resolved"][-1] == "nvmlShutdown"  # shut down even after the failure
    if not _device_scoped(nvml_call):
        assert " for GPU " not in msg
        return
    where = re.match(re.escape(nvml_call) + r" failed for GPU (\d+)(?: \((GPU-[0-9a-f-]+)\))?[ :]", msg)
    assert where, msg
    index = int(where.group(1))
    if nvml_call not in ("nvmlDeviceGetUUID", "nvmlDeviceGetHandleByIndex_v2"):
        assert where.group(2) == clean["gpus"][index]["uuid"]
        assert partial["gpus"][index]["uuid"] == clean["gpus"][index]["uuid"]
    # GPUs before the failing one are complete.
    assert partial["gpus"][:index] == clean["gpus"][:index]
