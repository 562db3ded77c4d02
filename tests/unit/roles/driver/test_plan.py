"""Plan-level tests of the driver role for Ubuntu 22.04/24.04, Rocky 9/10 and Debian.

Their images cannot be built on the test ground, so the role's own decision
files (os, validate, plan, select) run on localhost with each case's OS facts
and what the node reads would have returned, in one ansible-playbook run
(plan.yml). Expectations are NVIDIA's and the distributions' published
repository layouts, keys and package names.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.tests.unit.playbook_run import ansible_env, local_play

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[3]
TEMPLATES = ROOT / "roles" / "driver" / "templates"
CUDA = "https://developer.download.nvidia.com/compute/cuda/repos"
NVIDIA_APT_FPR = "EB693B3035CD5710E231E123A4B469963BF863CC"


def facts(distribution: str, version: str, release: str, family: str, arch: str = "x86_64") -> dict:
    return {
        "distribution": distribution,
        "distribution_version": version,
        "distribution_major_version": version.split(".")[0],
        "distribution_release": release,
        "os_family": family,
        "architecture": arch,
    }


UBUNTU_2204 = facts("Ubuntu", "22.04", "jammy", "Debian")
UBUNTU_2404 = facts("Ubuntu", "24.04", "noble", "Debian")
ROCKY_9 = facts("Rocky", "9.4", "Blue Onyx", "RedHat")
ROCKY_10 = facts("Rocky", "10.0", "Red Quartz", "RedHat")
DEBIAN_12_ARM = facts("Debian", "12.12", "bookworm", "Debian", "aarch64")
DEBIAN_12 = facts("Debian", "12.12", "bookworm", "Debian")


def info(kernels=("6.8.0-45-generic",), headers=False, secure_boot=False, nvswitches=(), modules_absent=(), files=None, loaded=()) -> dict:
    """driver_info's read; modules_absent: NVLSM's modules the first kernel lacks (the others have them)."""
    installed = [
        {"release": k, "running": i == 0, "headers": headers, "module": None, "module_version": None, "modules_absent": list(modules_absent) if i == 0 else []}
        for i, k in enumerate(kernels)
    ]
    return {
        "package_manager": "apt",
        "packages": [],
        "dkms": None,
        "container": None,
        "kernels": {"running": kernels[0], "running_installed": True, "installed": installed},
        "secure_boot": {
            "efi": secure_boot,
            "enabled": secure_boot,
            "setup_mode": False,
            "mok_certificates_sha256": [],
            "mok_certificate": "/var/lib/dkms/mok.pub",
            "mok_certificate_sha256": None,
            "mok_certificate_enrolled": None,
        },
        "nvswitches": list(nvswitches),
        "nouveau_loaded": False,
        "other_modules_loaded": list(loaded),
        "files": files or {},
    }


NVLSM_MODULES_FILE = "/etc/modules-load.d/gpufleet-nvlsm.conf"

NOT_LOADED = {"status": "driver_not_loaded", "gpus": [], "gpu_count": 0, "driver_version": None}

UBUNTU_580 = {
    "nvidia-dkms-580-open": ["580.95.05-0ubuntu1", "580.82.07-0ubuntu1"],
    "nvidia-dkms-580": ["580.95.05-0ubuntu1", "580.82.07-0ubuntu1"],
    "libnvidia-compute-580": ["580.95.05-0ubuntu1", "580.82.07-0ubuntu1"],
    "nvidia-utils-580": ["580.95.05-0ubuntu1", "580.82.07-0ubuntu1"],
    "nvidia-compute-utils-580": ["580.95.05-0ubuntu1", "580.82.07-0ubuntu1"],
    "nvidia-driver-pinning-580": ["580-1"],
}
UBUNTU_590 = {
    "nvidia-dkms-open": ["590.48.01-0ubuntu1", "590.44.01-0ubuntu1"],
    "libnvidia-compute": ["590.48.01-0ubuntu1", "590.44.01-0ubuntu1"],
    "nvidia-utils": ["590.48.01-0ubuntu1", "590.44.01-0ubuntu1"],
    "nvidia-compute-utils": ["590.48.01-0ubuntu1", "590.44.01-0ubuntu1"],
    "nvidia-driver-pinning-590.48.01": ["590.48.01-1"],
}
UBUNTU_SERVER_580 = {
    "nvidia-headless-no-dkms-580-server-open": ["580.95.05-0ubuntu0.24.04.2"],
    "nvidia-utils-580-server": ["580.95.05-0ubuntu0.24.04.2"],
}
EL9_580 = {
    "nvidia-driver-cuda": ["3:580.95.05-1.el9", "3:580.82.07-1.el9"],
    "kmod-nvidia-latest-dkms": ["3:580.95.05-1.el9", "3:580.82.07-1.el9"],
    "kmod-nvidia-open-dkms": ["3:580.95.05-1.el9", "3:580.82.07-1.el9"],
}
EL10_580 = {name: [v.replace("el9", "el10") for v in versions] for name, versions in EL9_580.items()}
DEBIAN_CUDA_580 = {
    "nvidia-driver-cuda": ["580.95.05-1"],
    "nvidia-kernel-open-dkms": ["580.95.05-1"],
    "nvidia-fabricmanager-580": ["580.95.05-1"],
    "nvidia-driver-pinning-580": ["580-1"],
}

# A site's own pin of the EL CUDA repositories' key (the role knows none).
EL_KEY = "0123456789ABCDEF0123456789ABCDEF01234567"

# name: (OS facts, role variables, driver_info, nvml_info, what the repository offers)
CASES = {
    "ubuntu2204_cuda": (UBUNTU_2204, {"driver_gpu_models": ["H100"]}, info(("5.15.0-130-generic",)), NOT_LOADED, UBUNTU_580),
    "ubuntu2404_cuda_590": (UBUNTU_2404, {"driver_version": "590.48.01", "driver_gpu_models": ["H200"]}, info(headers=True), NOT_LOADED, UBUNTU_590),
    "ubuntu2404_precompiled": (
        UBUNTU_2404,
        {"driver_source": "distribution", "driver_gpu_models": ["L40S"]},
        info(("6.8.0-51-generic", "6.8.0-45-generic"), secure_boot=True),
        NOT_LOADED,
        UBUNTU_SERVER_580,
    ),
    # The role knows no fingerprint for the EL CUDA repositories' key: a site pins its own, or allows an unpinned one.
    "rocky9_cuda": (
        ROCKY_9,
        {"driver_gpu_models": ["Tesla V100-SXM2-32GB"], "driver_allow_unpinned_key": True},
        info(("5.14.0-427.13.1.el9_4.x86_64",)),
        NOT_LOADED,
        EL9_580,
    ),
    "rocky10_cuda": (
        ROCKY_10,
        {"driver_gpu_models": ["B200"], "driver_cuda_repo_key_fingerprint": EL_KEY},
        info(("6.12.0-55.9.1.el10_0.x86_64",), headers=True),
        NOT_LOADED,
        EL10_580,
    ),
    "debian12_arm_fabricmanager": (
        DEBIAN_12_ARM,
        {"driver_gpu_models": ["GH200"]},
        info(("6.1.0-56-arm64",), headers=True, nvswitches=["0000:07:00.0"]),
        NOT_LOADED,
        DEBIAN_CUDA_580,
    ),
    # NVLink5 with NVSwitches: Fabric Manager, NVLSM and NVLSM's kernel modules (Ubuntu's cloud kernels lack them).
    "ubuntu2404_b200_nvlsm": (
        UBUNTU_2404,
        {"driver_gpu_models": ["B200"] * 8},
        info(("6.8.0-51-generic", "6.8.0-45-generic"), headers=True, nvswitches=["0000:07:00.0"], modules_absent=["ib_umad", "mlx5_ib"]),
        NOT_LOADED,
        dict(UBUNTU_580, **{"nvidia-fabricmanager-580": ["580.95.05-1"], "nvlsm": ["2025.06.7-1"]}),
    ),
    # The same node on the next run: the modules file is right, ib_umad is loaded, mlx5_ib is not (yet).
    "ubuntu2404_b200_nvlsm_again": (
        UBUNTU_2404,
        {"driver_gpu_models": ["B200"] * 8},
        info(
            headers=True,
            nvswitches=["0000:07:00.0"],
            loaded=["ib_umad"],
            files={NVLSM_MODULES_FILE: {"exists": True, "mode": "0644", "content": None}},
        ),
        NOT_LOADED,
        dict(UBUNTU_580, **{"nvidia-fabricmanager-580": ["580.95.05-1"], "nvlsm": ["2025.06.7-1"]}),
    ),
    # The same node with Fabric Manager turned off: the role's modules file goes.
    "ubuntu2404_b200_no_fabricmanager": (
        UBUNTU_2404,
        {"driver_gpu_models": ["B200"], "driver_fabricmanager": False},
        info(headers=True, nvswitches=["0000:07:00.0"], files={NVLSM_MODULES_FILE: {"exists": True, "mode": "0644", "content": "ib_umad\n"}}),
        NOT_LOADED,
        UBUNTU_580,
    ),
    # Bad declarations: each must fail in the decision files, naming the variable.
    "error_branch_format": (UBUNTU_2204, {"driver_branch": "58O"}, info(), NOT_LOADED, UBUNTU_580),
    "error_version_not_offered": (
        ROCKY_9,
        {"driver_version": "580.999.99", "driver_gpu_models": ["A100"], "driver_cuda_repo_key_fingerprint": EL_KEY},
        info(),
        NOT_LOADED,
        EL9_580,
    ),
    "error_el_key_unpinned": (ROCKY_9, {"driver_gpu_models": ["A100"]}, info(), NOT_LOADED, EL9_580),
    "error_proprietary_on_blackwell": (UBUNTU_2404, {"driver_kernel_module": "proprietary", "driver_gpu_models": ["B200"]}, info(), NOT_LOADED, UBUNTU_580),
    "error_open_on_volta": (ROCKY_9, {"driver_kernel_module": "open", "driver_gpu_models": ["V100", "V100"]}, info(), NOT_LOADED, EL9_580),
    "error_mixed_generations": (UBUNTU_2204, {"driver_gpu_models": ["V100", "B200"]}, info(), NOT_LOADED, UBUNTU_580),
    "error_no_gpus_known": (UBUNTU_2204, {}, info(), NOT_LOADED, UBUNTU_580),
    "error_unknown_model": (UBUNTU_2204, {"driver_gpu_models": ["X9000"]}, info(), NOT_LOADED, UBUNTU_580),
    "error_distribution_on_rocky": (ROCKY_9, {"driver_source": "distribution", "driver_gpu_models": ["A100"]}, info(), NOT_LOADED, EL9_580),
    "error_precompiled_on_debian": (DEBIAN_12, {"driver_module_build": "precompiled", "driver_gpu_models": ["A100"]}, info(), NOT_LOADED, {}),
    "error_secure_boot_unsigned": (UBUNTU_2204, {"driver_gpu_models": ["H100"]}, info(secure_boot=True), NOT_LOADED, UBUNTU_580),
    "error_nvlsm_modules_missing_on_debian": (
        DEBIAN_12,
        {"driver_gpu_models": ["B300"]},
        info(("6.1.0-56-amd64",), headers=True, nvswitches=["0000:07:00.0"], modules_absent=["ib_umad"]),
        NOT_LOADED,
        DEBIAN_CUDA_580,
    ),
    "error_fabricmanager_from_debian": (
        DEBIAN_12,
        {"driver_source": "distribution", "driver_gpu_models": ["A100"], "driver_fabricmanager": True},
        info(),
        NOT_LOADED,
        {},
    ),
}


@pytest.fixture(scope="module")
def plans(tmp_path_factory) -> dict[str, dict]:
    work = tmp_path_factory.mktemp("driver-plan")
    hosts = {}
    for name, (os_facts, role_vars, driver_info, nvml, offered) in CASES.items():
        hosts[name] = dict(
            role_vars,
            ansible_connection="local",
            ansible_python_interpreter=sys.executable,
            case_facts=os_facts,
            case_info=driver_info,
            case_nvml=nvml,
            case_offered=offered,
            templates=str(TEMPLATES),
            out_dir=str(work),
        )
    inventory = work / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    local_play(HERE / "plan.yml", hosts=str(inventory), env=ansible_env(ANSIBLE_FORKS="8"))
    return {name: json.loads((work / (name + ".json")).read_text()) for name in CASES}


def ok(plans: dict, name: str) -> dict:
    plan = plans[name]
    assert "error" not in plan, plan.get("error")
    return plan


def test_ubuntu_2204_from_nvidias_repository(plans):
    plan = ok(plans, "ubuntu2204_cuda")
    assert plan["repo"]["apt_lines"] == ["deb %s/ubuntu2204/x86_64/ /" % CUDA]
    assert plan["repo"]["key"] == "%s/ubuntu2204/x86_64/3bf863cc.pub" % CUDA
    assert plan["repo"]["fingerprint"] == NVIDIA_APT_FPR
    assert (plan["flavour"], plan["build"], plan["version"]) == ("open", "dkms", "580.95.05")
    assert plan["packages"] == {
        "nvidia-dkms-580-open": "580.95.05-0ubuntu1",
        "libnvidia-compute-580": "580.95.05-0ubuntu1",
        "nvidia-utils-580": "580.95.05-0ubuntu1",
        "nvidia-compute-utils-580": "580.95.05-0ubuntu1",
    }
    assert plan["pinning"] == ["nvidia-driver-pinning-580"]
    assert plan["kernel_packages"] == ["linux-headers-5.15.0-130-generic"]
    assert "deb [signed-by=/etc/apt/keyrings/gpufleet-nvidia-cuda.asc] %s/ubuntu2204/x86_64/ /" % CUDA in plan["files"]["apt_sources"]
    preferences = plan["files"]["apt_preferences"]
    assert "Pin: version 580.95.05-*\nPin-Priority: 1001" in preferences
    assert "Package: *nvidia* libcuda* cuda-drivers*" in preferences


def test_ubuntu_2404_from_590_on_the_names_carry_no_branch(plans):
    plan = ok(plans, "ubuntu2404_cuda_590")
    assert plan["repo"]["apt_lines"] == ["deb %s/ubuntu2404/x86_64/ /" % CUDA]
    assert plan["repo"]["key"].endswith("/ubuntu2404/x86_64/3bf863cc.pub")
    assert sorted(plan["packages"]) == ["libnvidia-compute", "nvidia-compute-utils", "nvidia-dkms-open", "nvidia-utils"]
    assert set(plan["packages"].values()) == {"590.48.01-0ubuntu1"}
    assert plan["pinning"] == ["nvidia-driver-pinning-590.48.01"]
    assert plan["kernel_packages"] == []


def test_ubuntu_2404_canonical_signed_precompiled_modules(plans):
    plan = ok(plans, "ubuntu2404_precompiled")
    assert (plan["flavour"], plan["build"]) == ("open", "precompiled")
    assert plan["repo"]["apt_lines"] == [
        "deb http://archive.ubuntu.com/ubuntu %s restricted multiverse" % suite for suite in ("noble", "noble-updates", "noble-security")
    ]
    assert plan["repo"]["keyring"] == "/usr/share/keyrings/ubuntu-archive-keyring.gpg"
    assert plan["packages"] == {
        "nvidia-headless-no-dkms-580-server-open": "580.95.05-0ubuntu0.24.04.2",
        "nvidia-utils-580-server": "580.95.05-0ubuntu0.24.04.2",
    }
    # One signed module package per installed kernel; Secure Boot needs no local key.
    assert plan["kernel_packages"] == ["linux-modules-nvidia-580-server-open-6.8.0-51-generic", "linux-modules-nvidia-580-server-open-6.8.0-45-generic"]
    assert plan["pinning"] == []


def test_rocky_9_module_stream_and_versionlock(plans):
    plan = ok(plans, "rocky9_cuda")
    assert plan["repo"]["base"] == "%s/rhel9/x86_64" % CUDA
    assert plan["repo"]["key"] == "%s/rhel9/x86_64/D42D0685.pub" % CUDA
    assert plan["flavour"] == "proprietary"
    assert plan["packages"] == {"nvidia-driver-cuda": "3:580.95.05-1.el9", "kmod-nvidia-latest-dkms": "3:580.95.05-1.el9"}
    assert "stream=580-dkms\n" in plan["files"]["module_stream"]
    assert plan["files"]["versionlock"].splitlines() == ["nvidia-driver-cuda-3:580.95.05-1.el9.*", "kmod-nvidia-latest-dkms-3:580.95.05-1.el9.*"]
    assert plan["kernel_packages"] == ["kernel-devel-5.14.0-427.13.1.el9_4.x86_64"]


def test_rocky_10_versionlock_without_streams(plans):
    plan = ok(plans, "rocky10_cuda")
    assert plan["repo"]["key"] == "%s/rhel10/x86_64/CDF6BA43.pub" % CUDA
    assert plan["flavour"] == "open"
    assert plan["files"]["module_stream"] is None
    assert "kmod-nvidia-open-dkms-3:580.95.05-1.el10.*" in plan["files"]["versionlock"]


def test_debian_12_arm_with_nvswitches_gets_fabric_manager_at_the_driver_version(plans):
    plan = ok(plans, "debian12_arm_fabricmanager")
    assert plan["repo"]["apt_lines"] == ["deb %s/debian12/sbsa/ /" % CUDA]
    assert plan["flavour"] == "open" and plan["fabricmanager"] is True
    assert plan["packages"]["nvidia-fabricmanager-580"] == plan["packages"]["nvidia-driver-cuda"] == "580.95.05-1"


def test_nvlink5_nvswitches_get_nvlsm_and_its_kernel_modules_on_ubuntu(plans):
    """Fabric Manager at the driver's version, NVLSM at its own, linux-modules-extra for the kernel that lacks the
    InfiniBand modules, and the modules loaded now and at every boot."""
    plan = ok(plans, "ubuntu2404_b200_nvlsm")
    assert plan["fabricmanager"] is True
    assert plan["packages"]["nvidia-fabricmanager-580"] == "580.95.05-1" and "nvlsm" in plan["packages"]
    assert plan["kernel_packages"] == ["linux-modules-extra-6.8.0-51-generic"]
    assert plan["nvlsm_modules_to_load"] == ["ib_umad", "mlx5_ib"]
    (entry,) = plan["fabric_files"]
    assert entry["path"] == NVLSM_MODULES_FILE and entry["mode"] == "0644"
    assert [line for line in entry["content"].splitlines() if not line.startswith("#")] == ["ib_umad", "mlx5_ib"]


def test_only_what_is_missing_is_done_again(plans):
    """A loaded module is not loaded again, and a kernel that has the modules gets no package."""
    plan = ok(plans, "ubuntu2404_b200_nvlsm_again")
    assert plan["nvlsm_modules_to_load"] == ["mlx5_ib"] and plan["kernel_packages"] == []


def test_the_modules_file_goes_when_fabric_manager_is_turned_off(plans):
    plan = ok(plans, "ubuntu2404_b200_no_fabricmanager")
    assert plan["fabricmanager"] is False and plan["nvlsm_modules_to_load"] == []
    assert plan["fabric_files"] == [{"path": NVLSM_MODULES_FILE, "state": "absent"}]


@pytest.mark.parametrize(
    "case,message",
    [
        ("error_branch_format", 'driver_branch "58O" is not a driver branch'),
        ("error_version_not_offered", "driver_version 580.999.99 is not offered by NVIDIA CUDA repository rhel9/x86_64"),
        ("error_el_key_unpinned", "driver_cuda_repo_key_fingerprint: empty, and the role knows no fingerprint for the key of NVIDIA CUDA repository rhel9"),
        ("error_proprietary_on_blackwell", "driver_kernel_module: proprietary cannot drive B200 (blackwell)"),
        ("error_open_on_volta", "driver_kernel_module: open cannot drive 2 x V100 (volta)"),
        ("error_mixed_generations", "need different kernel modules"),
        ("error_no_gpus_known", "declare driver_gpu_models"),
        ("error_unknown_model", "driver_gpu_models: 'X9000' is not a GPU model"),
        ("error_distribution_on_rocky", "driver_source: distribution has no NVIDIA driver for Rocky 9.4"),
        ("error_precompiled_on_debian", "driver_module_build: precompiled"),
        ("error_secure_boot_unsigned", "Secure Boot is enabled"),
        ("error_fabricmanager_from_debian", "does not package it; use driver_source: cuda"),
        ("error_nvlsm_modules_missing_on_debian", "kernel(s) 6.1.0-56-amd64 (ib_umad) do not have"),
    ],
)
def test_bad_declarations_fail_with_the_variable_and_the_fix(plans, case, message):
    assert message in plans[case].get("error", ""), plans[case]
