# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""mig_config against the simulated NVML library, one subprocess per module run.

Every expectation is read back from the simulator's state file (`simctl.py
show`) or derived from the fixture's profiles (mig_expected).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import typing as t
from collections import Counter

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils._mig import config as mig_config
from ansible_collections.gpufleet.nvidia.plugins.module_utils._mig import profiles as mig_profiles
from ansible_collections.gpufleet.nvidia.plugins.module_utils._mig import reader as mig_reader
from ansible_collections.gpufleet.nvidia.plugins.module_utils._nvml import values as nvml_values
from ansible_collections.gpufleet.nvidia.tests.unit.plugins import mig_expected, nvml_sim

NVIDIA_SMI = nvml_sim.SIM_DIR / "nvidia-smi"


def layouts(node: nvml_sim.SimNode) -> dict[str, dict[str, int]]:
    raw = next(g for g in node.show()["gpus"] if g["mig_capable"])
    return mig_expected.layouts_for(mig_expected.gpu_state(raw, mig_enabled=True))


def run(node: nvml_sim.SimNode, config: dict[str, t.Any], label: str, check: bool = False, diff: bool = False, **extra: t.Any) -> dict[str, t.Any]:
    outcome = node.run("mig_config", config=config, label=label, _ansible_check_mode=check, _ansible_diff=diff, **extra)
    assert outcome["kind"] in ("exit", "fail"), outcome.get("traceback")
    return outcome["result"]


def state_hash(node: nvml_sim.SimNode) -> str:
    return hashlib.sha256(node.state.read_bytes()).hexdigest()


def steps(result: dict[str, t.Any]) -> list[str]:
    return ["GPU {0}: {1}".format(p["index"], step) for p in result["plan"] for step in p["steps"]]


def reset_gpu(node: nvml_sim.SimNode, index: int) -> subprocess.CompletedProcess:
    env = dict(os.environ, **node.env)
    env.pop("NVML_SIM_EUID", None)
    return subprocess.run(
        [sys.executable, str(NVIDIA_SMI), "--gpu-reset", "-i", str(index)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False
    )


# --- the label sequence: A -> B -> C -> disabled ---------------------------------------------
def label_sequence(node: nvml_sim.SimNode) -> list[tuple[str, dict[str, t.Any]]]:
    found = layouts(node)
    device_id = "0x{0:08X}".format(node.show()["gpus"][0]["pci_device_id"])
    count = len(node.show()["gpus"])
    low = list(range(count // 2))
    return [
        ("all-balanced", mig_expected.config("all-balanced", {"devices": "all", "mig-enabled": True, "mig-devices": found["all-balanced"]})),
        (
            "mixed",
            mig_expected.config(
                "mixed",
                {"devices": low, "mig-enabled": True, "mig-devices": found["all-1g"]},
                # [] on a 2-GPU node: mig-parted accepts an entry that selects no GPU
                {"devices": [i for i in range(count) if i not in low][:-1], "mig-enabled": True, "mig-devices": found["all-3g"]},
                {"devices": [count - 1], "mig-enabled": False},
            ),
        ),
        ("by-filter", mig_expected.config("by-filter", {"devices": "all", "device-filter": device_id, "mig-enabled": True, "mig-devices": found["all-2g"]})),
        ("all-disabled", mig_expected.config("all-disabled", {"devices": "all", "mig-enabled": False})),
    ]


def expected_counts(config: dict[str, t.Any], label: str, gpu: dict[str, t.Any]) -> Counter | None:
    """MIG devices the label wants on a GPU (None: MIG disabled)."""
    for item in config["mig-configs"][label]:
        if item["devices"] == "all" or gpu["index"] in item["devices"]:
            return Counter(item["mig-devices"]) if item["mig-enabled"] else None
    raise AssertionError("no entry for GPU {0}".format(gpu["index"]))


@pytest.mark.parametrize("fixture", ["dgx-a100-8x40gb", "hgx-h100-8x80gb", "hgx-h200-8x141gb", "a100-80gb-2x", "hgx-b300-8x288gb", "gb300-nvl72-tray"])
def test_label_sequence_check_apply_idempotent_assert(fixture: str, sim_node: t.Any) -> None:
    node = sim_node(fixture)
    for label, config in label_sequence(node):
        before = state_hash(node)
        predicted = run(node, config, label, check=True, diff=True)
        assert state_hash(node) == before, "check mode changed the state"
        assert predicted["changed"] is True, label
        applied = run(node, config, label, diff=True)
        assert not applied.get("failed"), applied.get("msg")
        # The check-mode plan is exactly what the apply then did.
        assert applied["done"] == steps(predicted), label
        assert applied["diff"]["after"] == predicted["diff"]["after"], label
        assert applied["diff"]["before"] == predicted["diff"]["before"], label
        for gpu in node.show()["gpus"]:
            wanted = expected_counts(config, label, gpu)
            assert bool(gpu["mig_current"]) is (wanted is not None), (label, gpu["index"])
            assert mig_expected.device_counts(gpu) == (wanted or Counter()), (label, gpu["index"])
            assert mig_expected.check_layout(gpu) == []
        after = state_hash(node)
        again = run(node, config, label)
        assert (again["changed"], again["done"], state_hash(node)) == (False, [], after), label
        asserted = run(node, config, label, state="asserted")
        assert not asserted.get("failed") and asserted["differences"] == [], asserted.get("msg")


def test_asserted_names_each_gpu_that_differs(sim_node: t.Any) -> None:
    node = sim_node("dgx-a100-8x40gb")
    one = layouts(node)["all-1g"]
    config = mig_expected.config("all-1g", {"devices": "all", "mig-enabled": True, "mig-devices": one})
    run(node, mig_expected.config("first", {"devices": [0, 1], "mig-enabled": True, "mig-devices": one}), "first")
    before = state_hash(node)
    result = run(node, config, "all-1g", state="asserted")
    assert result["failed"] and state_hash(node) == before
    name, count = next(iter(one.items()))
    assert result["differences"] == ["GPU {0}: expected MIG enabled: {1} x {2}, found MIG disabled".format(i, count, name) for i in range(2, 8)]
    assert result["msg"].startswith("the MIG layout 'all-1g' is not applied: GPU 2: expected")


@pytest.mark.parametrize(
    "by_hand, found",
    [
        (("mig_current=1", "mig_pending=1"), "MIG enabled, no GPU instances"),
        (("mig_current=0", "mig_pending=1"), "MIG disabled (enable pending until a GPU reset or reboot)"),
    ],
)
def test_asserted_mig_switched_on_by_hand_where_declared_off(sim_node: t.Any, by_hand: tuple[str, ...], found: str) -> None:
    """What the verify role's MIG check reads: the GPU, its difference and the change that would undo it."""
    node = sim_node("dgx-a100-8x40gb")
    config = mig_expected.config("all-disabled", {"devices": "all", "mig-enabled": False})
    assert run(node, config, "all-disabled", state="asserted")["differences"] == []
    node.set(*by_hand, gpu=0)
    before = state_hash(node)
    result = run(node, config, "all-disabled", state="asserted")
    assert result["failed"] and state_hash(node) == before
    assert result["differences"] == ["GPU 0: expected MIG disabled, found {0}".format(found)]
    gpu0 = result["plan"][0]
    assert (gpu0["index"], gpu0["mode_change"], gpu0["changed"], gpu0["reset_required"]) == (0, "disable", True, False)
    assert not any(p["changed"] for p in result["plan"][1:])


def test_third_create_fails_reports_partial_work_and_a_rerun_converges(sim_node: t.Any) -> None:
    node = sim_node("dgx-a100-8x40gb")
    found = layouts(node)
    config = mig_expected.config("balanced", {"devices": [0, 1], "mig-enabled": True, "mig-devices": found["all-balanced"]})
    planned = steps(run(node, config, "balanced", check=True))
    node.fault("nvmlDeviceCreateGpuInstanceWithPlacement", "UNKNOWN", once=True, skip=2)
    failed = run(node, config, "balanced")
    assert failed["failed"] and failed["changed"] is True
    creates = [i for i, step in enumerate(planned) if " create " in step]
    third = creates[2]
    assert failed["done"] == planned[:third]
    assert failed["not_done"] == planned[third:]
    assert failed["msg"].startswith("{0} failed: nvmlDeviceCreateGpuInstanceWithPlacement: Unknown Error (NVML_ERROR_UNKNOWN)".format(planned[third]))
    assert "Run again to converge" in failed["msg"]
    gpu0 = node.show()["gpus"][0]
    assert sum(mig_expected.device_counts(gpu0).values()) == 2  # exactly the two creates that were done
    rerun = run(node, config, "balanced")
    assert not rerun.get("failed") and rerun["done"] == planned[third:]
    for gpu in node.show()["gpus"][:2]:
        assert mig_expected.device_counts(gpu) == Counter(found["all-balanced"])
    assert run(node, config, "balanced")["changed"] is False


def test_failure_between_instance_and_compute_instance_converges(sim_node: t.Any) -> None:
    node = sim_node("dgx-a100-8x40gb")
    config = mig_expected.config("one", {"devices": [0], "mig-enabled": True, "mig-devices": layouts(node)["all-3g"]})
    node.fault("nvmlGpuInstanceCreateComputeInstance", "UNKNOWN", once=True, skip=1)
    failed = run(node, config, "one")
    assert failed["failed"] and len(failed["done"]) == 2  # MIG on, first 3g with its compute instance
    gis = node.show()["gpus"][0]["gis"]
    assert [len(gi["cis"]) for gi in gis] == [1, 0] or [len(gi["cis"]) for gi in gis] == [0, 1]
    rerun = run(node, config, "one")
    assert list(rerun["done"]) == [next(s for s in steps(rerun) if "replace the compute instances" in s)]
    assert mig_expected.device_counts(node.show()["gpus"][0]) == Counter(layouts(node)["all-3g"])


# --- clients ------------------------------------------------------------------------------
def test_attached_clients_fail_before_anything_changes(sim_node: t.Any) -> None:
    node = sim_node("dgx-a100-mig-mixed")  # GPU 1: a process in GI 7, GPU 5: a process, MIG off
    config = mig_expected.config("off", {"devices": [1, 3, 5], "mig-enabled": False})
    before = state_hash(node)
    predicted = run(node, config, "off", check=True)
    assert predicted["changed"] is True and not predicted.get("failed")  # check mode warns instead
    result = run(node, config, "off")
    assert result["failed"] and state_hash(node) == before
    gpus = {g["index"]: g for g in node.show()["gpus"]}
    assert result["msg"] == (
        "GPU clients are still attached, so nothing was changed. Stop them (for services, list them in "
        "mig_gpu_clients) and run again: GPU 1 (NVIDIA A100-SXM4-40GB) ({0}): pid 4194404 (not visible here, GPU "
        "instance 7 / compute instance 0, 2048 MiB)".format(gpus[1]["uuid"])
    )
    # GPU 5's process does not matter: MIG is already off there.
    node.simctl("process", "clear", "--gpu", "1")
    assert not run(node, config, "off").get("failed")


def test_clients_of_kept_instances_do_not_block(sim_node: t.Any) -> None:
    node = sim_node("dgx-a100-mig-mixed")
    one = mig_expected.plain_profile(mig_expected.gpu_state(node.show()["gpus"][1]), 1)
    config = mig_expected.config("fewer", {"devices": [1], "mig-enabled": True, "mig-devices": {one.name: 3}})
    result = run(node, config, "fewer")
    assert not result.get("failed"), result.get("msg")
    kept = {gi["id"] for gi in node.show()["gpus"][1]["gis"]}
    assert 7 in kept and len(kept) == 3


# --- mode changes that wait for a reset ------------------------------------------------------
def test_mode_change_needing_a_reset_is_reported_then_finished(sim_node: t.Any) -> None:
    node = sim_node("dgx-a100-8x40gb")
    node.set("mig_toggle=reboot", gpu=2)  # e.g. an A100 passed through to a VM
    config = mig_expected.config("all", {"devices": "all", "mig-enabled": True, "mig-devices": layouts(node)["all-1g"]})
    first = run(node, config, "all")
    assert (first["reset_required"], first["reboot_required"], first["reset_gpus"]) == (True, True, [2])
    assert "GPU 2: enable MIG mode" in first["done"]
    assert not any(step.startswith("GPU 2: create") for step in first["done"])
    again = run(node, config, "all")
    assert (again["changed"], again["reset_gpus"]) == (False, [2])
    assert again["plan"][2]["reset_required"] is True
    assert reset_gpu(node, 2).returncode == 0
    final = run(node, config, "all")
    assert (final["reset_required"], final["reset_gpus"]) == (False, [])
    assert [s.split(":")[0] for s in final["done"]] == ["GPU 2"] * 7
    assert run(node, config, "all", state="asserted")["differences"] == []


# --- GPUs the module knows nothing about while MIG is off -------------------------------------
def test_unknown_gpu_is_planned_once_mig_is_on(sim_node: t.Any) -> None:
    node = sim_node("dgx-a100-8x40gb")
    node.set("pci_device_id=0x20FF10DE", gpu=0)  # an A100 id the catalogue does not list
    config = mig_expected.config("one", {"devices": [0], "mig-enabled": True, "mig-devices": layouts(node)["all-balanced"]})
    predicted = run(node, config, "one", check=True)
    assert predicted["plan"][0]["profiles_from"] == "none"
    assert predicted["plan"][0]["steps"] == ["enable MIG mode", "plan the GPU instances from the profiles NVML reports once MIG is on"]
    applied = run(node, config, "one")
    assert not applied.get("failed"), applied.get("msg")
    assert applied["plan"][0]["profiles_from"] == "nvml" and len(applied["plan"][0]["create"]) == 4
    assert mig_expected.device_counts(node.show()["gpus"][0]) == Counter(layouts(node)["all-balanced"])


def test_catalogue_and_nvml_disagree_mig_is_switched_back_off(sim_node: t.Any) -> None:
    node = sim_node("dgx-a100-8x40gb")
    node.set("pci_device_id=0x233010DE", gpu=0)  # claims to be an H100: its catalogue 1g.10gb takes 7
    config = mig_expected.config("seven", {"devices": [0], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}})
    assert not run(node, config, "seven", check=True).get("failed")
    result = run(node, config, "seven")
    assert result["failed"]
    assert "7 x 1g.10gb asked for, but at most 4 fit on this GPU; " in result["msg"]
    assert "(MIG mode was switched back off)" in result["msg"] and "Running again will not help" in result["msg"]
    assert result["done"] == ["GPU 0: enable MIG mode", "GPU 0: disable MIG mode again"]
    assert node.show()["gpus"][0]["mig_current"] == 0


# --- errors before anything is touched ---------------------------------------------------------
@pytest.mark.parametrize("fixture", ["l40s-4x", "t4-1x", "v100-8x"])
def test_gpus_without_mig(fixture: str, sim_node: t.Any) -> None:
    node = sim_node(fixture)
    name = node.show()["gpus"][0]["name"]
    count = len(node.show()["gpus"])
    everything = mig_expected.config("x", {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 1}})
    result = run(node, everything, "x")
    assert result["msg"] == (
        "the MIG layout 'x' cannot be applied: mig-configs.x[0] asks for MIG on GPU {0}, but {1} has no MIG support".format(
            ", ".join(str(i) for i in range(count)), name
        )
    )
    explicit = mig_expected.config("x", {"devices": [0], "mig-enabled": True, "mig-devices": {"1g.5gb": 1}})
    assert "does not support MIG; narrow the entry" in run(node, explicit, "x")["msg"]
    off = mig_expected.config("off", {"devices": "all", "mig-enabled": False})
    assert run(node, off, "off")["changed"] is False


def test_devices_all_leaves_gpus_without_mig_alone_on_a_mixed_node(sim_node: t.Any) -> None:
    node = sim_node("mixed-a100-h100-l40s")
    shown = node.show()["gpus"]
    a100 = mig_expected.gpu_state(shown[0], mig_enabled=True)
    h100 = mig_expected.gpu_state(shown[2], mig_enabled=True)
    config = mig_expected.config(
        "node",
        {
            "devices": "all",
            "device-filter": "0x{0:08X}".format(a100.pci_device_id),
            "mig-enabled": True,
            "mig-devices": mig_expected.layouts_for(a100)["all-1g"],
        },
        {
            "devices": "all",
            "device-filter": "0x{0:08X}".format(h100.pci_device_id),
            "mig-enabled": True,
            "mig-devices": mig_expected.layouts_for(h100)["all-balanced"],
        },
        {"devices": "all", "device-filter": "0x{0:08X}".format(shown[4]["pci_device_id"]), "mig-enabled": False},
    )
    result = run(node, config, "node")
    assert not result.get("failed"), result.get("msg")
    after = node.show()["gpus"]
    assert [sum(mig_expected.device_counts(g).values()) for g in after] == [7, 7, 4, 4, 0]
    assert result["plan"][4]["changed"] is False and result["plan"][4]["mig_capable"] is False


def test_overlapping_entries_are_refused(sim_node: t.Any) -> None:
    node = sim_node("dgx-a100-8x40gb")
    config = mig_expected.config("both", {"devices": "all", "mig-enabled": False}, {"devices": [3], "mig-enabled": True, "mig-devices": {}})
    result = run(node, config, "both")
    assert ("GPU 3 (NVIDIA A100-SXM4-40GB): selected by mig-configs.both[0] and mig-configs.both[1], which ask for different layouts") in result["msg"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            {"config": {"version": "v1", "mig-configs": {"a": [{"devices": "all"}]}}, "label": "a"},
            "invalid MIG config: mig-configs.a[0]: missing required key 'mig-enabled'",
        ),
        ({"config": mig_expected.config("a", {"devices": "all", "mig-enabled": False}), "label": "b"}, "invalid MIG config: label 'b' is not in the config"),
        ({"config_file": "/nonexistent/config.json", "label": "a"}, "cannot read the MIG config /nonexistent"),
    ],
)
def test_bad_input_fails_before_nvml(args: dict[str, t.Any], message: str, sim_node: t.Any) -> None:
    node = sim_node("dgx-a100-8x40gb")
    before = state_hash(node)
    outcome = node.run("mig_config", **args)
    assert outcome["result"]["failed"] and message in outcome["result"]["msg"]
    assert outcome["resolved"] == [] and state_hash(node) == before


def test_config_file_on_the_node(sim_node: t.Any, tmp_path: t.Any) -> None:
    node = sim_node("dgx-a100-8x40gb")
    path = tmp_path / "config.json"
    config = mig_expected.config("a", {"devices": [0], "mig-enabled": True, "mig-devices": layouts(node)["all-7g"]})
    path.write_text(json.dumps(config))
    outcome = node.run("mig_config", config_file=str(path), label="a")
    assert outcome["result"]["changed"] is True
    assert mig_expected.device_counts(node.show()["gpus"][0]) == Counter(layouts(node)["all-7g"])


def test_not_root(sim_node: t.Any) -> None:
    node = sim_node("dgx-a100-8x40gb")
    config = mig_expected.config("a", {"devices": "all", "mig-enabled": True, "mig-devices": {}})
    outcome = node.run("mig_config", config=config, label="a", extra_env={"NVML_SIM_EUID": "1000"})
    assert "Insufficient Permissions (NVML_ERROR_NO_PERMISSION); run as root (become: true)" in outcome["result"]["msg"]


def test_missing_library_is_a_clear_failure(sim_node: t.Any) -> None:
    node = sim_node("dgx-a100-8x40gb")
    config = mig_expected.config("a", {"devices": "all", "mig-enabled": False})
    outcome = node.run("mig_config", config=config, label="a", library="/nonexistent/libnvidia-ml.so.1")
    assert outcome["result"]["msg"].startswith("NVML cannot be loaded from /nonexistent/libnvidia-ml.so.1")
    assert "mig_bake: true" in outcome["result"]["msg"]


def test_driver_not_loaded(sim_node: t.Any) -> None:
    node = sim_node("dgx-a100-8x40gb")
    node.set("driver_loaded=0")
    config = mig_expected.config("a", {"devices": "all", "mig-enabled": False})
    outcome = node.run("mig_config", config=config, label="a")
    assert "NVML is not usable: nvmlInit_v2: Driver Not Loaded" in outcome["result"]["msg"]


def test_driver_reported_profile_names_and_mig_parted_names_both_match() -> None:
    profile = nvml_values.GpuInstanceProfile(
        index=4,
        id=0,
        name="MIG 7g.79gb",
        slice_count=7,
        instance_count=1,
        multiprocessor_count=98,
        copy_engine_count=7,
        decoder_count=5,
        encoder_count=0,
        jpeg_count=1,
        ofa_count=1,
        memory_size_mb=80896,
        is_p2p_supported=False,
    )
    read = mig_reader.NvmlReader._profile(profile, [nvml_values.Placement(0, 8)], 81920 * 1024 * 1024)  # pylint: disable=W0212
    assert (read.name, read.aliases) == ("7g.79gb", ("7g.80gb",))
    assert read.known_as("7g.80gb") and read.known_as("7g.79gb")
    # Old drivers: v1 profile info carries no name; it is derived, with the
    # attribute its profile index stands for (7 = 1_SLICE_REV1 = +me).
    unnamed = dataclasses.replace(profile, name=None, index=7)
    read = mig_reader.NvmlReader._profile(unnamed, [nvml_values.Placement(0, 8)], 81920 * 1024 * 1024)  # pylint: disable=W0212
    assert (read.name, read.aliases) == ("7g.80gb+me", ())


def test_reset_true_counts_a_waiting_gpu_as_a_change_in_check_mode_and_apply_alike(sim_node: t.Any) -> None:
    """Issue 25: check mode said changed while apply said not changed for a GPU waiting for its reset."""
    node = sim_node("dgx-a100-8x40gb")
    node.set("mig_toggle=reboot", gpu=2)
    config = mig_expected.config("x", {"devices": [2], "mig-enabled": True, "mig-devices": layouts(node)["all-3g"]})
    assert run(node, config, "x")["reset_gpus"] == [2]  # requested; waits for the reset
    waiting = state_hash(node)
    for reset in (False, True):
        predicted = run(node, config, "x", check=True, reset=reset, nvidia_smi=str(NVIDIA_SMI))
        assert state_hash(node) == waiting
        assert predicted["changed"] is reset and predicted["plan"][2]["changed"] is reset, reset
    kept = run(node, config, "x", reset=False)
    assert (kept["changed"], kept["reset_gpus"], state_hash(node)) == (False, [2], waiting)
    done = run(node, config, "x", reset=True, nvidia_smi=str(NVIDIA_SMI))
    assert not done.get("failed"), done.get("msg")
    assert (done["changed"], done["reset_gpus"], done["reset"]["gpus"]) == (True, [], [2])
    assert mig_expected.device_counts(node.show()["gpus"][2]) == Counter(layouts(node)["all-3g"])
    again = run(node, config, "x", reset=True, nvidia_smi=str(NVIDIA_SMI), check=True)
    assert again["changed"] is False


# --- a GPU the built-in table does not know --------------------------------------------------
def test_a_gpu_missing_from_the_table_is_planned_from_nvml_with_mig_off(sim_node: t.Any) -> None:
    node = sim_node("hgx-h100-94gb-4x")
    assert mig_profiles.known_model(node.show()["gpus"][0]["pci_device_id"]) is None
    before = state_hash(node)
    balanced = layouts(node)["all-balanced"]
    config = mig_expected.config("ok", {"devices": "all", "mig-enabled": True, "mig-devices": balanced})
    predicted = run(node, config, "ok", check=True)
    assert state_hash(node) == before
    assert predicted["changed"] is True
    assert {p["profiles_from"] for p in predicted["plan"]} == {"nvml"}
    assert all(p["create"] and "once MIG is on" not in " ".join(p["steps"]) for p in predicted["plan"])
    applied = run(node, config, "ok")
    assert applied["done"] == steps(predicted)  # planned before MIG came on, carried out as planned
    assert all(mig_expected.device_counts(g) == Counter(balanced) for g in node.show()["gpus"])


@pytest.mark.parametrize("check", [True, False])
def test_a_bad_layout_on_a_gpu_missing_from_the_table_is_refused_with_mig_off(sim_node: t.Any, check: bool) -> None:
    """Before: apply switched MIG on, found the layout impossible and switched it off again (two mode changes)."""
    node = sim_node("hgx-h100-94gb-4x")
    before = state_hash(node)
    config = mig_expected.config("bad", {"devices": "all", "mig-enabled": True, "mig-devices": {"3g.47gb": 3}})
    refused = run(node, config, "bad", check=check)
    assert refused["failed"] and state_hash(node) == before
    # One line for the four GPUs, not four identical ones.
    assert refused["msg"] == (
        "the MIG layout 'bad' cannot be applied: GPUs 0-3 (NVIDIA H100 SXM5 94GB): mig-configs.bad[0] does not "
        "fit: 3 x 3g.47gb asked for, but at most 2 fit on this GPU; 3 x 3g.47gb need 9 compute slices, the GPU "
        "has 7; 3 x 3g.47gb need 12 memory slices, the GPU has 8"
    )
    assert all(g["mig_current"] == 0 and g["mig_pending"] == 0 for g in node.show()["gpus"])


# --- mig-parted's acceptance rules -------------------------------------------------------
def test_all_zero_counts_are_refused_before_the_node_is_touched(sim_node: t.Any) -> None:
    node = sim_node("dgx-a100-8x40gb")
    before = state_hash(node)
    config = mig_expected.config("zero", {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 0}})
    refused = run(node, config, "zero")
    assert refused["failed"] and state_hash(node) == before
    assert "mig-configs.zero[0].mig-devices: every count is 0 (1g.5gb: 0); mig-parted rejects that" in refused["msg"]


def test_empty_devices_is_accepted_and_changes_nothing(sim_node: t.Any) -> None:
    node = sim_node("dgx-a100-8x40gb")
    before = state_hash(node)
    config = mig_expected.config("none", {"devices": [], "mig-enabled": True, "mig-devices": {"1g.5gb": 7}})
    for state in ("applied", "asserted"):
        result = run(node, config, "none", state=state)
        assert not result.get("failed") and result["changed"] is False, result.get("msg")
    assert state_hash(node) == before


def test_device_indices_the_node_lacks_warn_on_apply_and_fail_the_assert(sim_node: t.Any) -> None:
    node = sim_node("dgx-a100-8x40gb")
    config = mig_expected.config("nine", {"devices": [0, 9], "mig-enabled": True, "mig-devices": layouts(node)["all-7g"]})
    applied = run(node, config, "nine")
    assert not applied.get("failed") and applied["changed"] is True, applied.get("msg")
    line = "mig-configs.nine[0] selects GPU 9, which this node does not have (it has GPU 0-7)"
    assert applied["missing_devices"] == [line]  # and a warning
    assert mig_expected.device_counts(node.show()["gpus"][0]) == Counter(layouts(node)["all-7g"])
    asserted = run(node, config, "nine", state="asserted")
    assert asserted["failed"] and asserted["differences"] == [line]


# --- export ------------------------------------------------------------------------------
def export_reapplies_unchanged(node: nvml_sim.SimNode) -> None:
    before = state_hash(node)
    outcome = node.run("mig_config", state="exported", label="exported")
    assert outcome["kind"] == "exit", outcome
    exported = outcome["result"]
    assert exported["changed"] is False and exported["left_out"] == [] and state_hash(node) == before
    config = exported["exported"]
    mig_config.parse_config(config)  # valid as mig-parted reads it
    for check in (True, False):
        again = run(node, config, "exported", check=check)
        assert not again.get("failed") and again["changed"] is False, (check, again.get("msg"))
    assert state_hash(node) == before
    # An assert still names a GPU whose exported mode waits for its reset.
    assert run(node, config, "exported", state="asserted").get("differences", []) == [
        "GPU {0}: expected MIG enabled, no GPU instances, found MIG disabled (enable pending until a GPU reset or reboot)".format(g["index"])
        for g in node.show()["gpus"]
        if g["mig_current"] != g["mig_pending"]
    ]
    # The export says what is there: every MIG-capable GPU is named with its mode.
    shown = node.show()["gpus"]
    named = {i for item in config["mig-configs"]["exported"] for i in (range(len(shown)) if item["devices"] == "all" else item["devices"])}
    assert named >= {g["index"] for g in shown if g["mig_capable"]}


@pytest.mark.parametrize("fixture", [p.stem for p in nvml_sim.node_fixtures()])
def test_export_reapplies_unchanged_on_every_fixture(fixture: str, sim_node: t.Any) -> None:
    """As found, then (where the node has MIG) with layouts applied: balanced, and split compute instances."""
    node = sim_node(fixture)
    export_reapplies_unchanged(node)
    capable = [g for g in node.show()["gpus"] if g["mig_capable"]]
    if not capable:
        return
    found = layouts(node)
    three_g = next(name for name in found["all-3g"])
    config = mig_expected.config(
        "laid-out",
        {"devices": [capable[0]["index"]], "mig-enabled": True, "mig-devices": {"2c." + three_g: 1, "1c." + three_g: 1}},
        {
            "devices": [g["index"] for g in capable[1:]],
            "device-filter": "0x{0:08X}".format(capable[0]["pci_device_id"]),
            "mig-enabled": True,
            "mig-devices": found["all-balanced"],
        },
    )
    node.simctl("process", "clear")  # the mixed fixture's CUDA jobs would block the layout
    applied = run(node, config, "laid-out")
    assert not applied.get("failed"), applied.get("msg")
    export_reapplies_unchanged(node)


def test_export_of_a_mixed_node(sim_node: t.Any) -> None:
    node = sim_node("dgx-a100-mig-mixed")
    config = node.run("mig_config", state="exported")["result"]["exported"]
    assert config == mig_expected.config(
        "current",
        {"devices": [0], "mig-enabled": True, "mig-devices": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}},
        {"devices": [1], "mig-enabled": True, "mig-devices": {"1g.5gb": 7}},
        {"devices": [2], "mig-enabled": True, "mig-devices": {"1c.3g.20gb": 3}},
        {"devices": [3, 4], "mig-enabled": True, "mig-devices": {}},
        {"devices": [5, 6, 7], "mig-enabled": False},
    )


def test_mode_only_assert_checks_the_mode_and_not_the_instances(sim_node: t.Any) -> None:
    node = sim_node("dgx-a100-8x40gb")
    config = mig_expected.config("x", {"devices": [0], "mig-enabled": True, "mig-devices": layouts(node)["all-1g"]})
    off = run(node, config, "x", state="asserted", mode_only=True)
    assert off["failed"] and off["differences"] == ["GPU 0: expected MIG enabled, found MIG disabled"]
    node.set("mig_current=1", "mig_pending=1", gpu=0)  # MIG on, no instances yet
    assert not run(node, config, "x", state="asserted", mode_only=True).get("failed")
    assert run(node, config, "x", state="asserted")["failed"]
    node.set("mig_pending=0", gpu=0)  # a disable waits for its reset: not the mode asked for
    pending = run(node, config, "x", state="asserted", mode_only=True)
    assert pending["differences"] == ["GPU 0: expected MIG enabled, found MIG enabled (disable pending until a GPU reset or reboot), no GPU instances"]


def test_hooks_run_around_the_change_and_not_in_check_mode(sim_node: t.Any, tmp_path: t.Any) -> None:
    node = sim_node("dgx-a100-8x40gb")
    log = tmp_path / "hooks.log"
    hooks = {
        "version": "v1",
        "hooks": {
            name: [{"command": "/bin/sh", "args": ["-c", "echo {0} >> {1}".format(name, log)]}]
            for name in ("apply-start", "pre-apply-mode", "pre-apply-config", "apply-exit")
        },
    }
    config = mig_expected.config("x", {"devices": [0], "mig-enabled": True, "mig-devices": layouts(node)["all-7g"]})
    assert run(node, config, "x", check=True, hooks=hooks)["changed"] is True and not log.exists()
    bad_hooks = {"version": "v1", "hooks": {"post-apply": []}}
    assert "unknown hook 'post-apply'" in run(node, config, "x", check=True, hooks=bad_hooks)["msg"]
    done = run(node, config, "x", hooks=hooks)
    assert done["changed"] is True and done["hooks_ran"] == [
        "hooks.hooks.{0}[0]".format(n) for n in ("apply-start", "pre-apply-mode", "pre-apply-config", "apply-exit")
    ]
    assert log.read_text().split() == ["apply-start", "pre-apply-mode", "pre-apply-config", "apply-exit"]
    bad = run(node, config, "x", hooks={"version": "v1", "hooks": {"post-apply": []}})
    assert bad["failed"] and "invalid hooks (hooks): hooks.hooks: unknown hook 'post-apply'" in bad["msg"]


# --- the GPU's clients: stopped, the change, started, in one call ---------------------------------------------------
FAKE_SYSTEMCTL = """#!/bin/sh
# systemctl as the module uses it: is-active answers from $FAKE_ACTIVE; every call is logged.
echo "$*" >> "$FAKE_SYSTEMCTL_LOG"
if [ "$1" = is-active ]; then
  for name in $FAKE_ACTIVE; do [ "$name" = "$4" ] && exit 0; done
  exit 3
fi
exit 0
"""


@pytest.fixture
def clients(tmp_path: t.Any) -> dict[str, t.Any]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text(FAKE_SYSTEMCTL)
    (bin_dir / "systemctl").chmod(0o755)
    log = tmp_path / "systemctl.log"
    return {
        "env": {"PATH": "{0}:{1}".format(bin_dir, os.environ["PATH"]), "FAKE_SYSTEMCTL_LOG": str(log), "FAKE_ACTIVE": "kubelet nvidia-dcgm"},
        "log": log,
        "args": {
            "stop_services": ["kubelet", "nvidia-dcgm", "dcgm-exporter"],
            "stopped_path": str(tmp_path / "stopped-services.json"),
            "lock_path": str(tmp_path / "gpufleet.lock"),
        },
        "journal": tmp_path / "stopped-services.json",
    }


def systemctl_calls(clients: dict[str, t.Any]) -> list[str]:
    return clients["log"].read_text().splitlines() if clients["log"].exists() else []


def test_the_clients_that_run_are_stopped_around_the_change_and_started_again(sim_node: t.Any, clients: dict[str, t.Any]) -> None:
    node = sim_node("dgx-a100-8x40gb")
    config = mig_expected.config("x", {"devices": [0], "mig-enabled": True, "mig-devices": layouts(node)["all-7g"]})
    assert run_with(node, clients, config, check=True)["changed"] and systemctl_calls(clients) == []
    done = run_with(node, clients, config)
    assert done["changed"] and done["stopped_services"] == ["kubelet", "nvidia-dcgm"] and done["started_services"] == ["nvidia-dcgm", "kubelet"]
    assert [c for c in systemctl_calls(clients) if not c.startswith("is-active")] == [
        "stop -- kubelet",
        "stop -- nvidia-dcgm",
        "start -- nvidia-dcgm",
        "start -- kubelet",
    ]
    assert not clients["journal"].exists()
    # Nothing to change: nothing stopped.
    clients["log"].unlink()
    again = run_with(node, clients, config)
    assert not again["changed"] and systemctl_calls(clients) == [] and "stopped_services" not in again


def test_a_failed_change_still_starts_the_clients_again(sim_node: t.Any, clients: dict[str, t.Any]) -> None:
    node = sim_node("dgx-a100-8x40gb")
    config = mig_expected.config("x", {"devices": [0], "mig-enabled": True, "mig-devices": layouts(node)["all-7g"]})
    node.fault("nvmlDeviceCreateGpuInstanceWithPlacement", "UNKNOWN", once=True)  # NVML fails mid-change
    failed = run_with(node, clients, config)
    assert failed["failed"] and "NVML" in failed["msg"], failed["msg"]
    assert failed["started_services"] == ["nvidia-dcgm", "kubelet"] and not clients["journal"].exists()


def test_a_killed_change_leaves_the_journal_and_the_next_run_starts_the_clients(sim_node: t.Any, clients: dict[str, t.Any]) -> None:
    node = sim_node("dgx-a100-8x40gb")
    config = mig_expected.config("x", {"devices": [0], "mig-enabled": True, "mig-devices": layouts(node)["all-7g"]})
    # A cancelled job: the module's process is killed once the clients are stopped (its first hook kills it).
    killer = {"version": "v1", "hooks": {"apply-start": [{"command": "/bin/sh", "args": ["-c", "kill -9 $PPID"]}]}}
    outcome = node.run("mig_config", extra_env=clients["env"], config=config, label="x", hooks=killer, **clients["args"])
    assert outcome["kind"] not in ("exit", "fail"), outcome
    assert json.loads(clients["journal"].read_text())["services"] == ["kubelet", "nvidia-dcgm"]
    assert [c for c in systemctl_calls(clients) if not c.startswith("is-active")] == ["stop -- kubelet", "stop -- nvidia-dcgm"]
    # The next run's first node call takes the lease and starts them.
    lease = {"run_id": "ctl:2:1", "controller": "ctl", "user": "ops", "pid": 2, "pid_started": "1", "awx_job": ""}
    taken = nvml_sim.run_module_subprocess(
        "node_fingerprint",
        dict(
            state="leased",
            prefixes=["mig_"],
            declaration={},
            lease=lease,
            lease_path=str(clients["journal"].parent / "run-lease.json"),
            lock_path=clients["args"]["lock_path"],
            stopped_path=clients["args"]["stopped_path"],
        ),
        clients["journal"].parent / "fingerprint",
        clients["env"],
    )["result"]
    assert taken["changed"] and taken["restored"] == ["nvidia-dcgm", "kubelet"] and not clients["journal"].exists()
    assert systemctl_calls(clients)[-2:] == ["start -- nvidia-dcgm", "start -- kubelet"]


def run_with(node: nvml_sim.SimNode, clients: dict[str, t.Any], config: dict[str, t.Any], check: bool = False) -> dict[str, t.Any]:
    outcome = node.run("mig_config", extra_env=clients["env"], config=config, label="x", _ansible_check_mode=check, **clients["args"])
    assert outcome["kind"] in ("exit", "fail"), outcome.get("traceback")
    return outcome["result"]
