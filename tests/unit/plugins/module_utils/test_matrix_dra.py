# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The matrix's `dra` rule: NVIDIA's DRA driver's minimums where a node
declares DRA (gpufleet_dra).

The minimums are spelled out literally (from the DRA driver's
docs/prerequisites.md and the GPU Operator's DRA page), so that a wrong
knowledge row cannot make its own test pass.
"""

from __future__ import annotations

import datetime
import typing as t

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import kubernetes as k
from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix import evaluate as matrix_evaluate


def dra(desired: dict[str, t.Any], installed: dict[str, t.Any] | None = None, target: str = "desired") -> list[dict[str, str]]:
    found = matrix_evaluate.Matrix(today=datetime.date(2026, 11, 26)).evaluate(desired, installed, (), target)[1]
    return [f for f in found if f["rule"] in ("dra", "declaration")]


def test_the_rows_say_what_the_sources_say():
    rows = {(row["component"], row["for"]): row["minimum"] for row in k.DRA_MINIMUMS}
    assert rows == {
        ("kubernetes", "gpus"): "1.34.2",
        ("driver", "gpus"): "565",
        ("driver", "compute_domains"): "570.158.01",
        ("kubernetes", "operator"): "1.34.2",
        ("driver", "operator"): "580",
    }
    for row in k.DRA_MINIMUMS:
        assert row["source"].startswith("NVIDIA/") and row["checked"] == "2026-11-26", row


def test_no_dra_declared_no_finding():
    assert dra({"crictl_kubernetes_version": "1.30", "driver_version": "535.261.03"}) == []
    assert dra({"gpufleet_dra": "", "crictl_kubernetes_version": "1.30", "driver_version": "535.261.03"}) == []


@pytest.mark.parametrize(
    "kubernetes,severity,message",
    [
        ("1.34.2", None, None),
        ("1.35", None, None),
        ("1.34.1", "error", "Kubernetes 1.34.1 is below 1.34.2"),
        ("1.34", "warning", "the patch level is not declared"),
        ("1.33", "warning", "DRA works only with feature gates set by hand"),
        ("1.32.5", "warning", "DRA works only with feature gates set by hand"),
        ("1.31", "error", "Kubernetes 1.31 is below 1.34.2"),
    ],
)
def test_kubernetes_for_the_dra_driver(kubernetes: str, severity: str | None, message: str | None):
    found = dra({"gpufleet_dra": "driver", "crictl_kubernetes_version": kubernetes, "driver_version": "580.95.05"})
    if severity is None:
        assert found == []
    else:
        assert [f["severity"] for f in found] == [severity], found
        assert message in found[0]["message"]
        assert found[0]["source"] == "NVIDIA/k8s-dra-driver-gpu@22407113:docs/prerequisites.md"


def test_1_34_1_is_not_rescued_by_feature_gates():
    """1.34 has DRA on by default; the docs' floor within it is a patch release, which gates do not replace."""
    found = dra({"gpufleet_dra": "driver", "crictl_kubernetes_version": "1.34.1"})
    assert [f["severity"] for f in found] == ["error"]


def test_the_operator_workflow_has_no_feature_gate_path():
    found = dra({"gpufleet_dra": "operator", "crictl_kubernetes_version": "1.33", "driver_version": "580.95.05"})
    # The standalone driver's row warns (gates); the Operator's GPUCluster row fails.
    assert sorted((f["severity"], f["message"][:31]) for f in found) == [
        ("error", "Kubernetes 1.33 is below 1.34.2"),
        ("warning", "Kubernetes 1.33 is below 1.34.2"),
    ]


@pytest.mark.parametrize(
    "driver,domains,expected",
    [
        ("565.57.01", False, []),
        ("560.35.03", False, ["driver 560.35.03 is below 565, the minimum GPU driver for GPU allocation"]),
        ("570.158.01", True, []),
        ("570.148.08", True, ["driver 570.148.08 is below 570.158.01, the minimum GPU driver for ComputeDomains"]),
        ("570.148.08", False, []),
    ],
)
def test_driver_minimums(driver: str, domains: bool, expected: list[str]):
    found = dra({"gpufleet_dra": "driver", "gpufleet_dra_compute_domains": domains, "crictl_kubernetes_version": "1.34.2", "driver_version": driver})
    assert [f["message"][: len(e)] for f, e in zip(found, expected)] == expected and len(found) == len(expected), found
    assert all(f["severity"] == "error" and f["layer"] == "driver" for f in found)


def test_operator_needs_580():
    found = dra({"gpufleet_dra": "operator", "crictl_kubernetes_version": "1.34.2", "driver_version": "575.64.05"})
    assert [f["message"][: len("driver 575.64.05 is below 580")] for f in found] == ["driver 575.64.05 is below 580"]


def test_a_bare_branch_that_cannot_tell_warns():
    found = dra({"gpufleet_dra": "driver", "gpufleet_dra_compute_domains": True, "crictl_kubernetes_version": "1.35", "driver_branch": "570"})
    assert [f["severity"] for f in found] == ["warning"]
    assert "the branch alone does not say which release" in found[0]["message"]


def test_the_loaded_driver_is_judged_in_installed_mode():
    nvml = {"status": "ok", "driver_version": "550.163.01", "gpus": []}
    found = dra({"gpufleet_dra": "driver", "crictl_kubernetes_version": "1.35"}, {"nvml": nvml}, target="installed")
    assert [f["message"][: len("driver 550.163.01 is below 565")] for f in found] == ["driver 550.163.01 is below 565"]


def test_no_kubernetes_declared_warns():
    found = dra({"gpufleet_dra": "driver", "driver_version": "580.95.05"})
    assert [f["severity"] for f in found] == ["warning"]
    assert "no Kubernetes version is declared" in found[0]["message"]


def test_an_unknown_workflow_is_a_declaration_error():
    found = dra({"gpufleet_dra": "yes", "crictl_kubernetes_version": "1.35"})
    assert [(f["rule"], f["subject"]) for f in found] == [("declaration", "gpufleet_dra")]
    assert 'set gpufleet_dra to "driver"' in found[0]["fix"]
