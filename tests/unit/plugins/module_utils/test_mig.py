# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""_mig/: the mig-parted v1 schema, the planner on every simulator fixture, the NVML reader and applier.

Layouts and expectations are derived from the fixtures (mig_expected), never
from profile names written into the tests.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
import typing as t
from collections import Counter
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils._mig import apply as mig_apply
from ansible_collections.gpufleet.nvidia.plugins.module_utils._mig import config as mig_config
from ansible_collections.gpufleet.nvidia.plugins.module_utils._mig import describe as mig_describe
from ansible_collections.gpufleet.nvidia.plugins.module_utils._mig import export as mig_export
from ansible_collections.gpufleet.nvidia.plugins.module_utils._mig import placement as mig_placement
from ansible_collections.gpufleet.nvidia.plugins.module_utils._mig import plan as mig_plan
from ansible_collections.gpufleet.nvidia.plugins.module_utils._mig import profiles as mig_profiles
from ansible_collections.gpufleet.nvidia.plugins.module_utils._mig import reader as mig_reader
from ansible_collections.gpufleet.nvidia.plugins.module_utils._mig import state as mig_state
from ansible_collections.gpufleet.nvidia.plugins.module_utils._nvml import constants as nvml_constants
from ansible_collections.gpufleet.nvidia.tests.unit.plugins import mig_expected, nvml_sim

# --- fixtures, rendered in-process once --------------------------------------------


def _load_simctl() -> t.Any:
    spec = importlib.util.spec_from_file_location("gpufleet_simctl", str(nvml_sim.SIMCTL))
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpufleet_simctl"] = module
    spec.loader.exec_module(module)
    return module


SIMCTL = _load_simctl()
SHOWN = {path.stem: SIMCTL.show_state(SIMCTL.render_node(str(path)), "", "") for path in nvml_sim.node_fixtures()}
MIG_FIXTURES = sorted(name for name, shown in SHOWN.items() if any(g["mig_capable"] for g in shown["gpus"]))
NON_MIG_FIXTURES = sorted(name for name in SHOWN if name not in MIG_FIXTURES)


def _free_for_nvml(gpu: dict) -> bool:
    """A MIG-capable GPU with no instance, process or pending mode change: NVML may place a layout on it."""
    return gpu["mig_capable"] and not gpu["gis"] and not gpu["processes"] and gpu["mig_toggle"] == "immediate"


# Fixtures with such a GPU (dgx-a100-7x1g has every GPU cut already).
FREE_MIG_FIXTURES = sorted(name for name in MIG_FIXTURES if any(_free_for_nvml(g) for g in SHOWN[name]["gpus"]))
LAYOUTS = ("all-1g", "all-2g", "all-3g", "all-balanced", "all-7g")


def empty_gpu(fixture: str, index: int | None = None) -> mig_state.GpuState:
    """A MIG-capable GPU of the fixture with MIG on and nothing on it."""
    gpus = SHOWN[fixture]["gpus"]
    raw = gpus[index] if index is not None else next(g for g in gpus if g["mig_capable"])
    return dataclasses.replace(mig_expected.gpu_state(raw, mig_enabled=True), gpu_instances=(), processes=())


def entry(mig_devices: dict[str, int] | None = None, enabled: bool = True, **extra: t.Any) -> mig_config.ConfigEntry:
    item: dict[str, t.Any] = {"devices": "all", "mig-enabled": enabled}
    if mig_devices is not None:
        item["mig-devices"] = mig_devices
    item.update(extra)
    return mig_config.parse_config(mig_expected.config("test", item))["test"][0]


def plan_for(gpu: mig_state.GpuState, mig_devices: dict[str, int]) -> mig_plan.GpuPlan:
    return mig_plan.plan_gpu(gpu, mig_plan.resolve_target(gpu, entry(mig_devices)))


def created_counts(plan: mig_plan.GpuPlan) -> Counter:
    return Counter(name for c in plan.create for name in c.spec.device_names())


def assert_valid_layout(gpu: mig_state.GpuState, plan: mig_plan.GpuPlan) -> None:
    spans = []
    for start, name, _compute in plan.layout_after():
        profile = gpu.profile_named(name)
        assert profile is not None
        assert (start, profile.size) in profile.placements, (name, start)
        assert all(start + profile.size <= s or s + z <= start for s, z in spans), (name, start, spans)
        spans.append((start, profile.size))
    assert sum(gpu.profile_named(name).slices for _s, name, _c in plan.layout_after()) <= gpu.compute_slices


# --- schema -----------------------------------------------------------------------------
FULL_CONFIG = {
    "version": "v1",
    "mig-configs": {
        "all-disabled": [{"devices": "all", "mig-enabled": False}],
        "all-enabled": [{"devices": "all", "mig-enabled": True, "mig-devices": {}}],
        "custom": [
            {"device-filter": "0x20B010DE", "devices": [0, 1, 1], "mig-enabled": True, "mig-devices": {"1g.5gb": 7, "2g.10gb": 0}},
            {"device-filter": ["0x233010DE", "0x20B210DE:0x147E10DE"], "devices": [2], "mig-enabled": True, "mig-devices": {"1c.3g.40gb": 2, "1g.10gb+me": 1}},
            {"devices": [3], "mig-enabled": False, "mig-devices": {}},
        ],
    },
}


def test_parse_accepts_every_form_mig_parted_accepts() -> None:
    configs = mig_config.parse_config(FULL_CONFIG)
    assert sorted(configs) == ["all-disabled", "all-enabled", "custom"]
    first, second, third = configs["custom"]
    assert (first.devices, first.mig_devices, first.where) == ((0, 1), (("1g.5gb", 7),), "mig-configs.custom[0]")
    assert [str(f) for f in second.device_filter] == ["0x233010DE", "0x20B210DE:0x147E10DE"]
    assert second.mig_devices == (("1c.3g.40gb", 2), ("1g.10gb+me", 1))
    assert (third.mig_enabled, third.mig_devices) == (False, ())
    assert configs["all-enabled"][0].mig_devices == () and configs["all-enabled"][0].devices is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "must be a mapping"),
        ({"mig-configs": {}}, "'version' is missing"),
        ({"version": "v2", "mig-configs": {"a": []}}, "'v2' is not supported"),
        ({"version": "v1", "mig-configs": {"a": []}, "hooks": {}}, "unknown top-level key 'hooks'"),
        ({"version": "v1"}, "at least one label"),
        ({"version": "v1", "mig-configs": {"a": []}}, "mig-configs.a: expected a non-empty list"),
        (
            mig_expected.config("a", {"devices": "all", "mig-enabled": True, "mig-device": {}}),
            "mig-configs.a[0]: unknown key 'mig-device' (did you mean 'mig-devices'?)",
        ),
        (mig_expected.config("a", {"mig-enabled": False}), "mig-configs.a[0]: missing required key 'devices'"),
        (mig_expected.config("a", {"devices": "all"}), "missing required key 'mig-enabled'"),
        (mig_expected.config("a", {"devices": "some", "mig-enabled": False}), "expected 'all' or a list of GPU indices"),
        # mig-parted: "all counts for all MigProfiles are 0" (pkg/types/mig_config.go, AssertValid)
        (
            mig_expected.config("a", {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 0}}),
            "mig-configs.a[0].mig-devices: every count is 0 (1g.5gb: 0); mig-parted rejects that",
        ),
        (
            mig_expected.config("a", {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 0, "2g.10gb": 0}}),
            "every count is 0 (1g.5gb: 0, 2g.10gb: 0)",
        ),
        (mig_expected.config("a", {"devices": [True], "mig-enabled": False}), "expected 'all' or a list of GPU indices"),
        (mig_expected.config("a", {"devices": 0, "mig-enabled": False}), "expected 'all' or a list of GPU indices"),
        (mig_expected.config("a", {"devices": "all", "mig-enabled": "yes"}), "mig-enabled: expected true or false"),
        (mig_expected.config("a", {"devices": "all", "mig-enabled": True}), "'mig-devices' is required when 'mig-enabled' is true"),
        (mig_expected.config("a", {"devices": "all", "mig-enabled": False, "mig-devices": {"1g.5gb": 1}}), "lists MIG devices but 'mig-enabled' is false"),
        (mig_expected.config("a", {"devices": "all", "mig-enabled": True, "mig-devices": {"1g5gb": 1}}), "'1g5gb' is not a MIG profile name"),
        (
            mig_expected.config("a", {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": -1}}),
            "mig-devices.1g.5gb: the count must be a whole number >= 0",
        ),
        (mig_expected.config("a", {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": True}}), "the count must be a whole number"),
        (mig_expected.config("a", {"devices": "all", "mig-enabled": True, "mig-devices": ["1g.5gb"]}), "expected a mapping of MIG profile to count"),
        (mig_expected.config("a", {"devices": "all", "device-filter": "A100", "mig-enabled": False}), "'A100' is not a PCI id"),
        (
            mig_expected.config("a", {"devices": "all", "device-filter": 0x20B010DE, "mig-enabled": False}),
            "expected a PCI id string or a list of them, got int",
        ),
        (mig_expected.config("a", {"devices": "all", "device-filter": "0x1FFFFFFFF", "mig-enabled": False}), "does not fit in 32 bits"),
    ],
)
def test_parse_rejects_with_the_field_named(data: t.Any, message: str) -> None:
    with pytest.raises(mig_config.MigConfigError) as caught:
        mig_config.parse_config(data)
    assert message in str(caught.value)


def test_empty_devices_is_accepted_and_selects_no_gpu() -> None:
    """mig-parted reads `devices: []` as an empty []int (api/spec/v1/spec.go) and accepts it."""
    (parsed,) = mig_config.parse_config(mig_expected.config("a", {"devices": [], "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}))["a"]
    assert parsed.devices == ()
    assert not any(parsed.selects(index, 0x20B010DE, 0x134F10DE) for index in range(8))


def test_unknown_label_names_the_labels_and_the_likely_one() -> None:
    configs = mig_config.parse_config(FULL_CONFIG)
    with pytest.raises(mig_config.MigConfigError) as caught:
        mig_config.select_label(configs, "all-disable")
    assert "'all-disable' is not in the config (did you mean 'all-disabled'?)" in str(caught.value)
    assert "all-disabled, all-enabled, custom" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "device", "subsystem", "matches"),
    [
        ("0x20B010DE", 0x20B010DE, 0x134F10DE, True),
        ("0x20b010de", 0x20B010DE, 0x134F10DE, True),
        ("0x20B010DE:0x134F10DE", 0x20B010DE, 0x134F10DE, True),
        ("0x20B010DE:0x145F10DE", 0x20B010DE, 0x134F10DE, False),
        ("0x233010DE", 0x20B010DE, 0x134F10DE, False),
    ],
)
def test_device_filter_matches_like_mig_parted(text: str, device: int, subsystem: int, matches: bool) -> None:
    assert mig_config.DeviceFilter.parse(text, "f").matches(device, subsystem) is matches


def test_config_file_json_yaml_and_errors(tmp_path: Path) -> None:
    as_json = tmp_path / "config.json"
    as_json.write_text(json.dumps(FULL_CONFIG))
    as_yaml = tmp_path / "config.yaml"
    as_yaml.write_text("version: v1\nmig-configs:\n  all-disabled:\n    - devices: all\n      mig-enabled: false\n")
    assert mig_config.load_config_file(str(as_json)) == FULL_CONFIG
    assert mig_config.parse_config(mig_config.load_config_file(str(as_yaml)))["all-disabled"][0].mig_enabled is False
    with pytest.raises(mig_config.MigConfigError, match="cannot read the MIG config"):
        mig_config.load_config_file(str(tmp_path / "absent.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: [v1\n")
    with pytest.raises(mig_config.MigConfigError, match="is not valid YAML"):
        mig_config.load_config_file(str(bad))


# --- the catalogue used while MIG is off ------------------------------------------------
@pytest.mark.parametrize("fixture", MIG_FIXTURES)
def test_catalogue_agrees_with_every_mig_fixture(fixture: str) -> None:
    for raw in SHOWN[fixture]["gpus"]:
        if not raw["mig_capable"]:
            continue
        model = mig_profiles.known_model(raw["pci_device_id"])
        if model is None:
            # Left out of the table on purpose (H100 SXM5 94GB): its driver
            # answers profile queries with MIG off, so NVML plans it.
            assert raw.get("mig_profiles_off") == 1, raw["name"]
            continue
        catalogue = {
            (pid, name.split("|")[0], slices, instances, tuple((s, size) for s in starts))
            for (pid, slices, instances, size, starts), name in zip(model.geometry, model.names)
        }
        assert catalogue == {(p.id, p.name, p.slices, p.instances, p.placements) for p in mig_expected.profiles(raw)}


def test_catalogue_lists_each_pci_id_once() -> None:
    ids = [i for model in mig_profiles.MODELS for i in model.pci_device_ids]
    assert len(ids) == len(set(ids))
    assert all(len(m.geometry) == len(m.names) for m in mig_profiles.MODELS)
    assert mig_profiles.known_model(0x1EB810DE) is None  # T4


@pytest.mark.parametrize(
    ("slices", "memory_mib", "gpu_mib", "suffix", "name"),
    [
        (7, 81152, 81920, "", "7g.80gb"),  # mig-parted says 7g.80gb where some drivers say 7g.79gb
        (1, 4864, 40960, "+me", "1g.5gb+me"),
        (3, 19968, 40960, "", "3g.20gb"),
        (1, 16384, 143771, "", "1g.18gb"),
        (3, 71168, 143771, "", "3g.71gb"),
    ],
)
def test_migparted_names(slices: int, memory_mib: int, gpu_mib: int, suffix: str, name: str) -> None:
    assert mig_state.migparted_name(slices, memory_mib, gpu_mib * 1024 * 1024, suffix) == name


# --- planner: the common layouts on every MIG fixture --------------------------------------
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("fixture", MIG_FIXTURES)
def test_common_layouts_fit_every_mig_fixture(fixture: str, layout: str) -> None:
    gpu = empty_gpu(fixture)
    wanted = mig_expected.layouts_for(gpu)[layout]
    plan = plan_for(gpu, wanted)
    assert created_counts(plan) == Counter(wanted)
    assert (plan.destroy, plan.recompute, plan.set_mode) == ([], [], None)
    assert_valid_layout(gpu, plan)
    assert plan_for(gpu, wanted).steps() == plan.steps()  # deterministic


@pytest.mark.parametrize("fixture", FREE_MIG_FIXTURES)
def test_balanced_layout_is_where_nvml_auto_placement_puts_it(fixture: str, sim_node: t.Any, open_session: t.Any) -> None:
    """Largest first, highest free start: the same as `nvidia-smi mig -cgi 9,14,19,19` (the MIG guide's order)."""
    index = next(g["index"] for g in SHOWN[fixture]["gpus"] if _free_for_nvml(g))
    gpu = empty_gpu(fixture, index)
    plan = plan_for(gpu, mig_expected.layouts_for(gpu)["all-balanced"])
    node = sim_node(fixture)
    with open_session(node) as s:
        dev = s.device_by_index(gpu.index)
        if not s.device_mig_mode(dev).current:
            assert s.set_mig_mode(dev, True) == nvml_constants.NVML_SUCCESS
        for created in plan.create:
            handle = s.create_gpu_instance(dev, created.spec.profile.id)  # no placement: NVML picks
            assert s.gpu_instance_info(handle).placement.start == created.start, created


@pytest.mark.parametrize("fixture", MIG_FIXTURES)
def test_mixed_by_device_index(fixture: str) -> None:
    capable = [g for g in SHOWN[fixture]["gpus"] if g["mig_capable"]]
    # One model (profile names differ between models; device-filter is the next test's subject).
    gpus = [empty_gpu(fixture, g["index"]) for g in capable if g["pci_device_id"] == capable[0]["pci_device_id"]]
    layouts = mig_expected.layouts_for(gpus[0])
    half = [g.index for g in gpus[: max(1, len(gpus) // 2)]]
    configs = mig_config.parse_config(
        mig_expected.config(
            "mixed",
            {"devices": half, "mig-enabled": True, "mig-devices": layouts["all-1g"]},
            {"devices": [g.index for g in gpus if g.index not in half] or [99], "mig-enabled": True, "mig-devices": layouts["all-3g"]},
        )
    )
    for gpu in gpus:
        chosen = [e for e in configs["mixed"] if e.selects(gpu.index, gpu.pci_device_id, gpu.pci_subsystem_id)]
        assert len(chosen) == 1
        plan = mig_plan.plan_gpu(gpu, mig_plan.resolve_target(gpu, chosen[0]))
        expected = layouts["all-1g"] if gpu.index in half else layouts["all-3g"]
        assert created_counts(plan) == Counter(expected)


def test_mixed_by_device_filter_on_a_mixed_node() -> None:
    shown = SHOWN["mixed-a100-h100-l40s"]["gpus"]
    gpus = [mig_expected.gpu_state(g, mig_enabled=True if g["mig_capable"] else None) for g in shown]
    by_model: dict[int, mig_state.GpuState] = {}
    for gpu in gpus:
        by_model.setdefault(gpu.pci_device_id, gpu)
    mig_models = [g for g in by_model.values() if g.mig_capable]
    assert len(mig_models) == 2
    entries = [
        {"devices": "all", "device-filter": "0x{0:08X}".format(g.pci_device_id), "mig-enabled": True, "mig-devices": mig_expected.layouts_for(g)[layout]}
        for g, layout in zip(mig_models, ("all-1g", "all-balanced"))
    ]
    configs = mig_config.parse_config(mig_expected.config("by-filter", *entries))
    for gpu in gpus:
        chosen = [e for e in configs["by-filter"] if e.selects(gpu.index, gpu.pci_device_id, gpu.pci_subsystem_id)]
        if not gpu.mig_capable:
            assert chosen == []
            continue
        layout = "all-1g" if gpu.pci_device_id == mig_models[0].pci_device_id else "all-balanced"
        plan = mig_plan.plan_gpu(gpu, mig_plan.resolve_target(gpu, chosen[0]))
        assert created_counts(plan) == Counter(mig_expected.layouts_for(gpu)[layout])


# --- planner: layouts that cannot fit, and why -------------------------------------------
@pytest.mark.parametrize("fixture", MIG_FIXTURES)
def test_too_many_instances_of_a_profile(fixture: str) -> None:
    gpu = empty_gpu(fixture)
    three = mig_expected.plain_profile(gpu, 3)
    with pytest.raises(mig_state.MigPlanError) as caught:
        plan_for(gpu, {three.name: three.instances + 1})
    assert "{0} x {1} asked for, but at most {2} fit on this GPU".format(three.instances + 1, three.name, three.instances) in str(caught.value)


@pytest.mark.parametrize("fixture", MIG_FIXTURES)
def test_too_many_compute_slices(fixture: str) -> None:
    gpu = empty_gpu(fixture)
    two, three = mig_expected.plain_profile(gpu, 2), mig_expected.plain_profile(gpu, 3)
    with pytest.raises(mig_state.MigPlanError) as caught:
        plan_for(gpu, {three.name: 2, two.name: 1})
    message = str(caught.value)
    assert message.startswith("GPU {0} ({1}): mig-configs.test[0] does not fit:".format(gpu.index, gpu.name))
    assert "2 x {0} + 1 x {1} need 8 compute slices, the GPU has {2}".format(three.name, two.name, gpu.compute_slices) in message


@pytest.mark.parametrize("fixture", MIG_FIXTURES)
def test_too_many_memory_slices(fixture: str) -> None:
    gpu = empty_gpu(fixture)
    double = next(p for p in gpu.profiles if p.slices == 1 and p.size == 2)  # 1g with two memory slices
    one = mig_expected.plain_profile(gpu, 1)
    with pytest.raises(mig_state.MigPlanError) as caught:
        plan_for(gpu, {double.name: double.instances, one.name: 1})
    assert "need {0} memory slices, the GPU has {1}".format(double.instances * 2 + 1, gpu.memory_slices) in str(caught.value)


@pytest.mark.parametrize("fixture", MIG_FIXTURES)
def test_a_profile_the_gpu_lacks(fixture: str) -> None:
    gpu = empty_gpu(fixture)
    theirs = {p.name for shown in SHOWN.values() for g in shown["gpus"] for p in mig_expected.profiles(g)}
    foreign = sorted(theirs - {p.name for p in gpu.profiles})[0]
    with pytest.raises(mig_state.MigPlanError) as caught:
        plan_for(gpu, {foreign: 1})
    assert "asks for {0}, which this GPU does not offer; it offers {1}".format(foreign, ", ".join(p.name for p in gpu.profiles)) in str(caught.value)


def test_overlapping_placements_are_explained() -> None:
    """Counts, compute and memory all fit, the placements do not (a made-up 6-slice geometry).

    NVIDIA's 8-slice layouts never get here -- the capacity checks already rule
    out every combination that would (checked exhaustively in the next test).
    """
    wide = mig_state.Profile(1, "2g.12gb", 2, 2, ((0, 2), (3, 2)))
    narrow = mig_state.Profile(2, "1g.6gb", 1, 4, ((1, 1), (2, 1), (4, 1)))
    gpu = mig_state.GpuState(0, "GPU-x", "Made-up GPU", 0x1, 0, True, True, True, (wide, narrow, mig_state.Profile(3, "5g.30gb", 5, 1, ((0, 6),))), "nvml")
    with pytest.raises(mig_state.MigPlanError) as caught:
        plan_for(gpu, {"2g.12gb": 1, "1g.6gb": 3})
    assert (
        "the instances cannot be placed without overlapping: at most 3 of 4 fit together (1g.6gb at 1, "
        "1g.6gb at 2, 2g.12gb at 3), leaving no free placement for 1 x 1g.6gb (placements {1,2,4}:1)"
    ) in str(caught.value)


@pytest.mark.parametrize("fixture", MIG_FIXTURES)
def test_capacity_checks_decide_every_eight_slice_layout(fixture: str) -> None:
    """Every combination the capacity checks allow really has a placement (so their messages are the truth)."""
    gpu = empty_gpu(fixture)
    plain = [p for p in gpu.profiles if p.instances > 1 or p.slices == gpu.compute_slices]

    def combinations(index: int, chosen: list[tuple[mig_state.Profile, int]]) -> t.Iterator[list[mig_state.Profile]]:
        if index == len(plain):
            yield [p for p, n in chosen for _copy in range(n)]
            return
        for count in range(plain[index].instances + 1):
            yield from combinations(index + 1, chosen + [(plain[index], count)])

    checked = 0
    for wanted in combinations(0, []):
        specs = [mig_placement.InstanceSpec(p, (p.slices,)) for p in wanted]
        if specs and not mig_placement._capacity_problems(gpu, specs):  # pylint: disable=protected-access
            assert mig_placement._LayoutSearch(gpu, specs).run() is not None, [p.name for p in wanted]
            checked += 1
    assert checked > 50


@pytest.mark.parametrize("fixture", NON_MIG_FIXTURES)
def test_gpus_without_mig_are_rejected_clearly(fixture: str) -> None:
    raw = SHOWN[fixture]["gpus"][0]
    gpu = mig_expected.gpu_state(raw)
    with pytest.raises(mig_state.MigPlanError) as caught:
        mig_plan.resolve_target(gpu, entry({"1g.5gb": 1}, devices=[0]))
    assert str(caught.value) == (
        "GPU 0 ({0}): mig-configs.test[0] selects it with mig-enabled: true, but it does not "
        "support MIG; narrow the entry with 'devices' or 'device-filter'".format(raw["name"])
    )
    disabled = mig_plan.plan_gpu(gpu, mig_plan.resolve_target(gpu, entry(enabled=False)))
    assert not disabled.changed


# --- planner: the smallest change from what a GPU has -------------------------------------
MIXED = {g["index"]: g for g in SHOWN["dgx-a100-mig-mixed"]["gpus"]}


def mixed_gpu(index: int) -> mig_state.GpuState:
    return mig_expected.gpu_state(MIXED[index])


def test_layout_already_there_changes_nothing() -> None:
    gpu = mixed_gpu(0)  # 3g + 2g + 1g + 1g, each with a full compute instance
    plan = plan_for(gpu, dict(mig_expected.device_counts(MIXED[0])))
    assert not plan.changed and plan.steps() == []


def test_kept_instances_survive_a_new_layout() -> None:
    gpu = mixed_gpu(1)  # 7 x 1g.5gb, a process in GI 7
    layouts = mig_expected.layouts_for(gpu)
    plan = plan_for(gpu, layouts["all-balanced"])
    kept = {gi.id for gi in gpu.gpu_instances} - {d.instance.id for d in plan.destroy}
    assert len(kept) == 2 and len(plan.destroy) == 5
    assert created_counts(plan) == Counter({mig_expected.plain_profile(gpu, 3).name: 1, mig_expected.plain_profile(gpu, 2).name: 1})
    assert mig_plan.blocking_clients(plan) == []  # the process's instance is one of the kept ones
    assert_valid_layout(gpu, plan)


def test_compute_instances_are_replaced_in_place() -> None:
    gpu = mixed_gpu(2)  # one 3g GPU instance split into three 1c compute instances
    (gi,) = gpu.gpu_instances
    three = gpu.profile_by_id(gi.profile_id)
    same = plan_for(gpu, {"1c.{0}".format(three.name): 3})
    assert not same.changed
    plan = plan_for(gpu, {three.name: 1})
    assert (plan.destroy, plan.create) == ([], [])
    assert [(r.instance.id, r.spec.compute) for r in plan.recompute] == [(gi.id, (three.slices,))]


def test_partial_compute_instances_pack_like_mig_parted() -> None:
    gpu = empty_gpu("dgx-a100-8x40gb")
    three = mig_expected.plain_profile(gpu, 3)
    target = mig_plan.resolve_target(gpu, entry({"1c.{0}".format(three.name): 4, "2c.{0}".format(three.name): 1}))
    assert [spec.compute for spec in target.instances] == [(2, 1), (1, 1, 1)]
    with pytest.raises(mig_state.MigPlanError, match="a 4-slice compute instance does not fit in a"):
        mig_plan.resolve_target(gpu, entry({"4c.{0}".format(three.name): 1}))


def test_disabling_destroys_everything_then_the_mode() -> None:
    gpu = mixed_gpu(0)
    plan = mig_plan.plan_gpu(gpu, mig_plan.resolve_target(gpu, entry(enabled=False)))
    assert [d.instance.id for d in plan.destroy] == sorted(gi.id for gi in gpu.gpu_instances)
    assert plan.set_mode is False
    assert plan.steps()[-1] == "disable MIG mode"


def test_pending_enable_waits_for_a_reset() -> None:
    gpu = mig_expected.gpu_state(MIXED[4])  # MIG enable pending (mig_toggle=reboot)
    gpu = dataclasses.replace(gpu, profiles_from="catalogue")
    plan = plan_for(gpu, mig_expected.layouts_for(empty_gpu("dgx-a100-8x40gb"))["all-1g"])
    assert plan.set_mode is None and plan.awaiting_reset


def test_clients_block_destroying_their_instance_and_mode_changes() -> None:
    busy = mixed_gpu(1)  # the process runs in GI 7
    one = mig_expected.plain_profile(busy, 1)
    plan = plan_for(busy, {one.name: 6})
    blocking = mig_plan.blocking_clients(plan)
    destroyed = {d.instance.id for d in plan.destroy}
    assert [p.pid for p in blocking] == ([4194404] if 7 in destroyed else [])
    off = mig_plan.plan_gpu(busy, mig_plan.resolve_target(busy, entry(enabled=False)))
    assert [str(p) for p in mig_plan.blocking_clients(off)] == ["pid 4194404 (not visible here, GPU instance 7 / compute instance 0, 2048 MiB)"]


def test_descriptions() -> None:
    assert mig_describe.describe_gpu(mixed_gpu(0)) == "MIG enabled: 1 x 3g.20gb, 1 x 2g.10gb, 2 x 1g.5gb"
    assert mig_describe.describe_gpu(mixed_gpu(2)) == "MIG enabled: 3 x 1c.3g.20gb"
    assert mig_describe.describe_gpu(mixed_gpu(3)) == "MIG enabled, no GPU instances"
    assert mig_describe.describe_gpu(mixed_gpu(4)) == "MIG disabled (enable pending until a GPU reset or reboot)"
    assert mig_describe.describe_gpu(mig_expected.gpu_state(SHOWN["t4-1x"]["gpus"][0])) == "MIG not supported"
    gpu = empty_gpu("dgx-a100-8x40gb")
    target = mig_plan.resolve_target(gpu, entry({"1g.5gb": 7}))
    assert mig_describe.describe_target(target) == "MIG enabled: 7 x 1g.5gb"


# --- the NVML reader and applier against the simulated library ------------------------------
@pytest.mark.parametrize("fixture", sorted(SHOWN))
def test_reader_sees_what_the_simulator_holds(fixture: str, sim_node: t.Any, open_session: t.Any) -> None:
    node = sim_node(fixture)
    with open_session(node) as s:
        read = mig_reader.NvmlReader(s).gpus()
    for gpu, raw in zip(read, node.show()["gpus"]):
        expected = mig_expected.gpu_state(raw)
        if raw["mig_capable"] and not raw["mig_current"] and not raw.get("mig_profiles_off"):
            expected = dataclasses.replace(expected, profiles_from="catalogue")
        # The reader also knows the names mig-parted derives from memory; the
        # order of the profiles carries no meaning.

        def normal(state: mig_state.GpuState) -> mig_state.GpuState:
            return dataclasses.replace(state, profiles=tuple(sorted((dataclasses.replace(p, aliases=()) for p in state.profiles), key=lambda p: p.id)))

        assert normal(gpu) == normal(expected)


def test_applier_journals_every_change(sim_node: t.Any, open_session: t.Any) -> None:
    node = sim_node("dgx-a100-mig-mixed")
    configs = mig_config.parse_config(mig_expected.config("one", {"devices": [0, 2, 3], "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}))
    with open_session(node) as s:
        controller = mig_apply.MigController(configs["one"], "one", s)
        planned = controller.plan()
        applier = controller.apply(planned)
        again = controller.plan()
    assert applier.done == ["GPU {0}: {1}".format(p.gpu.index, step) for p in planned.plans for step in p.steps()]
    assert not again.changed
    for index in (0, 2, 3):
        gpu = node.show()["gpus"][index]
        assert mig_expected.device_counts(gpu) == Counter({"1g.5gb": 7}) and not mig_expected.check_layout(gpu)


def test_identical_reasons_are_grouped_across_gpus() -> None:
    gpu = empty_gpu("dgx-a100-8x40gb")
    errors = [mig_state._gpu_error(dataclasses.replace(gpu, index=i), "too big") for i in (0, 1, 2, 3, 5, 6, 7)]
    errors.append(mig_state._gpu_error(dataclasses.replace(gpu, index=4), "other"))
    assert mig_export.group_gpu_problems(errors) == ["GPUs 0-3, 5-7 (NVIDIA A100-SXM4-40GB): too big", "GPU 4 (NVIDIA A100-SXM4-40GB): other"]


def test_reader_asks_nvml_first_with_mig_off_and_falls_back(sim_node: t.Any, open_session: t.Any) -> None:
    """The simulated driver answers profile queries with MIG off only where the fixture says so (mig_profiles_off)."""
    node = sim_node("hgx-h100-94gb-4x")
    node.set("mig_profiles_off=0", gpu=1)
    with open_session(node) as s:
        answers, silent = mig_reader.NvmlReader(s).gpus()[:2]
    assert (answers.mig_enabled, answers.profiles_from) == (False, "nvml")
    assert {p.name for p in answers.profiles} >= {"1g.12gb", "3g.47gb", "7g.94gb"}
    # A driver that describes nothing with MIG off, on a GPU the table lacks: planned once MIG is on.
    assert (silent.profiles_from, silent.profiles) == ("none", ())


def test_export_leaves_out_what_the_format_cannot_say() -> None:
    """Two 3g instances with one 1c each would come back as one 3g with 2 x 1c: left out, with the reason."""
    gpu = empty_gpu("dgx-a100-8x40gb")
    three = gpu.profile_named("3g.20gb")
    split = dataclasses.replace(
        gpu,
        gpu_instances=tuple(
            mig_state.GpuInstanceState(gi_id, three.id, start, three.size, (mig_state.ComputeInstanceState(0, 1, 0),)) for gi_id, start in ((1, 0), (2, 4))
        ),
    )
    other = dataclasses.replace(gpu, index=1)
    config, problems = mig_export.export_layout([split, other], "x")
    assert config == {"version": "v1", "mig-configs": {"x": [{"devices": [1], "mig-enabled": True, "mig-devices": {}}]}}
    (problem,) = problems
    assert problem == (
        "GPU 0 (NVIDIA A100-SXM4-40GB): re-applying mig-devices {1c.3g.20gb: 2} would change it (destroy GPU "
        "instance 1 (3g.20gb at memory slice 0); replace the compute instances of GPU instance 2 (3g.20gb at memory "
        "slice 4) with compute instances 1c.3g.20gb + 1c.3g.20gb); a mig-parted config cannot describe this state; "
        "left out of the export"
    )
