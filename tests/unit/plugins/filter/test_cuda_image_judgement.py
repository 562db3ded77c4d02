# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The CUDA image matrix: each image judged against a node's driver and GPUs,
with the knowledge base's real numbers (CUDA 12.4 needs 550.54.14, 12.8 needs
570.26, 13.0 does not target Volta)."""

from __future__ import annotations

import typing as t

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.filter.matrix import cuda_image_judgement
from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import gpus as kb_gpus

DIGEST = "@sha256:" + "0123456789abcdef" * 4


def image(cuda: str, **extra: t.Any) -> dict[str, t.Any]:
    return dict({"name": "nvcr.io/nvidia/cuda:{0}-base-ubuntu24.04{1}".format(cuda, DIGEST), "cuda": cuda}, **extra)


def judge(cuda: str, driver: str, gpus: t.Any, packages: t.Any = None, **extra: t.Any) -> dict[str, t.Any]:
    [result] = cuda_image_judgement([image(cuda, **extra)], driver, gpus, packages=packages)
    return result


@pytest.mark.parametrize("driver, verdict", [("550.54.14", "native"), ("550.127.05", "native"), ("580.95.05", "native")])
def test_cuda_12_4_runs_natively_from_550_54_14(driver: str, verdict: str):
    result = judge("12.4", driver, ["NVIDIA H100 80GB HBM3"])
    assert (result["verdict"], result["min_driver"], result["run"]) == (verdict, "550.54.14", True)
    assert result["compat_package"] is None


def test_cuda_12_4_1_is_update_1_with_its_own_floor():
    assert judge("12.4.1", "550.54.14", ["H100"])["min_driver"] == "550.54.15"
    assert judge("12.4.1", "550.54.15", ["H100"])["verdict"] == "native"


def test_cuda_12_8_on_driver_550_needs_compat_on_data_center_gpus():
    result = judge("12.8", "550.127.05", ["NVIDIA A100-SXM4-40GB"])
    assert result["verdict"] == "compat"
    assert result["min_driver"] == "570.26"
    assert result["compat_package"] == "cuda-compat-12-8"
    # Not installed on the node: the lead's workload layer does not run it.
    assert (result["compat_installed"], result["run"]) == (False, False)
    assert "cuda-compat-12-8, which is not installed" in result["reason"]


def test_compat_runs_where_the_node_has_the_package():
    packages = {"cuda-compat-12-8": [{"version": "570.195.03-0ubuntu1"}], "nvidia-container-toolkit": [{"version": "1.18.0"}]}
    result = judge("12.8", "550.127.05", ["NVIDIA A100-SXM4-40GB"], packages)
    assert (result["verdict"], result["compat_installed"], result["run"]) == ("compat", True, True)
    # Another CUDA minor's package does not count.
    other = judge("12.9", "550.127.05", ["NVIDIA A100-SXM4-40GB"], packages)
    assert (other["compat_package"], other["compat_installed"], other["run"]) == ("cuda-compat-12-9", False, False)


def test_an_image_may_set_run_itself():
    assert judge("12.8", "550.127.05", ["A100"], run=True)["run"] is True
    assert judge("12.8", "550.127.05", ["A100"], run=True)["run_forced"] is True
    assert judge("12.4", "550.127.05", ["A100"], run=False)["run"] is False


def test_forward_compatibility_is_for_data_center_gpus_only():
    result = judge("12.8", "550.127.05", ["NVIDIA RTX A4000"])
    assert result["verdict"] == "unsupported"
    assert result["needs_driver"] == "570.26"
    assert "data-center GPUs only" in result["reason"] and result["run"] is False
    # An architecture name cannot show the GPU is a data-center one.
    assert judge("12.8", "550.127.05", "ampere")["verdict"] == "unsupported"
    # One consumer GPU beside data-center ones is enough to rule it out.
    assert judge("12.8", "550.127.05", ["A100", "NVIDIA RTX A4000"])["verdict"] == "unsupported"


def test_within_one_branch_only_a_long_term_support_branch_runs_compat():
    # R550 is a Production Branch: 550.54.13 cannot run CUDA 12.4 (550.54.14) through compat.
    pb = judge("12.4", "550.54.13", ["H100"])
    assert (pb["verdict"], pb["needs_driver"]) == ("unsupported", "550.54.14")
    assert "Long Term Support Branch" in pb["reason"]
    # R580 is an LTSB: 580.65.05 runs CUDA 13.0 (580.65.06) with cuda-compat-13-0.
    assert judge("13.0", "580.65.05", ["H100"])["compat_package"] == "cuda-compat-13-0"


def test_cuda_13_is_unsupported_on_volta_whatever_the_driver():
    volta = [row for row in kb_gpus.ARCHITECTURES if row["name"] == "volta"][0]
    assert volta["last_cuda"] == "12"  # the KB fact the rule reads
    result = judge("13.0", "580.95.05", ["Tesla V100-SXM2-16GB"])
    assert result["verdict"] == "unsupported"
    assert result["needs_driver"] is None  # no driver fixes it
    assert "CUDA 13.0 does not target Volta GPUs" in result["reason"] and "12.x" in result["reason"]
    assert judge("12.9", "580.95.05", ["Tesla V100-SXM2-16GB"])["verdict"] == "native"
    assert judge("13.0", "580.95.05", ["Tesla P100-PCIE-16GB"])["verdict"] == "unsupported"
    assert judge("13.0", "580.95.05", ["Tesla T4"])["verdict"] == "native"


def test_no_driver_loaded():
    result = judge("12.4", "", ["H100"])
    assert (result["verdict"], result["needs_driver"], result["run"]) == ("unsupported", "550.54.14", False)
    assert result["reason"] == "no NVIDIA driver is loaded: CUDA 12.4 needs 550.54.14 or newer"


def test_a_cuda_the_matrix_cannot_judge_is_unknown():
    assert judge("14.0", "620.70.06", ["H100"])["verdict"] == "unknown"
    # 13.4 GA has no verified floor; a driver that runs the newer 13.5.1 runs it.
    assert judge("13.4", "620.70.06", ["H100"])["verdict"] == "native"
    assert judge("13.4", "580.95.05", ["H100"])["verdict"] == "unknown"
    # The user's own rows decide it.
    [row] = cuda_image_judgement([image("14.0")], "620.70.06", ["H100"], tables={"cuda_drivers": [{"cuda": "14.0", "driver": "620.10.01"}]})
    assert (row["verdict"], row["min_driver"]) == ("native", "620.10.01")


def test_gpus_from_nvml_facts():
    nvml = {"status": "ok", "driver_version": "550.127.05", "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "architecture": "hopper"}]}
    [row] = cuda_image_judgement([image("12.8")], nvml["driver_version"], nvml)
    assert row["verdict"] == "compat"


@pytest.mark.parametrize(
    "images, message",
    [
        ("nvcr.io/nvidia/cuda", "verify_cuda_images must be a list"),
        (
            [{"name": "nvcr.io/nvidia/cuda:12.4.1-base", "cuda": "12.4"}],
            r"verify_cuda_images\[0\]\.name 'nvcr.io/nvidia/cuda:12.4.1-base' is not pinned by digest",
        ),
        ([image("12.4"), {"name": "x" + DIGEST, "cuda": "twelve"}], r"verify_cuda_images\[1\]\.cuda 'twelve'"),
        ([dict(image("12.4"), tag="x")], r"verify_cuda_images\[0\]: unknown key\(s\) tag"),
        ([dict(image("12.4"), run="yes")], r"verify_cuda_images\[0\]\.run must be true or false"),
    ],
)
def test_bad_images_name_the_field_and_the_fix(images: t.Any, message: str):
    with pytest.raises(AnsibleFilterError, match="^cuda_image_judgement: " + message):
        cuda_image_judgement(images, "550.127.05", ["H100"])


def test_no_images_judges_nothing():
    assert cuda_image_judgement([], "550.127.05", ["H100"]) == []
