# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Tests of the ctypes NVML binding: ABI facts, errors, and the simulated library."""

from __future__ import annotations

import ctypes
import ctypes.util
import typing as t

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils._nvml import constants as nvml_constants
from ansible_collections.gpufleet.nvidia.plugins.module_utils._nvml import session as nvml_session
from ansible_collections.gpufleet.nvidia.plugins.module_utils._nvml import structs as nvml_structs
from ansible_collections.gpufleet.nvidia.plugins.module_utils._nvml import values as nvml_values


# --- ABI: sizes and offsets pinned to nvml.h (LP64) ---------------------------
@pytest.mark.parametrize(
    ("struct", "size", "offsets"),
    [
        (nvml_structs._PciInfo, 68, {"domain": 16, "pciDeviceId": 28, "pciSubSystemId": 32, "busId": 36}),
        (nvml_structs._Memory, 24, {"used": 16}),
        (nvml_structs._Memory_v2, 40, {"total": 8, "reserved": 16, "used": 32}),
        (nvml_structs._ProcessInfo, 24, {"usedGpuMemory": 8, "gpuInstanceId": 16, "computeInstanceId": 20}),
        (nvml_structs._GpuInstancePlacement, 8, {"size": 4}),
        (nvml_structs._GpuInstanceProfileInfo, 48, {"memorySizeMB": 40}),
        (nvml_structs._GpuInstanceProfileInfo_v2, 152, {"id": 4, "memorySizeMB": 48, "name": 56}),
        (nvml_structs._GpuInstanceInfo, 24, {"id": 8, "profileId": 12, "placement": 16}),
        (nvml_structs._ComputeInstancePlacement, 8, {"size": 4}),
        (nvml_structs._ComputeInstanceProfileInfo, 36, {"sharedOfaCount": 32}),
        (nvml_structs._ComputeInstanceProfileInfo_v2, 136, {"id": 4, "name": 40}),
        (nvml_structs._ComputeInstanceInfo, 32, {"gpuInstance": 8, "id": 16, "profileId": 20, "placement": 24}),
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else None,
)
def test_struct_layout_matches_nvml_h(struct: t.Any, size: int, offsets: dict[str, int]) -> None:
    assert ctypes.sizeof(struct) == size
    for field, offset in offsets.items():
        assert getattr(struct, field).offset == offset, field


def test_struct_versions() -> None:
    # pynvml hard-codes the same words; NVML rejects any other value.
    assert nvml_structs.nvmlMemory_v2 == 0x02000028
    assert nvml_structs.nvmlGpuInstanceProfileInfo_v2 == 0x02000098
    assert nvml_structs.nvmlComputeInstanceProfileInfo_v2 == 0x02000088


def test_return_codes_and_enums_match_nvml_h() -> None:
    assert (nvml_constants.NVML_ERROR_NOT_SUPPORTED, nvml_constants.NVML_ERROR_NO_PERMISSION, nvml_constants.NVML_ERROR_DRIVER_NOT_LOADED) == (3, 4, 9)
    assert (nvml_constants.NVML_ERROR_LIBRARY_NOT_FOUND, nvml_constants.NVML_ERROR_FUNCTION_NOT_FOUND, nvml_constants.NVML_ERROR_GPU_IS_LOST) == (12, 13, 15)
    assert (nvml_constants.NVML_ERROR_RESET_REQUIRED, nvml_constants.NVML_ERROR_LIB_RM_VERSION_MISMATCH, nvml_constants.NVML_ERROR_IN_USE) == (16, 18, 19)
    assert (nvml_constants.NVML_ERROR_INSUFFICIENT_RESOURCES, nvml_constants.NVML_ERROR_UNKNOWN) == (23, 999)
    assert nvml_constants.NVML_GPU_INSTANCE_PROFILE_3_SLICE_GFX == 0x11
    assert nvml_constants.NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE_NVL == 0x8
    assert nvml_constants.ERROR_NAMES[18] == "NVML_ERROR_LIB_RM_VERSION_MISMATCH"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(12040, "12.4"), (11080, "11.8"), (12090, "12.9"), (13000, "13.0"), (10010, "10.1"), (12020, "12.2")],
)
def test_format_cuda_version(raw: int, expected: str) -> None:
    assert nvml_values.format_cuda_version(raw) == expected


@pytest.mark.parametrize(
    ("arch", "name"),
    [
        (7, "ampere"),
        (8, "ada"),
        (9, "hopper"),
        (10, "blackwell"),
        (5, "volta"),
        (6, "turing"),
        (2, "kepler"),
        (13, "rubin"),
        (0xFFFFFFFF, "unknown"),
        (11, "unknown"),
        (None, "unknown"),
    ],
)
def test_architecture_name(arch: int | None, name: str) -> None:
    assert nvml_values.architecture_name(arch) == name


# --- errors ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("code", "hint_part"),
    [
        (nvml_constants.NVML_ERROR_DRIVER_NOT_LOADED, "the nvidia kernel module is not loaded"),
        (nvml_constants.NVML_ERROR_NO_PERMISSION, "run as root (become: true)"),
        (nvml_constants.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "driver/library version mismatch"),
        (nvml_constants.NVML_ERROR_GPU_IS_LOST, "the GPU fell off the bus; check dmesg / reset or reboot"),
        (nvml_constants.NVML_ERROR_FUNCTION_NOT_FOUND, "the driver is too old for this call"),
    ],
)
def test_error_carries_code_function_text_and_hint(code: int, hint_part: str) -> None:
    err = nvml_constants.NvmlError(code, "nvmlDeviceGetSerial", "Some Text")
    assert (err.code, err.function, err.text) == (code, "nvmlDeviceGetSerial", "Some Text")
    assert hint_part in err.hint
    assert str(err).startswith("nvmlDeviceGetSerial: Some Text (" + nvml_constants.ERROR_NAMES[code] + "); ")
    assert hint_part in str(err)


def test_error_without_hint_or_known_name() -> None:
    err = nvml_constants.NvmlError(4242, "nvmlFoo")
    assert err.hint is None
    assert str(err) == "nvmlFoo: NVML error 4242 (NVML_ERROR_4242)"


def test_missing_library_is_typed_and_carries_loader_message(tmp_path: t.Any) -> None:
    path = str(tmp_path / "libnvidia-ml.so.1")
    with pytest.raises(nvml_constants.NvmlLibraryNotFoundError) as caught:
        nvml_session.NvmlSession(path)
    err = caught.value
    assert isinstance(err, nvml_constants.NvmlError)
    assert err.code == nvml_constants.NVML_ERROR_LIBRARY_NOT_FOUND
    assert err.path == path
    assert "cannot open shared object file" in err.text
    assert "libnvidia-ml1" in err.hint


def test_missing_symbols_map_to_function_not_found() -> None:
    # libc has no NVML symbols: nvmlInit_v2 is missing, the fallback to
    # nvmlInit is tried, and the error names the last call.
    session = nvml_session.NvmlSession(ctypes.util.find_library("c"))
    with pytest.raises(nvml_constants.NvmlError) as caught:
        session.init()
    assert caught.value.code == nvml_constants.NVML_ERROR_FUNCTION_NOT_FOUND
    assert caught.value.function == "nvmlInit"
    assert session.error_string(3) == "NVML error 3"  # no nvmlErrorString either
    assert session.resolved == []


def test_prototype_table_is_consistent() -> None:
    for preferred, (older, triggers) in nvml_structs.FALLBACKS.items():
        assert preferred in nvml_structs.PROTOTYPES
        assert older in nvml_structs.PROTOTYPES
        assert triggers
    assert all(name.startswith("nvml") for name in nvml_structs.PROTOTYPES)


def test_handles_compare_by_kind_and_value() -> None:
    assert nvml_values.Device(5) == nvml_values.Device(5)
    assert nvml_values.Device(5) != nvml_values.GpuInstance(5)
    assert len({nvml_values.Device(5), nvml_values.Device(5), nvml_values.ComputeInstance(5)}) == 2
    assert repr(nvml_values.Device(255)) == "Device(0xff)"


# --- against the simulated library -----------------------------------------------
# These load the simulator into the pytest process through the `open_session`
# fixture (conftest.py; the module tests use subprocesses instead). Every
# session is shut down by its `with` block, so the next test's nvmlInit
# re-reads NVML_SIM_STATE.


def _profile_tuple(profile: nvml_values.GpuInstanceProfile) -> tuple[t.Any, ...]:
    return (
        profile.index,
        profile.id,
        profile.name,
        profile.slice_count,
        profile.instance_count,
        profile.multiprocessor_count,
        profile.memory_size_mb,
        profile.copy_engine_count,
        profile.decoder_count,
        profile.jpeg_count,
        profile.ofa_count,
        profile.is_p2p_supported,
    )


def _show_profile_tuple(profile: dict[str, t.Any]) -> tuple[t.Any, ...]:
    return (
        profile["index"],
        profile["id"],
        profile["name"],
        profile["slices"],
        profile["instances"],
        profile["sm"],
        profile["memory_mb"],
        profile["ce"],
        profile["dec"],
        profile["jpeg"],
        profile["ofa"],
        bool(profile["p2p"]),
    )


def test_session_reads_system_and_devices(sim_node: t.Any, open_session: t.Any) -> None:
    node = sim_node("dgx-a100-mig-mixed")
    show = node.show()
    session = open_session(node)
    with session as s:
        assert s.initialized
        assert s.driver_version() == show["system"]["driver_version"]
        assert s.nvml_version() == show["system"]["nvml_version"]
        assert s.cuda_driver_version_int() == show["system"]["cuda_driver_version"]
        assert s.device_count() == len(show["gpus"])
        for gpu in show["gpus"]:
            dev = s.device_by_index(gpu["index"])
            assert s.device_by_uuid(gpu["uuid"]) == dev
            assert s.device_by_pci_bus_id(gpu["bus_id"]) == dev
            assert s.device_index(dev) == gpu["index"]
            pci = s.device_pci_info(dev)
            assert (pci.bus_id, pci.domain, pci.bus, pci.device) == (gpu["bus_id"], gpu["pci_domain"], gpu["pci_bus"], gpu["pci_device"])
            assert (pci.pci_device_id, pci.pci_subsystem_id) == (gpu["pci_device_id"], gpu["pci_subsystem_id"])
            memory = s.device_memory(dev)
            assert (memory.total, memory.reserved) == (gpu["memory_total"], gpu["memory_reserved"])
            assert s.device_compute_capability(dev) == (gpu["cc_major"], gpu["cc_minor"])
            assert s.device_architecture(dev) == gpu["arch"]
            assert s.device_persistence_mode(dev) is bool(gpu["persistence"])
            assert s.device_minor_number(dev) == gpu["minor"]
            mode = s.device_mig_mode(dev)
            assert (mode.current, mode.pending) == (bool(gpu["mig_current"]), bool(gpu["mig_pending"]))
    assert not session.initialized
    assert session.resolved[0] == "nvmlInit_v2" and session.resolved[-1] == "nvmlShutdown"


def test_processes_and_sparse_mig_devices(sim_node: t.Any, open_session: t.Any) -> None:
    node = sim_node("dgx-a100-mig-mixed")
    show = node.show()
    with open_session(node) as s:
        in_mig = s.device_compute_processes(s.device_by_index(1))
        outside = s.device_compute_processes(s.device_by_index(5))
        assert [(p.pid, p.used_memory, p.gpu_instance_id, p.compute_instance_id) for p in in_mig] == [
            (p["pid"], p["used_memory"], p["gi"], p["ci"]) for p in show["gpus"][1]["processes"]
        ]
        assert [(p.pid, p.gpu_instance_id, p.compute_instance_id) for p in outside] == [(p["pid"], None, None) for p in show["gpus"][5]["processes"]]
        assert s.device_compute_processes(s.device_by_index(7)) == []

        dev = s.device_by_index(0)
        slots = [s.mig_device_by_index(dev, i) for i in range(s.max_mig_device_count(dev))]
        present = [m for m in slots if m is not None]
        assert len(present) == sum(len(gi["cis"]) for gi in show["gpus"][0]["gis"])
        assert None in slots  # the MIG device index space is sparse
        assert present == s.mig_devices(dev)
        ids = sorted((s.mig_device_gpu_instance_id(m), s.mig_device_compute_instance_id(m)) for m in present)
        assert ids == sorted((gi["id"], ci["id"]) for gi in show["gpus"][0]["gis"] for ci in gi["cis"])
        assert s.max_mig_device_count(s.device_by_index(6)) == 0  # MIG off


def test_mig_not_capable(sim_node: t.Any, open_session: t.Any) -> None:
    with open_session(sim_node("t4-1x")) as s:
        dev = s.device_by_index(0)
        with pytest.raises(nvml_constants.NvmlError) as caught:
            s.device_mig_mode(dev)
        assert caught.value.code == nvml_constants.NVML_ERROR_NOT_SUPPORTED
        assert s.gpu_instance_profiles(dev) == []


def test_mig_lifecycle(sim_node: t.Any, open_session: t.Any) -> None:
    node = sim_node("dgx-a100-8x40gb")
    gpu = node.show()["gpus"][0]
    assert not gpu["mig_current"], "fixture changed: GPU 0 should start with MIG off"
    by_slices = {p["slices"]: p for p in gpu["profiles"] if "+" not in p["name"]}

    with open_session(node) as s:
        dev = s.device_by_index(0)
        # Profiles need MIG on; placements do not.
        assert s.gpu_instance_profiles(dev) == []
        p3 = by_slices[3]
        assert s.gpu_instance_possible_placements(dev, p3["id"]) == [nvml_values.Placement(p["start"], p["size"]) for p in p3["placements"]]

        assert s.set_mig_mode(dev, True) == nvml_constants.NVML_SUCCESS
        assert s.device_mig_mode(dev) == nvml_values.MigMode(current=True, pending=True)
        profiles = s.gpu_instance_profiles(dev)
        assert [_profile_tuple(p) for p in profiles] == sorted(_show_profile_tuple(p) for p in gpu["profiles"])
        three_g = next(p for p in profiles if p.id == p3["id"])

        # Largest first, at an explicit placement.
        upper = nvml_values.Placement(4, 4)
        gi = s.create_gpu_instance(dev, three_g.id, upper)
        info = s.gpu_instance_info(gi)
        assert (info.profile_id, info.placement) == (three_g.id, upper)
        assert s.gpu_instance_by_id(dev, info.id) == gi
        assert s.gpu_instance_remaining_capacity(dev, three_g.id) == three_g.instance_count - 1

        # The default compute instance spans the whole GPU instance.
        full = s.full_compute_instance_profile(gi)
        assert full.slice_count == three_g.slice_count
        ci = s.create_compute_instance(gi)
        ci_info = s.compute_instance_info(ci)
        assert (ci_info.profile_id, ci_info.placement) == (full.id, nvml_values.Placement(0, three_g.slice_count))
        assert s.compute_instance_remaining_capacity(gi, full.id) == 0

        # Listing finds exactly what was created.
        assert s.gpu_instances(dev, three_g) == [gi]
        assert s.compute_instances(gi, full) == [ci]
        (mig,) = s.mig_devices(dev)
        assert (s.mig_device_gpu_instance_id(mig), s.mig_device_compute_instance_id(mig)) == (info.id, ci_info.id)
        assert s.device_uuid(mig).startswith("MIG-")
        assert s.device_name(mig).endswith(" MIG " + three_g.name)

        # Overlap with an occupied placement is refused.
        two_g = next(p for p in profiles if p.slice_count == 2 and p.name and "+" not in p.name)
        with pytest.raises(nvml_constants.NvmlError) as caught:
            s.create_gpu_instance(dev, two_g.id, nvml_values.Placement(4, 2))
        assert caught.value.code == nvml_constants.NVML_ERROR_INSUFFICIENT_RESOURCES
        assert caught.value.function == "nvmlDeviceCreateGpuInstanceWithPlacement"
        # Auto placement takes the remaining free slot.
        gi_auto = s.create_gpu_instance(dev, three_g.id)
        assert s.gpu_instance_info(gi_auto).placement == nvml_values.Placement(0, 4)

    # Instances persist across sessions (the state file is the "hardware").
    show = node.show()["gpus"][0]
    assert sorted((g["profile"], g["start"], g["size"], len(g["cis"])) for g in show["gis"]) == [(three_g.id, 0, 4, 0), (three_g.id, 4, 4, 1)]

    with open_session(node) as s:
        dev = s.device_by_index(0)
        gi = s.gpu_instance_by_id(dev, info.id)
        # Wrong order: a GPU instance with a compute instance is in use.
        with pytest.raises(nvml_constants.NvmlError) as caught:
            s.destroy_gpu_instance(gi)
        assert caught.value.code == nvml_constants.NVML_ERROR_IN_USE
        assert "stop its clients" in str(caught.value)
        (ci,) = s.compute_instances(gi, s.full_compute_instance_profile(gi))
        s.destroy_compute_instance(ci)
        s.destroy_gpu_instance(gi)
        for handle in s.gpu_instances(dev, three_g):
            s.destroy_gpu_instance(handle)
        assert s.gpu_instances(dev, three_g) == []
        assert s.mig_devices(dev) == []
        assert s.set_mig_mode(dev, False) == nvml_constants.NVML_SUCCESS
        assert s.device_mig_mode(dev) == nvml_values.MigMode(current=False, pending=False)
    assert node.show()["gpus"][0]["gis"] == []


def test_compute_instances_with_placement(sim_node: t.Any, open_session: t.Any) -> None:
    node = sim_node("dgx-a100-mig-mixed")
    with open_session(node) as s:
        dev = s.device_by_index(3)  # MIG on, no instances
        three_g = next(p for p in s.gpu_instance_profiles(dev) if p.slice_count == 3)
        gi = s.create_gpu_instance(dev, three_g.id, nvml_values.Placement(0, 4))
        one_c = next(p for p in s.compute_instance_profiles(gi) if p.slice_count == 1)
        placements = s.compute_instance_possible_placements(gi, one_c.id)
        assert placements == [nvml_values.Placement(i, 1) for i in range(3)]
        created = [s.create_compute_instance(gi, one_c.id, p) for p in reversed(placements)]
        assert sorted(s.compute_instance_info(c).placement.start for c in created) == [0, 1, 2]
        with pytest.raises(nvml_constants.NvmlError) as caught:
            s.create_compute_instance(gi, one_c.id, placements[0])
        assert caught.value.code == nvml_constants.NVML_ERROR_INSUFFICIENT_RESOURCES
        assert len(s.mig_devices(dev)) == 3
        for ci in created:
            s.destroy_compute_instance(ci)
        s.destroy_gpu_instance(gi)


@pytest.mark.parametrize(
    ("gpu", "setup", "enable", "activation", "after"),
    [
        (0, ("mig_toggle=reboot",), True, nvml_constants.NVML_ERROR_RESET_REQUIRED, nvml_values.MigMode(False, True)),
        (0, ("pending_process",), True, nvml_constants.NVML_ERROR_IN_USE, nvml_values.MigMode(False, True)),
        (0, (), True, nvml_constants.NVML_SUCCESS, nvml_values.MigMode(True, True)),
        (0, (), False, nvml_constants.NVML_SUCCESS, nvml_values.MigMode(False, False)),
    ],
    ids=["reset-required", "in-use", "immediate", "already-off"],
)
def test_set_mig_mode_activation_status(
    sim_node: t.Any,
    open_session: t.Any,
    gpu: int,
    setup: tuple[str, ...],
    enable: bool,
    activation: int,
    after: nvml_values.MigMode,
) -> None:
    node = sim_node("hgx-h100-8x80gb")
    if "pending_process" in setup:
        node.simctl("process", "add", "--gpu", str(gpu), "--pid", "777", "--used-memory", "1GiB")
    elif setup:
        node.set(*setup, gpu=gpu)
    with open_session(node) as s:
        dev = s.device_by_index(gpu)
        assert s.set_mig_mode(dev, enable) == activation
        assert s.device_mig_mode(dev) == after


def test_disabling_mig_with_instances_is_refused(sim_node: t.Any, open_session: t.Any) -> None:
    with open_session(sim_node("dgx-a100-mig-mixed")) as s:
        with pytest.raises(nvml_constants.NvmlError) as caught:
            s.set_mig_mode(s.device_by_index(0), False)
        assert caught.value.code == nvml_constants.NVML_ERROR_IN_USE


def test_unprivileged_mutation_is_refused(sim_node: t.Any, open_session: t.Any) -> None:
    with open_session(sim_node("dgx-a100-mig-mixed"), NVML_SIM_EUID="1000") as s:
        dev = s.device_by_index(3)
        profile = s.gpu_instance_profiles(dev)[0]
        with pytest.raises(nvml_constants.NvmlError) as caught:
            s.create_gpu_instance(dev, profile.id, nvml_values.Placement(0, 1))
        assert caught.value.code == nvml_constants.NVML_ERROR_NO_PERMISSION
        assert str(caught.value).endswith("run as root (become: true)")


@pytest.mark.parametrize("error", ["FUNCTION_NOT_FOUND", "ARGUMENT_VERSION_MISMATCH"])
def test_profile_info_falls_back_to_v1(sim_node: t.Any, open_session: t.Any, error: str) -> None:
    node = sim_node("dgx-a100-mig-mixed")
    with open_session(node) as s:
        dev = s.device_by_index(0)
        v2 = s.gpu_instance_profiles(dev)
        ci_v2 = s.compute_instance_profiles(s.gpu_instances(dev, v2[0])[0])
    node.fault("nvmlDeviceGetGpuInstanceProfileInfoV", error)
    node.fault("nvmlGpuInstanceGetComputeInstanceProfileInfoV", error)
    session = open_session(node)
    with session as s:
        dev = s.device_by_index(0)
        v1 = s.gpu_instance_profiles(dev)
        ci_v1 = s.compute_instance_profiles(s.gpu_instances(dev, v1[0])[0])
    assert [p.name for p in v1] == [None] * len(v2)
    assert [_profile_tuple(p)[:2] + _profile_tuple(p)[3:] for p in v1] == [_profile_tuple(p)[:2] + _profile_tuple(p)[3:] for p in v2]
    assert [(p.id, p.slice_count, p.name) for p in ci_v1] == [(p.id, p.slice_count, None) for p in ci_v2]
    assert "nvmlDeviceGetGpuInstanceProfileInfo" in session.resolved


def test_context_manager_shuts_down_on_error(sim_node: t.Any, open_session: t.Any) -> None:
    node = sim_node("t4-1x")
    session = open_session(node)
    with pytest.raises(nvml_constants.NvmlError) as caught, session as s:
        s.device_by_index(5)
    assert caught.value.code == nvml_constants.NVML_ERROR_INVALID_ARGUMENT
    assert not session.initialized
    # A later session re-reads the state file, so nothing leaked.
    node.set("driver_loaded=0")
    with pytest.raises(nvml_constants.NvmlError) as caught:
        open_session(node).init()
    assert caught.value.code == nvml_constants.NVML_ERROR_DRIVER_NOT_LOADED


def test_shutdown_failure_is_raised_when_nothing_else_failed(sim_node: t.Any, open_session: t.Any) -> None:
    node = sim_node("t4-1x")
    node.fault("nvmlShutdown", "UNKNOWN", once=True)
    session = open_session(node)
    with pytest.raises(nvml_constants.NvmlError) as caught, session as s:
        s.device_count()
    assert caught.value.function == "nvmlShutdown"
    # NVML kept its reference; release it so later tests re-read their state.
    session._call("nvmlShutdown")  # pylint: disable=protected-access


def test_no_gpus_initializes_with_flags(sim_node: t.Any, open_session: t.Any) -> None:
    node = sim_node("t4-1x")
    lines = node.state.read_text(encoding="utf-8").splitlines()
    node.state.write_text("\n".join(line for line in lines if not line.startswith("gpu ")) + "\n", encoding="utf-8")
    session = open_session(node)
    with session as s:
        assert s.device_count() == 0
        assert s.driver_version() == "535.230.02"
    assert session.resolved[:2] == ["nvmlInit_v2", "nvmlInitWithFlags"]
