"""The driver role's decision filters, over the knowledge base's GPU and flavour tables."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.filter.driver import (
    FilterModule,
    driver_kernel_module,
)
from ansible_collections.gpufleet.nvidia.plugins.filter.matrix import gpu_architecture
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._driver_plan import select_versions as _select_versions
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._driver_plan import upstream_version as _upstream_version


def decide(gpus, requested="auto", branch="580", source="driver_gpu_models"):
    return driver_kernel_module(gpus, requested, branch, source)


@pytest.mark.parametrize(
    "version,upstream",
    [
        ("535.261.03-1", "535.261.03"),
        ("535.216.03-2~bpo12+1", "535.216.03"),
        ("3:580.95.05-1.el9", "580.95.05"),
        ("580.95.05-0ubuntu0.24.04.2", "580.95.05"),
        ("575.64", "575.64"),
        ("20220217+3~deb12u1", "20220217"),
        (None, None),
        ("garbage", None),
    ],
)
def test_upstream_version(version, upstream):
    assert _upstream_version(version) == upstream


@pytest.mark.parametrize(
    "models,flavour",
    [
        (["H100"], "open"),
        (["NVIDIA A100-SXM4-40GB"] * 8, "open"),
        (["Tesla V100-SXM2-16GB"], "proprietary"),
        (["Tesla T4"], "open"),
        (["NVIDIA GH200 480GB"], "open"),
        (["B200", "NVIDIA B200"], "open"),
        (["Tesla P100-PCIE-16GB"], "proprietary"),
        (["NVIDIA L40S", "NVIDIA H20"], "open"),
    ],
)
def test_auto_chooses_from_the_declared_models(models, flavour):
    result = decide(models)
    assert (result["error"], result["flavour"]) == (None, flavour)


def test_a_mixed_fleet_that_shares_a_flavour_gets_it():
    # NVIDIA: fleets that mix old and new GPUs stay on the proprietary modules.
    assert decide(["V100", "H100"])["flavour"] == "proprietary"


def test_auto_prefers_proprietary_before_the_open_modules_existed():
    assert decide(["A100"], branch="470")["flavour"] == "proprietary"


def test_nvml_gpus_fall_back_on_nvmls_architecture():
    gpus = [{"name": "NVIDIA Future GPU 9000", "architecture": "hopper"}]
    assert decide(gpus, source="nvml")["flavour"] == "open"
    unknown = decide([{"name": "Mystery", "architecture": "unknown"}], source="nvml")
    assert unknown["flavour"] is None and "cannot tell" in unknown["error"]


@pytest.mark.parametrize(
    "model,architecture",
    [
        # Models only the driver role's own table knew before the knowledge base merged the two.
        ("NVIDIA GeForce RTX 5090", "blackwell"),
        ("NVIDIA R100", "rubin"),
        ("NVIDIA GeForce GTX 1080 Ti", "pascal"),
        ("NVIDIA TITAN RTX", "turing"),
        ("NVIDIA GeForce GTX 1660 SUPER", "turing"),
        ("Quadro GV100", "volta"),
        ("NVIDIA GeForce GTX 750 Ti", "maxwell"),
        ("GeForce GTX 780", "kepler"),
        ("NVIDIA GeForce RTX 3090", "ampere"),
        # The first-match order keeps these apart from the GeForce patterns.
        ("NVIDIA RTX 5000 Ada Generation", "ada"),
        ("Quadro RTX 5000", "turing"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "blackwell"),
        ("NVIDIA GB200", "blackwell"),
    ],
)
def test_one_model_table_for_role_and_matrix(model, architecture):
    assert decide([model])["gpus"][0]["architecture"] == architecture
    assert gpu_architecture(model) == architecture


def test_grace_hopper_through_nvml_is_grace_hopper():
    gpus = [{"name": "NVIDIA GH200 480GB", "architecture": "hopper"}]
    assert decide(gpus, "proprietary", source="nvml")["error"].startswith("driver_kernel_module: proprietary cannot drive NVIDIA GH200 480GB (grace_hopper)")
    assert decide(gpus, source="nvml")["flavour"] == "open"


def test_grace_hopper_is_not_a_plain_hopper():
    assert decide(["GH200"], "proprietary")["error"].startswith("driver_kernel_module: proprietary cannot drive GH200 (grace_hopper)")
    assert decide(["H100"], "proprietary")["flavour"] == "proprietary"


@pytest.mark.parametrize(
    "models,requested,message",
    [
        (["B200"], "proprietary", "proprietary cannot drive B200 (blackwell), which run only the open kernel modules"),
        (["V100"] * 3, "open", "open cannot drive 3 x V100 (volta)"),
        (["V100", "B200"], "auto", "need different kernel modules (open: B200 (blackwell); proprietary: V100 (volta))"),
        ([], "auto", "declare driver_gpu_models"),
        (["A100"], "open", None),
        (["Z9"], "auto", "driver_gpu_models: 'Z9' is not a GPU model"),
    ],
)
def test_flavour_errors_name_the_variable(models, requested, message):
    error = decide(models, requested)["error"]
    assert (error is None) if message is None else (message in error), error


def test_open_needs_515():
    assert "open needs driver branch 515" in decide(["A100"], "open", branch="470")["error"]


def test_bad_arguments_raise():
    with pytest.raises(AnsibleFilterError):
        decide(["A100"], "sometimes")
    with pytest.raises(AnsibleFilterError):
        decide(["A100"], branch="abc")


OFFERED = {
    "nvidia-kernel-dkms": ["535.261.03-1", "535.216.03-2~bpo12+1"],
    "nvidia-smi": ["535.261.03-1", "535.216.03-2~bpo12+1"],
    "nvidia-persistenced": ["535.171.04-1~deb12u1", "535.161.07-1"],
}


def select(version="", branch="535", installed=None, packages=("nvidia-kernel-dkms", "nvidia-smi", "nvidia-persistenced")):
    return _select_versions(OFFERED, list(packages), "nvidia-kernel-dkms", branch, version, ["nvidia-persistenced"], installed or {}, "the mirror")


def test_newest_of_the_branch():
    result = select()
    assert result == {
        "version": "535.261.03",
        "error": None,
        "packages": {"nvidia-kernel-dkms": "535.261.03-1", "nvidia-smi": "535.261.03-1", "nvidia-persistenced": "535.171.04-1~deb12u1"},
    }


def test_exact_version_from_backports():
    assert select("535.216.03")["packages"]["nvidia-smi"] == "535.216.03-2~bpo12+1"


def test_independent_packages_keep_their_installed_version():
    kept = select(installed={"nvidia-persistenced": "535.161.07-1"})
    assert kept["packages"]["nvidia-persistenced"] == "535.161.07-1"


def test_version_not_offered():
    error = select("535.999.99")["error"]
    assert error.startswith("driver_version 535.999.99 is not offered by the mirror: nvidia-kernel-dkms has 535.261.03, 535.216.03")


def test_branch_not_offered():
    assert "driver_branch 580 is not offered by the mirror" in select(branch="580")["error"]
    assert "branch(es) 535" in select(branch="580")["error"]


def test_incomplete_repository():
    result = _select_versions({"a": ["1.2.3-1"], "b": ["1.2.2-1"]}, ["a", "b"], "a", "1", "")
    assert "b 1.2.3 is not offered" in result["error"]


def test_filters_are_registered():
    assert set(FilterModule().filters()) == {
        "driver_kernel_module",
        "driver_decision",
        "driver_plan",
        "driver_selection",
        "driver_files",
        "driver_package_actions",
        "driver_kernels_missing",
        "driver_reboot",
    }
