# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The matrix facts issue 22 checked against their primary sources, one test
(or one parametrised row) per fact.

The examples the issue names are spelled out literally, so that a wrong row
in the knowledge base cannot make its own test pass.
"""

from __future__ import annotations

import datetime
import typing as t

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import cuda, engines, packages, toolkit
from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix import evaluate as matrix_evaluate
from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix import tables as matrix_tables
from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix import versions as matrix_versions
from ansible_collections.gpufleet.nvidia.plugins.module_utils._mig import profiles as mig_profiles
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils import test_matrix

TODAY = datetime.date(2026, 11, 25)


def findings(*args: t.Any, **kwargs: t.Any) -> list[dict[str, str]]:
    """test_matrix's findings, on this module's date."""
    kwargs.setdefault("today", TODAY)
    return test_matrix.findings(*args, **kwargs)


def severities(found: list[dict[str, str]]) -> list[str]:
    return [f["severity"] for f in found]


# -- toolkit security floors -----------------------------------------------------------


@pytest.mark.parametrize(
    "version,cve,fixed",
    [
        ("1.16.1", "CVE-2024-0132", "1.16.2"),
        ("1.16.2", "CVE-2024-0134", "1.17.0"),
        ("1.17.0", "CVE-2024-0135", "1.17.1"),
        ("1.17.3", "CVE-2025-23359", "1.17.4"),
        ("1.17.7", "CVE-2025-23266", "1.17.8"),
        ("1.17.7", "CVE-2025-23267", "1.17.8"),
        ("1.19.0", "CVE-2026-24260", "1.19.1"),
    ],
)
def test_a_toolkit_below_a_fix_is_an_error_naming_the_cve(version: str, cve: str, fixed: str):
    found = [f for f in findings({"container_toolkit_version": version}, rule="ctk_cve") if cve in f["message"]]
    assert severities(found) == ["error"]
    assert "fixed in {0}".format(fixed) in found[0]["message"]
    assert found[0]["rule"] == "ctk_cve_" + cve[4:].lower().replace("-", "_")
    assert found[0]["subject"] == "container_toolkit_version"


@pytest.mark.parametrize("row", toolkit.CTK_CVE_FLOORS, ids=[row["cve"] for row in toolkit.CTK_CVE_FLOORS])
def test_each_cve_floor_row(row: dict[str, t.Any]):
    below = (
        matrix_versions.version_text(matrix_versions.parse_version(row["fixed"])[:2] + (matrix_versions.parse_version(row["fixed"])[2] - 1,))
        if matrix_versions.parse_version(row["fixed"])[2]
        else "1.{0}.99".format(matrix_versions.parse_version(row["fixed"])[1] - 1)
    )
    assert [f["rule"] for f in findings({"container_toolkit_version": below}, rule=row["rule"])] == [row["rule"]]
    assert findings({"container_toolkit_version": row["fixed"]}, rule=row["rule"]) == []
    assert row["rule"] in matrix_tables.RULES and row["source"]


def test_the_fix_names_the_version_that_closes_every_open_cve():
    found = findings({"container_toolkit_version": "1.16.1"}, rule="ctk_cve")
    assert len(found) == len(toolkit.CTK_CVE_FLOORS)
    assert all("set container_toolkit_version to 1.19.1 or newer" in f["fix"] for f in found)


def test_a_patched_toolkit_has_no_cve_finding():
    assert findings({"container_toolkit_version": "1.19.1"}, rule="ctk_cve") == []
    assert findings({"container_toolkit_version": "1.20.1"}, rule="ctk_cve") == []


def test_ignoring_the_general_toolkit_rule_does_not_silence_a_cve():
    found = findings({"container_toolkit_version": "1.17.7"}, rule="ctk_cve", ignore_rules=["container_toolkit"])
    assert "CVE-2025-23266" in " ".join(f["message"] for f in found)
    only = findings({"container_toolkit_version": "1.17.7"}, rule="ctk_cve", ignore_rules=["ctk_cve_2025_23266"])
    assert not any("CVE-2025-23266" in f["message"] for f in only)
    assert any("CVE-2025-23267" in f["message"] for f in only)


def test_installed_toolkit_is_judged_too():
    found = findings(installed={"versions": {"container_toolkit": "1.16.1"}}, target="installed", rule="ctk_cve")
    assert "CVE-2024-0132" in " ".join(f["message"] for f in found)
    assert found[0]["subject"] == "Container Toolkit 1.16.1"


# -- CDI specification version against the engine ---------------------------------------


@pytest.mark.parametrize(
    "engine,old,new",
    [
        ("containerd", "1.7.15", "1.7.16"),
        ("docker", "26.0.2", "26.1.0"),
        ("crio", "1.29.9", "1.30.0"),
    ],
)
def test_cdi_spec_0_7_0_needs_a_new_enough_engine(engine: str, old: str, new: str):
    desired = {"container_toolkit_version": "1.20.1", "container_runtime_engine": engine, "container_runtime_cdi": True}
    found = findings(desired, rule="cdi_spec_version", installed={"versions": {engine: old}})
    assert severities(found) == ["error"]
    assert "CDI specification 0.7.0" in found[0]["message"]
    assert "upgrade {0} to {1} or newer".format(engine, new) in found[0]["fix"]
    assert "no-additional-gids-for-device-nodes" in found[0]["fix"]
    # The older-toolkit way out would fall below the security floor (1.19.1): not offered.
    assert "below 1.19.1" not in found[0]["fix"]
    assert findings(desired, rule="cdi_spec_version", installed={"versions": {engine: new}}) == []


def test_cdi_spec_rule_needs_cdi_and_a_toolkit_that_writes_0_7_0():
    installed = {"versions": {"containerd": "1.7.15"}}
    base = {"container_runtime_engine": "containerd", "container_runtime_cdi": True}
    assert findings(dict(base, container_toolkit_version="1.19.0"), rule="cdi_spec_version", installed=installed) == []
    assert findings(dict(base, container_toolkit_version="1.20.1", container_runtime_cdi=False), rule="cdi_spec_version", installed=installed) == []


def test_an_engine_without_cdi_is_left_to_the_engine_cdi_warning():
    desired = {"container_toolkit_version": "1.20.1", "container_runtime_engine": "containerd", "container_runtime_cdi": True}
    installed = {"versions": {"containerd": "1.6.20"}}
    assert findings(desired, rule="cdi_spec_version", installed=installed) == []
    assert severities(findings(desired, rule="engine_cdi", installed=installed)) == ["warning"]


def test_podman_minimum_is_tabulated():
    rows = {row["engine"]: row["first"] for row in engines.CDI_SPEC_MIN_ENGINE if row["spec"] == "0.7.0"}
    assert rows == {"containerd": "1.7.16", "docker": "26.1.0", "crio": "1.30.0", "podman": "5.1.0"}


# -- per-product Blackwell floors ----------------------------------------------------------


@pytest.mark.parametrize(
    "model,below,floor",
    [
        ("NVIDIA HGX B200", "570.124.06", "570.133.20"),
        ("NVIDIA B300 SXM6 AC", "575.57.08", "580.82.07"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "570.172.08", "575.57.08"),
    ],
)
def test_blackwell_products_have_their_own_floor(model: str, below: str, floor: str):
    found = findings({"driver_version": below, "driver_gpu_models": [model]}, rule="architecture_branch")
    assert severities(found) == ["error"], found
    assert "needs {0} or newer".format(floor) in found[0]["message"]
    assert findings({"driver_version": floor, "driver_gpu_models": [model]}, rule="architecture_branch") == []


def test_b200_is_no_longer_accepted_from_the_architecture_floor():
    # The example: Blackwell's first driver is 570.26, HGX B200 needs 570.133.20.
    assert severities(findings({"driver_version": "570.26", "driver_gpu_models": ["B200"]}, rule="architecture_branch")) == ["error"]
    assert findings({"driver_version": "570.26", "driver_gpu_models": ["blackwell"]}, rule="architecture_branch") == []


def test_b300_on_a_bare_r575_branch_is_refused():
    found = findings({"driver_branch": "575", "driver_gpu_models": ["B300"]}, rule="architecture_branch")
    assert severities(found) == ["error"]


@pytest.mark.parametrize("model,below", [("GB200", "570.86.15"), ("NVIDIA GB300", "580.65.06")])
def test_a_proxy_floor_only_warns(model: str, below: str):
    # Read from the driver's product-name table only (GB300's MIG guide entry is R595): a warning.
    found = findings({"driver_version": below, "driver_gpu_models": [model]}, rule="architecture_branch")
    assert severities(found) == ["warning"]
    assert "unverified floor" in found[0]["message"]


# -- forward compatibility ------------------------------------------------------------------


def test_forward_compatibility_on_a_data_center_gpu_is_accepted_and_reported():
    declared = {"driver_version": "535.288.01", "driver_gpu_models": ["H100"]}
    assert severities(findings(declared, ["13.0"], "cuda_driver")) == ["error"]
    found = findings(declared, ["13.0"], cuda_compat=True)
    assert [(f["rule"], f["severity"]) for f in found if f["rule"].startswith("cuda")] == [("cuda_forward_compat", "info")]
    assert "forward compatibility" in found[-1]["message"] or any("forward compatibility" in f["message"] for f in found)


def test_forward_compatibility_needs_data_center_gpus():
    found = findings({"driver_version": "535.288.01", "driver_gpu_models": ["NVIDIA GeForce RTX 4090"]}, ["13.0"], "cuda_driver", cuda_compat=True)
    assert severities(found) == ["error"]
    assert "data-center GPUs only" in found[0]["message"]


def test_forward_compatibility_needs_the_compat_package():
    found = findings({"driver_version": "535.288.01", "driver_gpu_models": ["A100"]}, ["13.0"], "cuda_driver")
    assert severities(found) == ["error"] and "cuda-compat" in found[0]["fix"]


def test_an_installed_compat_package_counts_on_the_node():
    nvml = {"status": "ok", "driver_version": "535.288.01", "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "architecture": "hopper"}]}
    packages = {"cuda-compat-13-0": [{"version": "580.95.05-1"}]}
    found = findings(installed={"nvml": nvml, "packages": packages}, target="installed", cuda=["13.0"])
    assert [f["rule"] for f in found if f["rule"].startswith("cuda")] == ["cuda_forward_compat"]


# -- driver branches --------------------------------------------------------------------------


def test_r620_is_a_long_term_support_branch_until_september_2029():
    status = matrix_evaluate.Matrix(today=TODAY).branch_status("620")
    assert (status["type"], status["eol"], status["status"]) == ("LTSB", "2029-09", "supported")


def test_r615_is_known_as_a_new_feature_branch():
    status = matrix_evaluate.Matrix(today=TODAY).branch_status("615.71.09")
    assert status["type"] == "NFB"
    found = findings({"driver_version": "615.71.09"}, rule="branch_lifecycle")
    assert "not in the lifecycle table" not in " ".join(f["message"] for f in found)


@pytest.mark.parametrize("branch", ["470", "590"])
def test_ended_branches(branch: str):
    assert matrix_evaluate.Matrix(today=TODAY).branch_status(branch)["status"] == "eol"
    found = findings({"driver_branch": branch}, rule="branch_lifecycle")
    assert any("reached end of life" in f["message"] for f in found)


# -- CUDA releases and 13.4+ numbering --------------------------------------------------------


def test_cuda_13_4_ga_is_13_4_1():
    matrix = matrix_evaluate.Matrix(today=TODAY)
    assert matrix.cuda_release("13.4")[0] == (13, 4, 1)
    assert matrix.cuda_drivers[(13, 4, 1)][0] == "GA"
    assert matrix.cuda_drivers[(13, 4, 2)][0] == "Update 1"
    assert matrix_versions.cuda_label((13, 4, 1)) == "GA" and matrix_versions.cuda_label((12, 4, 1)) == "Update 1"
    assert matrix_versions.cuda_label((13, 4, 7)) == "build 7"


def test_a_later_13_4_build_is_not_read_as_an_update():
    note = matrix_evaluate.Matrix(today=TODAY).cuda_release("13.4.5")[2]
    assert "build number, not an update" in note


@pytest.mark.parametrize("cuda", ["13.2.2", "13.3.1", "13.4", "13.4.2", "13.5"])
def test_new_cuda_releases_are_known_and_never_fail_on_an_unread_floor(cuda: str):
    assert matrix_evaluate.Matrix(today=TODAY).cuda_release(cuda)[0] in matrix_evaluate.Matrix(today=TODAY).cuda_drivers
    found = findings({"driver_version": "580.95.05"}, [cuda], "cuda_driver")
    assert "error" not in severities(found), found


def test_cuda_13_3_update_1_needs_610_43_02():
    # The 13.3 Update 1 release notes' table and its runfile, cuda_13.3.1_610.43.02_linux.run: not 610.57.04,
    # a later R610 driver that nodes between the two were wrongly told to upgrade to.
    matrix = matrix_evaluate.Matrix(today=TODAY)
    assert matrix.min_driver("13.3.1") == "610.43.02"
    assert matrix.cuda_drivers[(13, 3, 1)][0] == "Update 1"
    for driver in ("610.43.02", "610.50.01", "610.57.03"):
        assert "error" not in severities(findings({"driver_version": driver}, ["13.3.1"], "cuda_driver")), driver


@pytest.mark.parametrize("release", [(13, 4, 1), (13, 4, 2), (13, 5, 1)])
def test_the_13_4_and_13_5_floors_are_marked_unverified_with_the_reason(release: tuple[int, int, int]):
    row = next(r for r in cuda.CUDA_DRIVERS if matrix_versions.parse_version(r["cuda"]) == release)
    assert row["status"] == "U"
    assert "not readable" in row["source"] or "candidate only" in row["source"]


def test_cuda_13_4_below_the_13_major_floor_is_still_an_error():
    found = findings({"driver_version": "575.57.08"}, ["13.4"], "cuda_driver")
    assert severities(found) == ["error", "warning"]
    assert "needs 580 or newer" in found[0]["message"]
    assert "not verified yet" in found[1]["message"]


def test_user_row_for_13_4_replaces_the_ga():
    matrix = matrix_evaluate.Matrix(today=TODAY, tables={"cuda_drivers": [{"cuda": "13.4", "driver": "615.10.01"}]})
    assert matrix.min_driver("13.4") == "615.10.01"


# -- toolkit features -----------------------------------------------------------------------


def test_mig_devices_in_cdi_from_toolkit_1_12_0():
    assert matrix_evaluate.Matrix.ctk_features("1.12.0")["cdi_mig_devices"] is True
    assert matrix_evaluate.Matrix.ctk_features("1.11.0")["cdi_mig_devices"] is False


# -- container engine end of life -------------------------------------------------------------


@pytest.mark.parametrize(
    "version,phrase",
    [
        ("1.6.20", "reached end of life on 2025-08-23"),
        ("1.7.24", "extended support ended in September 2026"),
        ("2.0.6", "only a narrow extended support"),
        ("2.1.4", "reached end of life on 2026-07-03"),
        ("2.2.1", "reached end of life on 2026-11-06"),
    ],
)
def test_containerd_end_of_life(version: str, phrase: str):
    found = findings({"container_runtime_engine": "containerd"}, rule="engine_lifecycle", installed={"versions": {"containerd": version}})
    assert severities(found) == ["warning"], found
    assert phrase in found[0]["message"]
    assert "2.3" in found[0]["fix"]


def test_a_supported_containerd_has_no_lifecycle_finding():
    assert findings({"container_runtime_engine": "containerd"}, rule="engine_lifecycle", installed={"versions": {"containerd": "2.3.1"}}) == []


def test_end_of_life_is_announced_ahead():
    found = findings(
        {"container_runtime_engine": "containerd"}, rule="engine_lifecycle", installed={"versions": {"containerd": "2.3.1"}}, today=datetime.date(2028, 2, 1)
    )
    assert "reaches end of life on 2028-04-30" in found[0]["message"]


# -- device names and the device plugin -------------------------------------------------------


def test_several_device_name_strategies_need_toolkit_1_15():
    desired = {"container_toolkit_version": "1.14.6", "container_runtime_cdi": True, "cdi_device_name_strategy": ["index", "uuid"]}
    found = [f for f in findings(desired, rule="container_toolkit") if f["subject"] == "cdi_device_name_strategy"]
    assert severities(found) == ["error"] and "from 1.15.0" in found[0]["message"]
    desired["cdi_device_name_strategy"] = ["uuid"]
    assert not [f for f in findings(desired, rule="container_toolkit") if f["subject"] == "cdi_device_name_strategy"]
    desired.update(container_toolkit_version="1.15.0", cdi_device_name_strategy=["index", "uuid"])
    assert not [f for f in findings(desired, rule="container_toolkit") if f["subject"] == "cdi_device_name_strategy"]


def test_envvar_device_lists_need_the_nvidia_runtime():
    declared = {"device_plugin_device_list_strategy": "envvar", "container_runtime_set_default": False}
    found = findings(declared, rule="device_plugin_runtime")
    assert severities(found) == ["warning"] and "runtimeClassName: nvidia" in found[0]["fix"]
    assert findings(dict(declared, container_runtime_set_default=True), rule="device_plugin_runtime") == []
    assert findings(dict(declared, device_plugin_device_list_strategy="cdi-annotations,cdi-cri"), rule="device_plugin_runtime") == []


# -- driver security bulletins ------------------------------------------------------------


def test_a_driver_without_its_branchs_security_fixes_warns_naming_the_bulletins():
    found = findings({"driver_version": "580.95.05"}, rule="driver_security")
    assert severities(found) == ["warning"]
    assert "5747 (2026-01-28), 5821 (2026-05-19), 5861 (2026-09-30)" in found[0]["message"]
    assert "set driver_version to 580.178.04 or newer" in found[0]["fix"]
    assert found[0]["source"].endswith("2026/5861/5861.md")


@pytest.mark.parametrize(
    "desired",
    [
        {"driver_version": "580.178.04"},  # the newest R580 fix
        {"driver_version": "595.91.07"},
        {"driver_branch": "580"},  # the branch's newest release is installed
        {"driver_version": "620.70.06"},  # no bulletin read covers R620 yet
    ],
)
def test_a_driver_with_its_fixes_or_a_bare_branch_passes(desired: dict[str, str]):
    assert findings(desired, rule="driver_security") == []


def test_an_installed_driver_is_named_by_its_version():
    found = findings(installed={"nvml": {"status": "ok", "driver_version": "535.288.01", "gpus": []}}, target="installed", rule="driver_security")
    assert [f["subject"] for f in found] == ["driver 535.288.01"]
    assert "535.309.01" in found[0]["message"]


# -- DCGM and device plugin security floors -----------------------------------------------------


@pytest.mark.parametrize(
    "declared,subjects",
    [
        # Bulletin 5857 (CVE-2026-47483): DCGM up to 4.5.2, dcgm-exporter before 4.8.2 (the release 4.5.3-4.8.2).
        ({"dcgm_version": "4.5.2", "dcgm_exporter_version": "4.5.2-4.8.0"}, "dcgm_version, dcgm_exporter_version"),
        ({"dcgm_version": "1:4.5.2-1", "dcgm_exporter": False, "dcgm_exporter_version": "4.5.2-4.8.0"}, "dcgm_version"),
        ({"dcgm_version": "4.5.3", "dcgm_exporter_version": "4.5.3-4.8.1"}, "dcgm_exporter_version"),
        ({"dcgm_version": "4.5.3", "dcgm_exporter_version": "4.5.3-4.8.2"}, None),
        ({"dcgm_version": "4.6.0"}, None),
    ],
)
def test_dcgm_and_its_exporter_below_the_fix_of_cve_2026_47483_are_errors(declared: dict, subjects: str | None):
    found = findings(declared, rule="dcgm_cve_2026_47483")
    if subjects is None:
        assert found == []
        return
    assert [(f["severity"], f["subject"]) for f in found] == [("error", subjects)]
    assert "CVE-2026-47483" in found[0]["message"] and "2026/5857/5857.md" in found[0]["source"]
    assert "preflight_ignore_rules" in found[0]["fix"]


@pytest.mark.parametrize(
    "version,strategy,errors",
    [
        # Bulletin 5659: the device plugin up to 0.17.2, only with a CDI device-list strategy; fixed in 0.17.3.
        ("v0.17.2", "cdi-cri", ["device_plugin_cve_2025_23266", "device_plugin_cve_2025_23267"]),
        ("0.17.2", "cdi-annotations", ["device_plugin_cve_2025_23266", "device_plugin_cve_2025_23267"]),
        ("v0.17.2", "envvar", []),
        ("v0.17.3", "cdi-cri", []),
        ("", "cdi-cri", []),
    ],
)
def test_the_device_plugin_below_0_17_3_with_cdi_is_an_error(version: str, strategy: str, errors: list[str]):
    found = [
        f for f in findings({"device_plugin_version": version, "device_plugin_device_list_strategy": strategy}) if f["rule"].startswith("device_plugin_cve")
    ]
    assert [f["rule"] for f in found] == errors
    assert all(f["severity"] == "error" and f["subject"] == "device_plugin_version" for f in found)


# -- MIG on the newest GPUs (issue 38's audit) ------------------------------------------------


@pytest.mark.parametrize("model", ["NVIDIA A800-SXM4-80GB", "NVIDIA A800 40GB Active", "NVIDIA H800", "NVIDIA H800 PCIe"])
def test_a800_and_h800_are_mig_capable_as_nvidias_mig_parted_treats_them(model: str):
    gpu = matrix_evaluate.Matrix(today=TODAY).gpu_from_name(model, model)
    assert gpu.model["mig"] is True and "mig-parted" in gpu.model["source"]
    assert findings({"driver_branch": "580", "driver_gpu_models": [model], "mig_label": "all-1g"}, rule="mig_supported") == []


@pytest.mark.parametrize(
    "device_id,names",
    [
        # NVIDIA/mig-parted's config-default.yaml, spelled out.
        (0x232410DE, ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")),  # H800
        (0x232210DE, ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")),  # H800 PCIe
        (0x318210DE, ("1g.34gb", "1g.34gb+me", "1g.67gb", "2g.67gb", "3g.135gb", "4g.135gb", "7g.269gb")),  # B300
        (0x31C210DE, ("1g.35gb", "1g.35gb+me", "1g.70gb", "2g.70gb", "3g.139gb", "4g.139gb", "7g.278gb")),  # GB300
    ],
)
def test_the_newest_gpus_have_their_mig_profiles(device_id: int, names: tuple[str, ...]):
    model = mig_profiles.known_model(device_id)
    assert model is not None
    assert tuple(name.split("|")[0] for name in model.names) == names
    assert [row[2] for row in model.geometry] == [7, 1, 4, 3, 2, 1, 1]


def test_gb200s_189_gb_names_are_aliases_of_its_production_names():
    names = mig_profiles.known_model(0x294110DE).names
    for early, production in (("3g.95gb", "3g.93gb"), ("4g.95gb", "4g.93gb"), ("7g.189gb", "7g.186gb"), ("1g.24gb", "1g.23gb")):
        assert any(name.split("|")[0] == production and early in name.split("|") for name in names), early


def test_mig_on_the_rtx_pro_6000_server_edition_starts_with_580_82_07():
    # The MIG guide says 575.51.03, but the Server Edition needs 575.57.08 and the GPU Operator says
    # MIG does not work on 575.57.08; NVIDIA's MIG tooling supports it from 580.82.07.
    declared = {"driver_version": "575.57.08", "driver_gpu_models": ["NVIDIA RTX PRO 6000 Blackwell Server Edition"], "mig_label": "all-1g"}
    found = findings(declared, rule="mig_driver")
    assert severities(found) == ["error"] and "580.82.07" in found[0]["message"]
    assert findings(dict(declared, driver_version="580.82.07"), rule="mig_driver") == []


# -- products named by one release of each branch (issue 38's audit) ---------------------------------


@pytest.mark.parametrize(
    "model,driver,severity",
    [
        # NVIDIA/open-gpu-kernel-modules' README: H20-3e (0x232C) first in 535.216.03 and 550.127.08.
        ("NVIDIA H20-3e", "535.216.01", "warning"),
        ("NVIDIA H20-3e", "535.216.03", None),
        ("NVIDIA H20-3e", "550.127.05", "warning"),
        ("NVIDIA H20-3e", "550.127.08", None),
        ("NVIDIA H20-3e", "545.29.06", "warning"),  # a branch that never named it: R550's floor
        ("NVIDIA H20-3e", "580.95.05", None),
        # NVIDIA L2 (0x27B6) first in 535.154.05 and 550.40.07.
        ("NVIDIA L2", "535.146.02", "warning"),
        ("NVIDIA L2", "535.154.05", None),
        ("NVIDIA L2", "570.195.03", None),
    ],
)
def test_a_product_named_by_one_release_of_each_branch_has_that_branchs_floor(model: str, driver: str, severity: str | None):
    gpu = matrix_evaluate.Matrix(today=TODAY).gpu_from_name(model, model)
    assert gpu.model["model"] in ("h20-3e", "l2")
    found = [f for f in findings({"driver_version": driver, "driver_gpu_models": [model]}, rule="architecture_branch") if f["subject"] == gpu.model["model"]]
    assert [f["severity"] for f in found] == ([severity] if severity else []), found


def test_the_h20_3e_and_l2_are_told_apart_from_their_neighbours():
    matrix = matrix_evaluate.Matrix(today=TODAY)
    assert [matrix.gpu_from_name(name, name).model["model"] for name in ("NVIDIA H20", "NVIDIA H20-3e", "NVIDIA L2", "NVIDIA L20", "NVIDIA L4")] == [
        "h20",
        "h20-3e",
        "l2",
        "l20",
        "l4",
    ]


# -- the device plugin's cdi-cri strategy, and IMEX's package (issue 38's audit) ---------------------


@pytest.mark.parametrize(
    "declared,severities_",
    [
        # KEP-4009: alpha (gated) in 1.28, on by default from 1.29.
        ({"crictl_kubernetes_version": "1.27"}, ["error"]),
        ({"crictl_kubernetes_version": "1.28"}, ["warning"]),
        ({"crictl_kubernetes_version": "1.29"}, []),
        ({"crictl_kubernetes_version": "1.34"}, []),
    ],
)
def test_cdi_cri_needs_a_kubelet_that_passes_cdi_devices(declared: dict, severities_: list[str]):
    found = findings(dict(declared, device_plugin_device_list_strategy="cdi-cri"), rule="device_plugin_cdi_cri")
    assert severities(found) == severities_
    assert findings(dict(declared, device_plugin_device_list_strategy="cdi-annotations"), rule="device_plugin_cdi_cri") == []


@pytest.mark.parametrize(
    "engine,version,failing", [("containerd", "1.7.1", True), ("containerd", "1.7.2", False), ("crio", "1.27.4", True), ("crio", "1.28.0", False)]
)
def test_cdi_cri_needs_an_engine_that_reads_cdi_devices_from_the_cri(engine: str, version: str, failing: bool):
    installed = {"versions": {engine: version}}
    found = findings(
        {"device_plugin_device_list_strategy": "cdi-cri", "container_runtime_engine": engine},
        rule="device_plugin_cdi_cri",
        installed=installed,
        target="installed",
    )
    assert severities(found) == (["error"] if failing else [])


@pytest.mark.parametrize(
    "branch,package",
    [("535", None), ("550", "nvidia-imex-550"), ("570", "nvidia-imex-570"), ("575", "nvidia-imex-575"), ("580", "nvidia-imex"), ("610", "nvidia-imex")],
)
def test_imex_ships_as_a_package_of_the_drivers_branch(branch: str, package: str | None):
    assert packages.imex_package(branch) == package
