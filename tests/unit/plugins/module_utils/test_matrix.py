# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Each matrix rule pinned to rows of the tables it encodes.

Expectations come from the tables themselves (every row is exercised) plus
the examples the issue names, which are spelled out literally so that a
wrong table row cannot make its own test pass.
"""

from __future__ import annotations

import datetime
import typing as t

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils import _findings
from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix import custom as matrix_custom
from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix import evaluate as matrix_evaluate
from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix import node as matrix_node
from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix import tables as matrix_tables
from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix import versions as matrix_versions

TODAY = datetime.date(2026, 11, 22)


def matrix(**kwargs: t.Any) -> matrix_evaluate.Matrix:
    kwargs.setdefault("today", TODAY)
    return matrix_evaluate.Matrix(**kwargs)


def findings(
    desired: dict[str, t.Any] | None = None,
    cuda: t.Sequence[str] = (),
    rule: str | None = None,
    installed: dict[str, t.Any] | None = None,
    target: str = "desired",
    cuda_compat: bool = False,
    **kwargs: t.Any,
) -> list[dict[str, str]]:
    """The matrix's findings (of `rule` only when given; `ctk_cve` stands for every toolkit CVE floor)."""
    found = matrix(**kwargs).evaluate(desired, installed, cuda, target, cuda_compat)[1]
    return [f for f in found if rule is None or f["rule"] == rule or (rule == "ctk_cve" and f["rule"].startswith("ctk_cve_"))]


def severities(found: list[dict[str, str]]) -> list[str]:
    return [f["severity"] for f in found]


def one_below(version: str) -> str:
    """The release just before `version` (last component minus one, or the previous branch)."""
    parts = list(matrix_versions.parse_version(version))
    if len(parts) > 1 and parts[-1] > 0:
        parts[-1] -= 1
    elif len(parts) > 1:
        parts = parts[:-1]
        parts[-1] -= 1
    else:
        parts = [parts[0] - 1, 99, 99]
    return matrix_versions.version_text(parts)


# -- the examples, literally --------------------------------------------


def test_cuda_12_4_needs_550_54_14():
    assert matrix().min_driver("12.4") == "550.54.14"


def test_cuda_13_0_needs_580():
    assert matrix().min_driver("13.0", "minor") == "580"
    errors = findings({"driver_version": "575.57.08"}, ["13.0"], "cuda_driver")
    assert severities(errors) == ["error"]
    assert "580" in errors[0]["message"]
    assert findings({"driver_version": "580.65.06"}, ["13.0"], "cuda_driver") == []


def test_v100_with_r590_is_an_error():
    found = findings({"driver_branch": "590", "driver_gpu_models": ["Tesla V100-SXM2-16GB"]}, rule="architecture_branch")
    assert severities(found) == ["error"]
    assert "R580 is the last branch for Volta" in found[0]["message"]


def test_b200_with_proprietary_modules_is_an_error():
    found = findings({"driver_branch": "580", "driver_kernel_module": "proprietary", "driver_gpu_models": ["B200"]}, rule="kernel_module")
    assert severities(found) == ["error"]
    assert "open" in found[0]["fix"]


def test_r535_after_june_2026_warns_end_of_life():
    after = findings({"driver_branch": "535"}, rule="branch_lifecycle", today=datetime.date(2026, 7, 1))
    assert severities(after) == ["warning"]
    assert "reached end of life in June 2026" in after[0]["message"]
    during = findings({"driver_branch": "535"}, rule="branch_lifecycle", today=datetime.date(2026, 6, 30))
    assert "reaches end of life in June 2026" in during[0]["message"]


# -- 1b: every CUDA release row --------------------------------------------------


PINNED_CUDA = [row for row in matrix_tables.CUDA_TOOLKIT_DRIVERS if row[2]]


@pytest.mark.parametrize("cuda,label,driver", PINNED_CUDA, ids=[r[0] for r in PINNED_CUDA])
def test_cuda_release_row(cuda: str, label: str, driver: str):
    assert matrix().min_driver(cuda) == driver
    if label == "GA":
        assert matrix().min_driver(cuda.rsplit(".", 1)[0]) == driver
    assert findings({"driver_version": driver}, [cuda], "cuda_driver") == []
    below = findings({"driver_version": one_below(driver)}, [cuda], "cuda_driver")
    major, minor = matrix_versions.parse_version(cuda)[:2]
    floor = matrix_tables.CUDA_MVC_FLOORS.get(major) if minor >= matrix_tables.CUDA_MVC_FIRST_MINOR.get(major, 0) else None
    if floor and matrix_versions.parse_version(one_below(driver)) >= matrix_versions.parse_version(floor):
        assert severities(below) == ["warning"], below
        assert "minor version compatibility" in below[0]["message"]
    elif matrix_tables.CUDA_STATUS[cuda] == "U" and not floor:
        # An unverified floor only ever warns.
        assert severities(below) == ["warning"], below
    else:
        assert severities(below) == ["error"], below


def test_mvc_floor_per_major():
    assert matrix().min_driver("12.8", "minor") == "525.60.13"
    assert matrix().min_driver("11.4", "minor") == "450.80.02"
    # 11.0 predates minor version compatibility: its own release driver.
    assert matrix().min_driver("11.0", "minor") == "450.51.05"


def test_driver_between_floor_and_release_runs_with_limited_features():
    found = findings({"driver_version": "550.54.14"}, ["12.8"], "cuda_driver")
    assert severities(found) == ["warning"]
    assert "570.26" in found[0]["message"]


def test_driver_below_the_floor_cannot_run_the_major():
    found = findings({"driver_version": "520.61.05"}, ["12.4"], "cuda_driver")
    assert severities(found) == ["error"]
    assert "525.60.13 or newer runs it with a limited feature set" in found[0]["message"]


def test_bare_branch_in_the_release_branch_is_only_informational():
    found = findings({"driver_branch": "550"}, ["12.4"], "cuda_driver")
    assert severities(found) == ["info"]
    assert "pin driver_version to 550.54.14" in found[0]["fix"]


def test_unverified_update_uses_its_candidate_floor_and_only_warns():
    # 13.2 Update 2's driver is a candidate (the cuda-compat package NVIDIA ships with 595.71.05): status U.
    assert matrix_tables.CUDA_STATUS["13.2.2"] == "U"
    assert matrix().cuda_release("13.2.2")[1] == matrix_versions.parse_version("595.71.05")
    found = findings({"driver_version": "595.58.03"}, ["13.2.2"], "cuda_driver")
    assert severities(found) == ["warning"]
    assert "595.71.05 or newer (an unverified floor)" in found[0]["message"]
    # Below the 13.x compatibility floor (verified) it is still an error.
    assert severities(findings({"driver_version": "575.57.08"}, ["13.2.2"], "cuda_driver")) == ["error"]


def test_unknown_minor_falls_back_to_the_major_floor():
    found = findings({"driver_version": "580.95.05"}, ["13.9"], "cuda_driver")
    assert severities(found) == ["warning", "warning"]
    assert any("not in the matrix" in f["message"] for f in found)
    assert severities(findings({"driver_version": "575.57.08"}, ["13.9"], "cuda_driver")) == ["error", "warning"]


def test_user_rows_extend_the_cuda_table():
    tables = {"cuda_drivers": [{"cuda": "13.4", "driver": "615.10.01"}]}
    assert matrix(tables=tables).min_driver("13.4") == "615.10.01"
    assert findings({"driver_version": "615.10.01"}, ["13.4"], "cuda_driver", tables=tables) == []


def test_driver_max_cuda():
    assert matrix().max_cuda("550.127.05") == "12.4"
    assert matrix().max_cuda("580.65.06") == "13.0"
    assert matrix().max_cuda("450.36.05") is None


# -- 2b: every branch row ------------------------------------------------------------

DATED = [(b, info["eol"]) for b, info in matrix_tables.DRIVER_BRANCHES.items() if info["eol"] not in (None, "ended")]


@pytest.mark.parametrize("branch,eol", DATED, ids=[row[0] for row in DATED])
def test_dated_branch_row(branch: str, eol: str):
    end = matrix_versions._month_end(eol)
    assert matrix(today=end + datetime.timedelta(days=1)).branch_status(branch)["status"] == "eol"
    assert matrix(today=end).branch_status(branch)["status"] == "near_eol"
    assert matrix(today=end - datetime.timedelta(days=181)).branch_status(branch)["status"] == "supported"
    warned = findings({"driver_branch": branch}, rule="branch_lifecycle", today=end + datetime.timedelta(days=1))
    assert "warning" in severities(warned)


@pytest.mark.parametrize("branch", [b for b, i in matrix_tables.DRIVER_BRANCHES.items() if i["eol"] == "ended"])
def test_ended_branch_row(branch: str):
    status = matrix().branch_status(branch)
    assert status["status"] == "eol"
    assert "warning" in severities(findings({"driver_branch": branch}, rule="branch_lifecycle"))


@pytest.mark.parametrize("branch", [b for b, i in matrix_tables.DRIVER_BRANCHES.items() if i["eol"] is None])
def test_unverified_branch_row_only_warns(branch: str):
    found = findings({"driver_branch": branch}, rule="branch_lifecycle")
    assert "error" not in severities(found)
    assert any("not verified" in f["message"] and matrix_tables.DRIVER_BRANCHES[branch]["note"] in f["message"] for f in found)


def test_branch_missing_from_the_lifecycle_table_warns():
    found = findings({"driver_version": "545.23.08"}, rule="branch_lifecycle")
    assert severities(found) == ["warning"]
    assert "not in the lifecycle table" in found[0]["message"]


def test_supported_ltsb_has_no_lifecycle_finding():
    assert findings({"driver_branch": "580"}, rule="branch_lifecycle") == []


def test_new_feature_branch_is_noted():
    found = findings({"driver_branch": "610"}, rule="branch_lifecycle", today=datetime.date(2026, 1, 1))
    assert severities(found) == ["info"]


def test_user_branch_rows():
    tables = {"branches": [{"branch": "615", "type": "PB", "eol": "2027-09"}]}
    assert findings({"driver_branch": "615"}, rule="branch_lifecycle", tables=tables) == []
    with pytest.raises(matrix_tables.MatrixError, match="YYYY-MM"):
        matrix(tables={"branches": [{"branch": "615", "eol": "soon"}]})


# -- 2c: architectures ----------------------------------------------------------------

BOUNDED = [(row[0], row[2]) for row in matrix_tables.ARCHITECTURES if row[2]]


@pytest.mark.parametrize("architecture,last", BOUNDED, ids=[row[0] for row in BOUNDED])
def test_last_branch_row(architecture: str, last: str):
    assert findings({"driver_branch": last, "driver_gpu_models": [architecture]}, rule="architecture_branch") == []
    newer = min(int(b) for b in matrix_tables.DRIVER_BRANCHES if int(b) > int(last))
    found = findings({"driver_branch": str(newer), "driver_gpu_models": [architecture]}, rule="architecture_branch")
    assert severities(found) == ["error"]


FIRST = [(row[0], row[1]) for row in matrix_tables.ARCHITECTURES if row[1] and matrix_versions.parse_version(row[1]) >= (11, 0)]


@pytest.mark.parametrize("architecture,first_cuda", FIRST, ids=[row[0] for row in FIRST])
def test_first_driver_row(architecture: str, first_cuda: str):
    first = matrix().architecture_support(architecture)[0]
    assert first == matrix().min_driver(first_cuda)
    assert findings({"driver_version": first, "driver_gpu_models": [architecture]}, rule="architecture_branch") == []
    found = findings({"driver_version": one_below(first), "driver_gpu_models": [architecture]}, rule="architecture_branch")
    assert severities(found) == ["error"]


def test_blackwell_starts_with_r570_and_hopper_with_r520():
    assert matrix().architecture_support("blackwell")[0] == "570.26"
    assert matrix().architecture_support("hopper")[0] == "520.61.05"


# -- 2d: kernel modules ----------------------------------------------------------------


@pytest.mark.parametrize("model", ["Tesla V100-SXM2-16GB", "Tesla P100-PCIE-16GB", "Tesla M60"])
def test_open_modules_are_not_for_volta_and_older(model: str):
    found = findings({"driver_branch": "580", "driver_kernel_module": "open", "driver_gpu_models": [model]}, rule="kernel_module")
    assert severities(found) == ["error"]


@pytest.mark.parametrize("model", ["NVIDIA B200", "NVIDIA GB200", "NVIDIA GH200 480GB", "RTX PRO 6000 Blackwell"])
def test_open_modules_are_required_on_blackwell_and_grace_hopper(model: str):
    found = findings({"driver_branch": "580", "driver_kernel_module": "proprietary", "driver_gpu_models": [model]}, rule="kernel_module")
    assert severities(found) == ["error"]


def test_auto_cannot_serve_volta_and_blackwell_together():
    found = findings({"driver_branch": "580", "driver_gpu_models": ["V100", "B200"]}, rule="kernel_module")
    assert severities(found) == ["error"]


def test_open_modules_start_with_r515():
    found = findings({"driver_branch": "510", "driver_kernel_module": "open", "driver_gpu_models": ["T4"]}, rule="kernel_module")
    assert severities(found) == ["error"]
    assert findings({"driver_branch": "515", "driver_kernel_module": "open", "driver_gpu_models": ["T4"]}, rule="kernel_module") == []


def test_auto_resolution():
    mx = matrix()
    assert mx.kernel_module_for([mx.gpu_from_name("H100", "x")])[0].flavour == "open"
    assert mx.kernel_module_for([mx.gpu_from_name("V100", "x")])[0].flavour == "proprietary"


def test_proprietary_on_turing_after_r560_is_a_hint():
    found = findings({"driver_branch": "580", "driver_kernel_module": "proprietary", "driver_gpu_models": ["T4"]}, rule="kernel_module")
    assert severities(found) == ["info"]


# -- MIG ---------------------------------------------------------------------------------

MIG_MODELS = [row for row in matrix_tables.GPU_MODELS if row.get("mig_min_driver")]


@pytest.mark.parametrize("row", MIG_MODELS, ids=[r["model"] for r in MIG_MODELS])
def test_mig_minimum_driver_row(row: dict[str, t.Any]):
    desired = {"driver_version": row["mig_min_driver"], "driver_gpu_models": [row["model"]], "mig_label": "all-1g"}
    assert findings(desired, rule="mig_driver") == []
    desired["driver_version"] = one_below(row["mig_min_driver"])
    assert severities(findings(desired, rule="mig_driver")) == ["error"]


def test_hopper_mig_needs_525_85_12():
    found = findings({"driver_version": "525.60.13", "driver_gpu_models": ["H100"], "mig_label": "all-1g"}, rule="mig_driver")
    assert "525.85.12" in found[0]["message"]


def test_mig_on_a_gpu_without_mig_is_an_error():
    found = findings({"driver_branch": "580", "driver_gpu_models": ["L40S"], "mig_label": "all-1g"}, rule="mig_supported")
    assert severities(found) == ["error"]


def test_no_mig_rules_without_a_label():
    assert findings({"driver_version": "450.36.06", "driver_gpu_models": ["A100"], "mig_label": ""}, rule="mig_driver") == []


def test_mig_config_selects_gpus():
    nvml = {
        "status": "ok",
        "gpus": [
            {"index": 0, "name": "NVIDIA A100-SXM4-40GB", "architecture": "ampere", "mig": {"capable": True}, "pci": {"device_id": "0x20B010DE"}},
            {"index": 1, "name": "NVIDIA L40S", "architecture": "ada", "mig": {"capable": False}, "pci": {"device_id": "0x26B910DE"}},
        ],
    }
    config = {
        "version": "v1",
        "mig-configs": {"mixed": [{"devices": [0], "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}, {"devices": [1], "mig-enabled": False}]},
    }
    desired = {"driver_branch": "580", "mig_label": "mixed", "mig_config": config}
    assert findings(desired, rule="mig_supported", installed={"nvml": nvml}) == []
    config["mig-configs"]["mixed"][1]["mig-enabled"] = True
    assert severities(findings(desired, rule="mig_supported", installed={"nvml": nvml})) == ["error"]


# -- 3a/3c: toolkit and engines ------------------------------------------------------------


@pytest.mark.parametrize("feature,first,what", matrix_tables.CTK_FEATURES, ids=[row[0] for row in matrix_tables.CTK_FEATURES])
def test_ctk_feature_row(feature: str, first: str, what: str):
    assert what
    assert matrix_evaluate.Matrix.ctk_features(first)[feature] is True
    assert matrix_evaluate.Matrix.ctk_features(one_below(first))[feature] is False


def test_containerd_2_needs_toolkit_1_17_4():
    installed = {"versions": {"containerd": "2.1.4"}}
    desired = {"container_toolkit_version": "1.17.3", "container_runtime_engine": "containerd"}
    errors = [f for f in findings(desired, rule="container_toolkit", installed=installed) if f["severity"] == "error"]
    assert [f["subject"] for f in errors] == ["containerd_config_v3"]
    desired["container_toolkit_version"] = "1.17.4"
    assert "error" not in severities(findings(desired, rule="container_toolkit", installed=installed))


def test_cdi_needs_toolkit_1_12():
    desired = {"container_toolkit_version": "1.11.0", "container_runtime_cdi": True}
    assert severities(findings(desired, rule="container_toolkit")) == ["error"]


def test_refresh_units_come_with_1_18():
    desired = {"container_toolkit_version": "1.17.8", "cdi_spec_dir": "/etc/cdi"}
    assert any(f["subject"] == "cdi_refresh_units" for f in findings(desired, rule="container_toolkit"))
    desired["container_toolkit_version"] = "1.18.0"
    assert not any(f["subject"] == "cdi_refresh_units" for f in findings(desired, rule="container_toolkit"))


ENGINE_ROWS = [(engine, first, level) for engine, rows in matrix_tables.ENGINE_CDI.items() for first, level in rows if first != "0"]
EXPECTED_SEVERITY = {"none": ["warning"], "unverified": ["warning"], "opt_in": ["info"], "default": []}


@pytest.mark.parametrize("engine,first,level", ENGINE_ROWS, ids=["{0}-{1}".format(*row[:2]) for row in ENGINE_ROWS])
def test_engine_cdi_row(engine: str, first: str, level: str):
    desired = {"container_runtime_engine": engine, "container_runtime_cdi": True}
    at = findings(desired, rule="engine_cdi", installed={"versions": {engine: first}})
    assert severities(at) == EXPECTED_SEVERITY[level]
    before = [lv for v, lv in matrix_tables.ENGINE_CDI[engine] if matrix_versions.parse_version(v) < matrix_versions.parse_version(first)][-1]
    below = findings(desired, rule="engine_cdi", installed={"versions": {engine: one_below(first)}})
    assert severities(below) == EXPECTED_SEVERITY[before]


def test_containerd_from_debian_package_facts():
    packages = {"containerd": [{"name": "containerd", "version": "1.6.20~ds1-1+deb12u3", "source": "apt"}]}
    found = findings({"container_runtime_engine": "containerd", "container_runtime_cdi": True}, rule="engine_cdi", installed={"packages": packages})
    assert severities(found) == ["warning"]
    assert "containerd 1.6.20" in found[0]["subject"]


def test_no_engine_cdi_finding_when_cdi_is_not_wanted():
    assert (
        findings({"container_runtime_engine": "docker", "container_runtime_cdi": False}, rule="engine_cdi", installed={"versions": {"docker": "20.10.24"}})
        == []
    )


# -- 4: crictl -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "crictl,kubernetes,expected",
    [
        ("v1.33.0", "1.33", []),
        ("v1.33.2", "1.33.4", []),
        ("v1.32.0", "1.33", ["warning"]),
        ("v1.34.0", "1.33", ["warning"]),
        ("v1.26.0", "1.27", ["error"]),
        # cri-tools README: Kubernetes 1.16-1.26 work with any cri-tools 1.16-1.26.
        ("v1.25.0", "1.26", ["warning"]),
        ("v1.16.0", "1.26", ["warning"]),
        ("v1.27.0", "1.26", ["error"]),
        ("v1.15.0", "1.16", ["error"]),
        # Before 1.16 each Kubernetes minor has its own cri-tools minor.
        ("v1.14.0", "1.15", ["error"]),
        ("v1.15.0", "1.15", []),
    ],
)
def test_crictl_follows_kubernetes_minors(crictl: str, kubernetes: str, expected: list[str]):
    found = findings({"crictl_version": crictl, "crictl_kubernetes_version": kubernetes}, rule="crictl_skew")
    assert severities(found) == expected


def test_derived_crictl_has_no_skew():
    assert findings({"crictl_version": "", "crictl_kubernetes_version": "1.33"}, rule="crictl_skew") == []


# -- Fabric Manager ----------------------------------------------------------------------------


def test_fabricmanager_must_equal_the_driver():
    nvml = {"status": "ok", "driver_version": "580.82.07", "gpus": []}
    packages = {"nvidia-fabricmanager-580": [{"version": "580.65.06-1"}]}
    found = findings(rule="fabricmanager", installed={"nvml": nvml, "packages": packages}, target="installed")
    assert severities(found) == ["error"]
    packages["nvidia-fabricmanager-580"][0]["version"] = "580.82.07-1"
    assert findings(rule="fabricmanager", installed={"nvml": nvml, "packages": packages}, target="installed") == []


# -- declarations ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "desired,field",
    [
        ({"driver_version": "latest"}, "driver_version"),
        ({"driver_branch": "R580"}, "driver_branch"),
        ({"container_toolkit_version": "stable"}, "container_toolkit_version"),
        ({"container_runtime_engine": "podman"}, "container_runtime_engine"),
        ({"crictl_kubernetes_version": "2.1"}, "crictl_kubernetes_version"),
    ],
)
def test_bad_declarations_name_the_field_and_the_fix(desired: dict[str, t.Any], field: str):
    found = findings(desired, rule="declaration")
    assert severities(found) == ["error"]
    assert found[0]["subject"] == field
    assert field in found[0]["message"] and found[0]["fix"]


def test_driver_version_decides_the_branch_as_in_the_driver_role():
    """driver_branch is the role default "580" unless set; an exact version overrides it."""
    view, found = matrix().evaluate({"driver_branch": "580", "driver_version": "535.261.03"}, None, ["12.2"])
    assert [f for f in found if f["rule"] == "declaration"] == []
    assert str(view.driver.branch) == "535"


def test_bad_cuda_version():
    assert severities(findings({}, ["twelve"], "declaration")) == ["error"]


def test_unknown_gpu_model_warns():
    found = findings({"driver_branch": "580", "driver_gpu_models": ["Quantum Q9000"]}, rule="gpu_model")
    assert severities(found) == ["warning"]
    tables = {"gpu_models": [{"model": "Q9000", "architecture": "blackwell"}]}
    assert findings({"driver_branch": "580", "driver_gpu_models": ["Quantum Q9000"]}, rule="gpu_model", tables=tables) == []


@pytest.mark.parametrize(
    "name,architecture",
    [
        ("NVIDIA A100-SXM4-40GB", "ampere"),
        ("NVIDIA H100 80GB HBM3", "hopper"),
        ("NVIDIA H200", "hopper"),
        ("NVIDIA L40S", "ada"),
        ("Tesla T4", "turing"),
        ("Tesla V100-SXM2-16GB", "volta"),
        ("NVIDIA GH200 480GB", "hopper"),
        ("NVIDIA B200", "blackwell"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "blackwell"),
        ("Tesla K80", "kepler"),
        ("NVIDIA A10G", "ampere"),
        ("NVIDIA L4", "ada"),
        ("H100", "hopper"),
        ("hopper", "hopper"),
    ],
)
def test_gpu_models(name: str, architecture: str):
    assert matrix().gpu_from_name(name, name).architecture == architecture


def test_nvml_architecture_wins_over_the_name():
    nvml = {"status": "ok", "gpus": [{"index": 0, "name": "NVIDIA Future GPU", "architecture": "blackwell"}]}
    view = matrix().view({}, {"nvml": nvml})[0]
    assert view.gpus[0].architecture == "blackwell"
    assert view.gpu_source == "nvml"


# -- versions ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,expected",
    [
        ("550.54.14", (550, 54, 14)),
        ("v1.33.0", (1, 33, 0)),
        ("1:1.17.8-1", (1, 17, 8)),
        ("1.7.24~ds1-6+deb13u1", (1, 7, 24)),
        ("5:28.3.0-1~debian.12~bookworm", (28, 3, 0)),
        ("580", (580,)),
    ],
)
def test_parse_version(text: str, expected: tuple[int, ...]):
    assert matrix_versions.parse_version(text) == expected


def test_parse_version_rejects_words():
    with pytest.raises(matrix_tables.MatrixError):
        matrix_versions.parse_version("latest")


@pytest.mark.parametrize(
    "driver,operator,operand,expected",
    [
        (matrix_versions.Driver(version="550.90.07"), ">=", "550.90.07", True),
        (matrix_versions.Driver(version="550.54.14"), ">=", "550.90.07", False),
        (matrix_versions.Driver(version="550.54.14"), "==", "550", True),
        (matrix_versions.Driver(branch="580"), ">=", "550.90.07", True),
        (matrix_versions.Driver(branch="550"), ">=", "550.90.07", None),
        (matrix_versions.Driver(branch="550"), "==", "550", True),
        (matrix_versions.Driver(branch="535"), "<", "550", True),
    ],
)
def test_driver_compare(driver: matrix_versions.Driver, operator: str, operand: str, expected: bool | None):
    assert driver.compare(operator, operand) is expected


# -- custom rules -------------------------------------------------------------------------------

HOPPER_FLOOR = {
    "id": "hopper-floor",
    "severity": "error",
    "message": "Hopper nodes run R550.90 or newer",
    "fix": "pin driver_version >= 550.90.07",
    "when": {"gpu_architecture": "hopper"},
    "require": {"driver_version": ">= 550.90.07"},
}


def test_custom_rule_fires_only_when_it_applies():
    rules = [HOPPER_FLOOR]
    low = findings({"driver_version": "550.54.14", "driver_gpu_models": ["H100"]}, custom_rules=rules, rule="custom:hopper-floor")
    assert severities(low) == ["error"]
    assert findings({"driver_version": "550.90.07", "driver_gpu_models": ["H100"]}, custom_rules=rules, rule="custom:hopper-floor") == []
    assert findings({"driver_version": "550.54.14", "driver_gpu_models": ["A100"]}, custom_rules=rules, rule="custom:hopper-floor") == []


def test_custom_rule_on_a_bare_branch_warns_instead_of_guessing():
    found = findings({"driver_branch": "550", "driver_gpu_models": ["H100"]}, custom_rules=[HOPPER_FLOOR], rule="custom:hopper-floor")
    assert severities(found) == ["warning"]


def test_custom_rule_lists_and_text_fields():
    rule = {"id": "engines", "severity": "warning", "require": {"engine": ["containerd", "crio"]}}
    assert severities(findings({"container_runtime_engine": "docker"}, custom_rules=[rule], rule="custom:engines")) == ["warning"]
    assert findings({"container_runtime_engine": "crio"}, custom_rules=[rule], rule="custom:engines") == []


@pytest.mark.parametrize(
    "spec,message",
    [
        ({"id": "x", "require": {"colour": "red"}}, "unknown field `colour`"),
        ({"id": "x", "require": {"driver_version": ">= soon"}}, "not a version condition"),
        ({"id": "x", "severity": "fatal", "require": {"engine": "docker"}}, "severity"),
        ({"id": "x"}, "`require` needs"),
        ({"id": "has space", "require": {"engine": "docker"}}, "`id` must be a word"),
        ({"id": "x", "require": {"engine": ">= docker"}}, "compares text"),
    ],
)
def test_invalid_custom_rules_are_refused(spec: dict[str, t.Any], message: str):
    with pytest.raises(matrix_tables.MatrixError, match=message):
        matrix_custom.CustomRule(spec)


def test_ignored_rules_are_dropped():
    desired = {"driver_branch": "535"}
    assert findings(desired, rule="branch_lifecycle", ignore_rules=["branch_lifecycle"]) == []


def test_installed_target_reads_the_loaded_driver():
    nvml = {
        "status": "ok",
        "driver_version": "535.230.02",
        "gpus": [{"index": i, "name": "Tesla V100-SXM2-16GB", "architecture": "volta", "mig": {"capable": False}} for i in range(2)],
    }
    view, found = matrix().evaluate({"driver_branch": "590"}, {"nvml": nvml}, ["12.4"], "installed")
    assert str(view.driver) == "535.230.02"
    # R535 runs CUDA 12.4 only through minor version compatibility; the
    # declared R590 plays no part in judging what is installed. 535.230.02
    # also predates R535's last security fixes.
    assert {(f["rule"], f["severity"]) for f in found if f["severity"] != "info"} == {
        ("cuda_driver", "warning"),
        ("branch_lifecycle", "warning"),
        ("driver_security", "warning"),
    }


def test_fails_threshold():
    found = [matrix_node.finding("x", "warning", "s", "m", "f", "driver")]
    assert _findings.fails(found, "error") == []
    assert _findings.fails(found, "warning") == found
    assert _findings.fails(found, "never") == []
