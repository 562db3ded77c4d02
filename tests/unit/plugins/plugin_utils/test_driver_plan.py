"""The driver role's plan (plugin_utils/_driver_plan.py through the driver filters): apt and dnf, open and
proprietary, a pinned version and a branch, removal, rollback, and bad declarations that name the variable and
the fix. The OS data below is what roles/driver/vars/ gives once templated for the case's branch and flavour."""

from __future__ import annotations

import copy

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.filter.driver import (
    FilterModule,
    driver_decision,
    driver_files,
    driver_kernels_missing,
    driver_package_actions,
    driver_plan,
    driver_reboot,
    driver_selection,
)

CUDA = "https://developer.download.nvidia.com/compute/cuda/repos"

DECLARATION = {
    "state": "present",
    "branch": "580",
    "version": "",
    "kernel_module": "auto",
    "gpu_models": ["H100"],
    "package_set": "compute",
    "fabricmanager": "auto",
    "source": "cuda",
    "module_build": "auto",
    "cuda_repo_url": CUDA + "/",
    "cuda_repo_key_url": "",
    "cuda_repo_key_fingerprint": "",
    "distribution_mirror_url": "",
    "distribution_key_url": "",
    "secure_boot_mok_key": "",
    "secure_boot_mok_cert": "",
    "secure_boot_enroll": False,
    "secure_boot_enroll_password": "",
    "bake": False,
}

CHECKS = {
    "branch_pattern": "^[0-9]{3}$",
    "version_pattern": r"^[0-9]{3}\.[0-9]{1,3}(\.[0-9]{1,3})?$",
    "nvml_gpus_known": ["ok"],
    "distribution_repo": True,
    "cuda_repo_key": "3bf863cc.pub",
}
UBUNTU_CHECKS = dict(CHECKS, backend="apt", sources=["cuda", "distribution", "precompiled"], distribution="Ubuntu", distribution_version="24.04")
DEBIAN_CHECKS = dict(CHECKS, backend="apt", sources=["cuda", "distribution"], distribution="Debian", distribution_version="12.12")
ROCKY_CHECKS = dict(
    CHECKS, backend="dnf", sources=["cuda"], distribution_repo=False, cuda_repo_key="D42D0685.pub", distribution="Rocky", distribution_version="9.4"
)

UBUNTU_FACTS = {"distribution": "Ubuntu", "architecture": "x86_64"}
ROCKY_FACTS = {"distribution": "Rocky", "architecture": "x86_64"}
DEBIAN_FACTS = {"distribution": "Debian", "architecture": "aarch64"}

APT_FILES = {
    "sources_file": "/etc/apt/sources.list.d/gpufleet-nvidia-driver.list",
    "pin_file": "/etc/apt/preferences.d/gpufleet-nvidia-driver",
    "unattended_upgrades_file": "/etc/apt/apt.conf.d/51gpufleet-nvidia-driver",
    "keyring_dir": "/etc/apt/keyrings",
    "repo_file": "",
    "module_stream_file": "",
    "nouveau_file": "/etc/modprobe.d/gpufleet-blacklist-nouveau.conf",
    "dkms_signing_file": "/etc/dkms/framework.conf.d/gpufleet-nvidia-driver.conf",
}
COMMON = {
    "nvlsm_architectures": ["blackwell"],
    "cuda_repo_arch": {"x86_64": "x86_64", "aarch64": "sbsa"},
    "dkms_mok_key": "/var/lib/dkms/mok.key",
    "dkms_mok_cert": "/var/lib/dkms/mok.pub",
}
# What apt-based OSes share (Ubuntu, Debian).
APT_OS = dict(COMMON, **APT_FILES, backend="apt", headers_prefix="linux-headers-", module_streams=False)


def cuda_repo(name: str, key: str, fingerprint: str) -> dict:
    """NVIDIA's CUDA repository for the OS: its directory name, key file and key fingerprint."""
    return {"cuda_repo_name": name, "cuda_repo_key": key, "cuda_repo_fingerprint": fingerprint}


def ubuntu_os(branch: str = "580", flavour: str = "open") -> dict:
    tag = "" if int(branch) >= 590 else "-" + branch
    return dict(
        APT_OS,
        **cuda_repo("ubuntu2404", "3bf863cc.pub", "EB693B3035CD5710E231E123A4B469963BF863CC"),
        precompiled_module_package="linux-modules-nvidia-{0}-server{1}-".format(branch, "-open" if flavour == "open" else ""),
        packages={
            "cuda": {
                "compute": {
                    "open": ["nvidia-dkms%s-open" % tag, "libnvidia-compute%s" % tag, "nvidia-utils%s" % tag],
                    "proprietary": ["nvidia-dkms%s" % tag, "libnvidia-compute%s" % tag, "nvidia-utils%s" % tag],
                }
            },
            "precompiled": {
                "compute": {"open": ["nvidia-headless-no-dkms-%s-server-open" % branch], "proprietary": ["nvidia-headless-no-dkms-%s-server" % branch]}
            },
        },
        module_package={
            "cuda": {"open": "nvidia-dkms%s-open" % tag, "proprietary": "nvidia-dkms%s" % tag},
            "precompiled": {"open": "nvidia-headless-no-dkms-%s-server-open" % branch, "proprietary": "nvidia-headless-no-dkms-%s-server" % branch},
        },
        fabricmanager_packages={"cuda": ["nvidia-fabricmanager%s" % tag], "distribution": ["nvidia-fabricmanager-%s" % branch]},
        nvlsm_packages={"cuda": ["nvlsm"], "distribution": []},
        independent_packages={},
        distribution_repo={
            "url": "http://archive.ubuntu.com/ubuntu",
            "components": ["restricted", "multiverse"],
            "suites": ["noble", "noble-updates"],
            "keyring": "/usr/share/keyrings/ubuntu-archive-keyring.gpg",
        },
    )


def debian_os() -> dict:
    return dict(
        APT_OS,
        **cuda_repo("debian12", "3bf863cc.pub", "EB69"),
        precompiled_module_package="",
        packages={
            "cuda": {"compute": {"open": ["nvidia-driver-cuda", "nvidia-kernel-open-dkms"], "proprietary": ["nvidia-driver-cuda", "nvidia-kernel-dkms"]}},
            "distribution": {
                "compute": {
                    "open": ["nvidia-open-kernel-dkms", "nvidia-smi", "nvidia-persistenced"],
                    "proprietary": ["nvidia-kernel-dkms", "nvidia-smi", "nvidia-persistenced"],
                }
            },
        },
        module_package={
            "cuda": {"open": "nvidia-kernel-open-dkms", "proprietary": "nvidia-kernel-dkms"},
            "distribution": {"open": "nvidia-open-kernel-dkms", "proprietary": "nvidia-kernel-dkms"},
        },
        fabricmanager_packages={"cuda": ["nvidia-fabricmanager-580"], "distribution": []},
        nvlsm_packages={"cuda": ["nvlsm"], "distribution": []},
        independent_packages={"distribution": ["nvidia-persistenced"]},
        distribution_repo={
            "url": "http://deb.debian.org/debian",
            "suites": ["bookworm"],
            "components": ["contrib", "non-free"],
            "keyring": "/usr/share/keyrings/debian-archive-keyring.gpg",
        },
    )


def rocky_os(streams: bool = True, keyring_dir: bool = False) -> dict:
    return dict(
        COMMON,
        backend="dnf",
        headers_prefix="kernel-devel-",
        module_streams=streams,
        **cuda_repo("rhel9", "D42D0685.pub", ""),
        precompiled_module_package="",
        keyring_dir="/etc/pki/rpm-gpg" if keyring_dir else "",
        sources_file="",
        pin_file="",
        unattended_upgrades_file="",
        repo_file="/etc/yum.repos.d/gpufleet-nvidia-driver.repo",
        module_stream_file="/etc/dnf/modules.d/nvidia-driver.module",
        nouveau_file=APT_FILES["nouveau_file"],
        dkms_signing_file=APT_FILES["dkms_signing_file"],
        packages={
            "cuda": {"compute": {"open": ["nvidia-driver-cuda", "kmod-nvidia-open-dkms"], "proprietary": ["nvidia-driver-cuda", "kmod-nvidia-latest-dkms"]}}
        },
        module_package={"cuda": {"open": "kmod-nvidia-open-dkms", "proprietary": "kmod-nvidia-latest-dkms"}},
        fabricmanager_packages={"cuda": ["nvidia-fabric-manager"]},
        nvlsm_packages={"cuda": ["nvlsm"]},
        distribution_repo={},
    )


def package(name: str, version: str, held: bool = False, configured: bool = True) -> dict:
    return {"name": name, "version": version, "held": held, "configured": configured}


def info(
    packages=(), kernels=(("6.8.0-45-generic", False),), running_installed=True, container=None, secure_boot=False, enrolled=None, nvswitches=(), files=None
) -> dict:
    return {
        "packages": list(packages),
        "container": container,
        "nvswitches": list(nvswitches),
        "files": files or {},
        "kernels": {
            "running": kernels[0][0] if kernels else "6.1.0-builder",
            "running_installed": running_installed,
            "installed": [{"release": k, "headers": h} for k, h in kernels],
        },
        "secure_boot": {"enabled": secure_boot, "mok_certificate": "/var/lib/dkms/mok.pub", "mok_certificate_enrolled": enrolled},
    }


NOT_LOADED = {"status": "driver_not_loaded", "gpus": [], "driver_version": None}


def plan_for(declaration=None, checks=None, os_data=None, facts=None, node=None, nvml=None) -> dict:
    """decide() then plan(), as validate.yml and plan.yml chain them."""
    declaration = dict(DECLARATION, **(declaration or {}))
    node = node or info()
    decision = driver_decision(declaration, checks or UBUNTU_CHECKS, node, nvml or NOT_LOADED)
    os_data = os_data or ubuntu_os(decision["branch"] or "580", decision["flavour"] or "open")
    return driver_plan(decision, declaration, os_data, facts or UBUNTU_FACTS, node)


UBUNTU_580 = {
    name: ["580.95.05-0ubuntu1", "580.82.07-0ubuntu1"] for name in ("nvidia-dkms-580-open", "nvidia-dkms-580", "libnvidia-compute-580", "nvidia-utils-580")
}
UBUNTU_580["nvidia-driver-pinning-580"] = ["580-1"]
EL9_580 = {name: ["3:580.95.05-1.el9", "3:580.82.07-1.el9"] for name in ("nvidia-driver-cuda", "kmod-nvidia-open-dkms", "kmod-nvidia-latest-dkms")}


# ---------------------------------------------------------------------------- apt, open, newest of the branch


def test_apt_open_newest_of_the_branch_from_nvidias_repository():
    plan = plan_for()
    assert plan["error"] is None
    assert (plan["branch"], plan["flavour"], plan["build"], plan["backend"]) == ("580", "open", "dkms", "apt")
    assert plan["top_packages"] == ["nvidia-dkms-580-open", "libnvidia-compute-580", "nvidia-utils-580"]
    assert plan["pinning_packages"] == ["nvidia-driver-pinning-580"]
    # The trailing slash of driver_cuda_repo_url does not double.
    assert plan["repo"]["apt_lines"] == ["deb %s/ubuntu2404/x86_64/ /" % CUDA]
    assert plan["repo"]["keyring"] == "/etc/apt/keyrings/gpufleet-nvidia-cuda.asc"
    assert plan["kernel_packages"] == ["linux-headers-6.8.0-45-generic"]
    assert plan["kernel_query"] == ["apt-cache", "policy", "linux-headers-6.8.0-45-generic"]
    assert plan["satisfied"] is False and plan["installed_any"] is None

    selection = driver_selection(plan, UBUNTU_580, "", NOT_LOADED)
    assert selection["error"] is None and selection["version"] == "580.95.05"
    assert selection["install"] == [
        "nvidia-dkms-580-open=580.95.05-0ubuntu1",
        "libnvidia-compute-580=580.95.05-0ubuntu1",
        "nvidia-utils-580=580.95.05-0ubuntu1",
        "nvidia-driver-pinning-580",
    ]
    assert selection["changing"] == ["nvidia-dkms-580-open", "libnvidia-compute-580", "nvidia-utils-580", "nvidia-driver-pinning-580"]
    assert selection["release"] == [] and selection["remove_other_flavour"] is False
    assert selection["module_current"] is False


def test_apt_proprietary_pinned_version_upgrade_releases_the_old_holds_and_drops_the_other_flavour():
    installed = [
        package("nvidia-dkms-580-open", "580.82.07-0ubuntu1", held=True),
        package("libnvidia-compute-580", "580.82.07-0ubuntu1", held=True),
        package("nvidia-utils-580", "580.82.07-0ubuntu1", held=True),
        package("nvidia-driver-pinning-580", "580-1"),
    ]
    plan = plan_for({"version": "580.95.05", "kernel_module": "proprietary", "gpu_models": ["V100"]}, node=info(installed))
    assert plan["flavour"] == "proprietary" and plan["version_package"] == "nvidia-dkms-580"
    # The installed driver is the other flavour's: its version is known, the node is not as declared.
    assert plan["installed_any"] == "580.82.07" and plan["installed_version"] is None and not plan["satisfied"]
    assert plan["pinning_packages"] == ["nvidia-driver-pinning-580.95.05"]

    offered = dict(UBUNTU_580, **{"nvidia-driver-pinning-580.95.05": ["580.95.05-1"]})
    selection = driver_selection(plan, offered, "580.95.05", NOT_LOADED)
    assert selection["packages"]["nvidia-dkms-580"] == "580.95.05-0ubuntu1"
    assert selection["pinning"] == ["nvidia-driver-pinning-580.95.05"]
    assert selection["release"] == ["nvidia-dkms-580-open", "libnvidia-compute-580", "nvidia-utils-580"]
    assert selection["remove_other_flavour"] is True


def test_apt_already_as_declared_asks_no_repository_and_changes_nothing():
    installed = [package(name, "580.95.05-0ubuntu1", held=True) for name in ("nvidia-dkms-580-open", "libnvidia-compute-580", "nvidia-utils-580")]
    installed.append(package("nvidia-driver-pinning-580", "580-1", held=True))
    plan = plan_for(node=info(installed, kernels=(("6.8.0-45-generic", True),)))
    assert plan["satisfied"] is True and plan["kernel_packages"] == [] and plan["kernel_query"] == []
    selection = driver_selection(plan, None, "", {"status": "ok", "driver_version": "580.95.05", "gpus": []})
    assert selection["version"] == "580.95.05" and selection["changing"] == [] and selection["release"] == []
    assert selection["pinning"] == ["nvidia-driver-pinning-580"]
    assert selection["module_current"] is True
    # Everything is held already.
    assert driver_package_actions(installed, plan, selection)["hold"] == []


def test_a_half_configured_package_is_installed_again():
    installed = [package(name, "580.95.05-0ubuntu1") for name in ("libnvidia-compute-580", "nvidia-utils-580")]
    installed.append(package("nvidia-dkms-580-open", "580.95.05-0ubuntu1", configured=False))
    plan = plan_for(node=info(installed))
    assert plan["satisfied"] is False
    selection = driver_selection(plan, UBUNTU_580, "", NOT_LOADED)
    assert selection["changing"] == ["nvidia-dkms-580-open", "nvidia-driver-pinning-580"]


def test_holds_cover_the_planned_packages_and_every_package_of_the_version():
    plan = plan_for()
    selection = driver_selection(plan, UBUNTU_580, "", NOT_LOADED)
    now = [
        package("nvidia-dkms-580-open", "580.95.05-0ubuntu1"),
        package("libnvidia-compute-580", "580.95.05-0ubuntu1", held=True),
        package("nvidia-utils-580", "580.95.05-0ubuntu1"),
        package("nvidia-driver-pinning-580", "580-1"),
        package("nvidia-firmware-580", "580.95.05-0ubuntu1"),
        package("nvidia-modprobe", "590.44.01-1"),
    ]
    assert driver_package_actions(now, plan, selection)["hold"] == [
        "nvidia-dkms-580-open",
        "nvidia-utils-580",
        "nvidia-driver-pinning-580",
        "nvidia-firmware-580",
    ]


def test_apt_rollback_removes_what_the_failure_added_and_restores_what_it_changed():
    before = [package("nvidia-dkms-580-open", "580.82.07-0ubuntu1", held=True), package("nvidia-utils-580", "580.82.07-0ubuntu1", held=True)]
    plan = plan_for({"version": "580.95.05"}, node=info(before))
    selection = driver_selection(plan, UBUNTU_580, "580.95.05", NOT_LOADED)
    after_failure = [
        package("nvidia-dkms-580-open", "580.95.05-0ubuntu1", configured=False),
        package("nvidia-utils-580", "580.82.07-0ubuntu1", configured=False),
        package("libnvidia-compute-580", "580.95.05-0ubuntu1"),
    ]
    actions = driver_package_actions(after_failure, plan, selection)
    assert actions["remove"] == ["libnvidia-compute-580"]
    assert actions["restore"] == ["nvidia-dkms-580-open=580.82.07-0ubuntu1", "nvidia-utils-580=580.82.07-0ubuntu1"]
    assert plan["held"] == ["nvidia-dkms-580-open", "nvidia-utils-580"]
    assert plan["installed_any"] == "580.82.07"


def test_apt_rollback_restores_what_the_failure_removed():
    """apt removes an old package that depends on an old version of what the new driver upgrades; the rollback
    brings it back at its version, or the node is left with part of the old driver."""
    before = [
        package("nvidia-dkms-580-open", "580.82.07-0ubuntu1", held=True),
        package("nvidia-utils-580", "580.82.07-0ubuntu1", held=True),
        package("nvidia-fabricmanager-580", "580.82.07-0ubuntu1", held=True),
    ]
    plan = plan_for({"version": "580.95.05"}, node=info(before))
    selection = driver_selection(plan, UBUNTU_580, "580.95.05", NOT_LOADED)
    after_failure = [package("nvidia-dkms-580-open", "580.95.05-0ubuntu1", configured=False), package("nvidia-utils-580", "580.95.05-0ubuntu1")]
    actions = driver_package_actions(after_failure, plan, selection)
    assert actions["remove"] == []
    assert actions["restore"] == [
        "nvidia-dkms-580-open=580.82.07-0ubuntu1",
        "nvidia-utils-580=580.82.07-0ubuntu1",
        "nvidia-fabricmanager-580=580.82.07-0ubuntu1",
    ]


def test_a_flavour_a_failed_switch_left_unconfigured_goes_before_the_install_and_never_comes_back():
    """A rescue that could not roll back a switch to the open modules keeps them, unconfigured: the next run removes
    them before it installs (apt would configure them again, and fail), and its own rollback does not restore them."""
    kept = [
        package("nvidia-dkms-580-open", "580.95.05-0ubuntu1", held=True, configured=False),
        package("libnvidia-compute-580", "580.95.05-0ubuntu1", held=True, configured=False),
        package("nvidia-utils-580", "580.95.05-0ubuntu1", held=True),
    ]
    plan = plan_for({"version": "580.95.05", "kernel_module": "proprietary", "gpu_models": ["V100"]}, node=info(kept))
    selection = driver_selection(plan, UBUNTU_580, "580.95.05", NOT_LOADED)
    assert selection["remove_other_flavour"] is True and selection["remove_other_flavour_first"] is True
    after_failure = [package("libnvidia-compute-580", "580.95.05-0ubuntu1"), package("nvidia-dkms-580", "580.95.05-0ubuntu1", configured=False)]
    actions = driver_package_actions(after_failure, plan, selection)
    assert actions["remove"] == ["nvidia-dkms-580"]
    # The open modules were removed first and stay removed; what apt removed besides comes back.
    assert actions["restore"] == ["nvidia-utils-580=580.95.05-0ubuntu1"]
    # Configured, it goes after the install, as on any switch.
    configured = [dict(p, configured=True) for p in kept]
    plan = plan_for({"version": "580.95.05", "kernel_module": "proprietary", "gpu_models": ["V100"]}, node=info(configured))
    selection = driver_selection(plan, UBUNTU_580, "580.95.05", NOT_LOADED)
    assert selection["remove_other_flavour"] is True and selection["remove_other_flavour_first"] is False


def test_apt_rescue_holds_as_before_after_a_rollback_and_the_new_driver_when_it_could_not_start():
    """The installation released the old holds; the rescue puts them back on what is installed, and when the old
    packages could not be fetched (nothing removed) it holds the new driver the node keeps as well."""
    before = [
        package("nvidia-dkms-580-open", "580.82.07-0ubuntu1", held=True),
        package("nvidia-utils-580", "580.82.07-0ubuntu1", held=True),
        package("nvidia-modprobe", "590.44.01-1", held=True),
        package("nvidia-settings", "580.82.07-0ubuntu1"),
    ]
    plan = plan_for({"version": "580.95.05"}, node=info(before))
    selection = driver_selection(plan, UBUNTU_580, "580.95.05", NOT_LOADED)
    assert selection["release"] == ["nvidia-dkms-580-open", "nvidia-utils-580"]
    rolled_back = [package(p["name"], p["version"], held=p["name"] == "nvidia-modprobe") for p in before]
    actions = driver_package_actions(rolled_back, plan, selection)
    # nvidia-modprobe kept its hold; nvidia-settings had none and gets none.
    assert actions["hold_back"] == ["nvidia-dkms-580-open", "nvidia-utils-580"]
    not_started = [
        package("nvidia-dkms-580-open", "580.95.05-0ubuntu1", configured=False),
        package("nvidia-utils-580", "580.95.05-0ubuntu1"),
        package("libnvidia-compute-580", "580.95.05-0ubuntu1"),
        package("nvidia-driver-pinning-580.95.05", "580.95.05-1"),
        package("nvidia-modprobe", "590.44.01-1"),
        package("nvidia-settings", "580.82.07-0ubuntu1"),
    ]
    actions = driver_package_actions(not_started, plan, selection)
    assert actions["hold_back"] == ["nvidia-dkms-580-open", "nvidia-utils-580", "nvidia-modprobe"]
    assert actions["hold_kept"] == ["nvidia-dkms-580-open", "nvidia-utils-580", "nvidia-modprobe", "libnvidia-compute-580", "nvidia-driver-pinning-580.95.05"]
    # What is held already is not held again.
    held = [dict(p, held=True) for p in not_started]
    assert driver_package_actions(held, plan, selection)["hold_kept"] == []


def test_ubuntu_from_590_the_names_carry_no_branch():
    plan = plan_for({"version": "590.48.01"}, os_data=ubuntu_os("590"))
    assert plan["branch"] == "590" and plan["version_package"] == "nvidia-dkms-open"
    assert plan["pinning_packages"] == ["nvidia-driver-pinning-590.48.01"]


def test_precompiled_modules_one_package_per_kernel_and_no_pinning():
    node = info(kernels=(("6.8.0-51-generic", False), ("6.8.0-45-generic", True)), secure_boot=True)
    plan = plan_for({"source": "distribution", "gpu_models": ["L40S"]}, node=node)
    assert plan["error"] is None and plan["build"] == "precompiled"
    assert plan["kernel_packages"] == ["linux-modules-nvidia-580-server-open-6.8.0-51-generic", "linux-modules-nvidia-580-server-open-6.8.0-45-generic"]
    assert plan["pinning_packages"] == []
    assert plan["repo"]["apt_lines"] == [
        "deb http://archive.ubuntu.com/ubuntu noble restricted multiverse",
        "deb http://archive.ubuntu.com/ubuntu noble-updates restricted multiverse",
    ]
    assert plan["repo"]["keyring"] == "/usr/share/keyrings/ubuntu-archive-keyring.gpg"
    # Canonical signs them: no local enrolment.
    assert plan["mok_enrolment_needed"] is False and plan["secure_boot"] is True


def test_debian_distribution_with_its_own_key_and_an_independent_persistence_daemon():
    installed = [package("nvidia-persistenced", "535.43.02-1")]
    plan = plan_for(
        {
            "source": "distribution",
            "branch": "535",
            "kernel_module": "proprietary",
            "distribution_mirror_url": "http://mirror.example/debian",
            "distribution_key_url": "http://mirror.example/key.asc",
            "distribution_key_fingerprint": "0123456789ABCDEF0123456789ABCDEF01234567",
        },
        checks=DEBIAN_CHECKS,
        os_data=debian_os(),
        facts=DEBIAN_FACTS,
        node=info(installed),
    )
    assert plan["repo"]["apt_lines"] == ["deb http://mirror.example/debian bookworm contrib non-free"]
    assert plan["repo"]["keyring"] == "/etc/apt/keyrings/gpufleet-nvidia-distribution.asc"
    assert plan["independent"] == ["nvidia-persistenced"]
    offered = {"nvidia-kernel-dkms": ["535.261.03-1"], "nvidia-smi": ["535.261.03-1"], "nvidia-persistenced": ["535.43.02-1", "535.43.01-1"]}
    selection = driver_selection(plan, offered, "", NOT_LOADED)
    assert selection["packages"] == {"nvidia-kernel-dkms": "535.261.03-1", "nvidia-smi": "535.261.03-1", "nvidia-persistenced": "535.43.02-1"}


def test_nvswitches_bring_fabric_manager_and_blackwell_nvlsm():
    plan = plan_for({"gpu_models": ["B200"]}, checks=DEBIAN_CHECKS, os_data=debian_os(), facts=DEBIAN_FACTS, node=info(nvswitches=["0000:07:00.0"]))
    assert plan["repo"]["apt_lines"] == ["deb %s/debian12/sbsa/ /" % CUDA]
    assert plan["fabricmanager"] is True
    assert plan["top_packages"] == ["nvidia-driver-cuda", "nvidia-kernel-open-dkms", "nvidia-fabricmanager-580", "nvlsm"]
    assert plan["independent"] == ["nvlsm"]
    assert plan["services"] == ["nvidia-persistenced", "nvidia-fabricmanager"]


# ---------------------------------------------------------------------------- dnf


# A site's own pin of the EL CUDA repositories' key: the role knows none.
EL_PIN = {"cuda_repo_key_fingerprint": "0123456789ABCDEF0123456789ABCDEF01234567"}


def test_a_downloaded_key_without_a_fingerprint_is_refused_naming_the_variable_unless_allowed():
    el = plan_for({"gpu_models": ["B200"]}, checks=ROCKY_CHECKS, os_data=rocky_os(streams=False), facts=ROCKY_FACTS)
    assert el["error"].startswith("driver_cuda_repo_key_fingerprint: empty, and the role knows no fingerprint"), el
    assert "driver_allow_unpinned_key" in el["error"]
    allowed = plan_for({"gpu_models": ["B200"], "allow_unpinned_key": True}, checks=ROCKY_CHECKS, os_data=rocky_os(streams=False), facts=ROCKY_FACTS)
    assert allowed["error"] is None and allowed["repo"]["fingerprint"] == ""
    mirror = {"source": "distribution", "branch": "535", "kernel_module": "proprietary", "distribution_key_url": "http://mirror.example/key.asc"}
    distribution = plan_for(mirror, checks=DEBIAN_CHECKS, os_data=debian_os(), facts=DEBIAN_FACTS)
    assert distribution["error"].startswith("driver_distribution_key_fingerprint: empty"), distribution
    # The distribution's archive keyring on the node needs no pin: the node trusts it already.
    assert plan_for({**mirror, "distribution_key_url": ""}, checks=DEBIAN_CHECKS, os_data=debian_os(), facts=DEBIAN_FACTS)["error"] is None


@pytest.mark.parametrize(
    ("variable", "declaration"),
    [
        ("driver_cuda_repo_url", {"cuda_repo_url": "https://fleet:hunter2-d7e1@mirror.example/cuda/repos"}),
        ("driver_cuda_repo_key_url", {"cuda_repo_key_url": "https://fleet:hunter2-d7e1@mirror.example/key.asc"}),
        (
            "driver_distribution_mirror_url",
            {
                "source": "distribution",
                "branch": "535",
                "kernel_module": "proprietary",
                "distribution_mirror_url": "http://fleet:hunter2-d7e1@mirror.example/debian",
            },
        ),
        (
            "driver_distribution_key_url",
            {
                "source": "distribution",
                "branch": "535",
                "kernel_module": "proprietary",
                "distribution_key_url": "https://fleet:hunter2-d7e1@mirror.example/k.asc",
            },
        ),
    ],
)
def test_a_repository_or_key_url_with_credentials_is_refused_naming_the_variable(variable, declaration):
    # Issue 37: the sources file is world-readable, and the probe's result and the logs show the URL.
    refused = plan_for({"gpu_models": ["H100"], **declaration}, checks=DEBIAN_CHECKS, os_data=debian_os(), facts=DEBIAN_FACTS)
    assert refused["error"].startswith(variable + " carries credentials"), refused
    assert "hunter2-d7e1" not in refused["error"]


def test_a_node_as_declared_is_probed_again_when_the_key_the_role_writes_is_missing():
    installed = [package("nvidia-driver-cuda", "3:580.82.07-1.el9"), package("kmod-nvidia-latest-dkms", "3:580.82.07-1.el9")]
    keyring = "/etc/pki/rpm-gpg/gpufleet-nvidia-cuda.asc"
    without_key = plan_for({"gpu_models": ["V100"], **EL_PIN}, checks=ROCKY_CHECKS, os_data=rocky_os(keyring_dir=True), facts=ROCKY_FACTS, node=info(installed))
    assert without_key["satisfied"] is True and without_key["probe"] is True and without_key["repo"]["keyring"] == keyring
    node = info(installed, files={keyring: {"exists": True, "mode": "0644", "content": "key"}})
    with_key = plan_for({"gpu_models": ["V100"], **EL_PIN}, checks=ROCKY_CHECKS, os_data=rocky_os(keyring_dir=True), facts=ROCKY_FACTS, node=node)
    assert with_key["satisfied"] is True and with_key["probe"] is False


def test_dnf_proprietary_module_stream_and_versionlock_rollback_set():
    installed = [package("nvidia-driver-cuda", "3:580.82.07-1.el9"), package("kmod-nvidia-latest-dkms", "3:580.82.07-1.el9")]
    # Installed 580.82.07 satisfies branch 580; the pinned version is an upgrade.
    assert plan_for({"gpu_models": ["V100"], **EL_PIN}, checks=ROCKY_CHECKS, os_data=rocky_os(), facts=ROCKY_FACTS, node=info(installed))["satisfied"] is True
    plan = plan_for(
        {"gpu_models": ["V100"], "version": "580.95.05", **EL_PIN},
        checks=ROCKY_CHECKS,
        os_data=rocky_os(),
        facts=ROCKY_FACTS,
        node=info(installed, kernels=(("5.14.0-427.13.1.el9_4.x86_64", False),)),
    )
    assert (plan["flavour"], plan["backend"], plan["module_stream"]) == ("proprietary", "dnf", "580-dkms")
    assert plan["repo"]["base"] == "%s/rhel9/x86_64" % CUDA
    assert plan["repo"]["key"] == "%s/rhel9/x86_64/D42D0685.pub" % CUDA
    assert plan["pinning_packages"] == []
    assert plan["kernel_query"][:3] == ["dnf", "-q", "repoquery"]
    assert [f["template"] for f in plan["files"]] == ["dnf-module-stream.j2", "blacklist-nouveau.conf.j2"]
    selection = driver_selection(plan, EL9_580, "580.95.05", NOT_LOADED)
    assert selection["install"] == ["nvidia-driver-cuda-3:580.95.05-1.el9", "kmod-nvidia-latest-dkms-3:580.95.05-1.el9"]
    assert selection["changing"] == ["nvidia-driver-cuda", "kmod-nvidia-latest-dkms"]
    assert selection["rollback_install"] == ["nvidia-driver-cuda-3:580.82.07-1.el9", "kmod-nvidia-latest-dkms-3:580.82.07-1.el9"]
    assert selection["rollback_packages"] == {"nvidia-driver-cuda": "3:580.82.07-1.el9", "kmod-nvidia-latest-dkms": "3:580.82.07-1.el9"}
    missing = driver_kernels_missing(plan, "kernel-devel-5.14.0-427.13.1.el9_4.x86_64\n")
    assert missing == []


def test_dnf_rescue_locks_the_driver_as_rpm_lists_it_now():
    """After a rollback the old versions are locked again; when dnf could not fetch them (it changes nothing then)
    the new driver the node keeps is locked, never nothing."""
    installed = [package("nvidia-driver-cuda", "3:580.82.07-1.el9"), package("kmod-nvidia-latest-dkms", "3:580.82.07-1.el9")]
    plan = plan_for(
        {"gpu_models": ["V100"], "version": "580.95.05", **EL_PIN}, checks=ROCKY_CHECKS, os_data=rocky_os(), facts=ROCKY_FACTS, node=info(installed)
    )
    selection = driver_selection(plan, EL9_580, "580.95.05", NOT_LOADED)
    assert driver_package_actions(installed + [package("kernel-devel", "5.14.0-427")], plan, selection)["lock"] == {
        "nvidia-driver-cuda": "3:580.82.07-1.el9",
        "kmod-nvidia-latest-dkms": "3:580.82.07-1.el9",
    }
    kept = [package("nvidia-driver-cuda", "3:580.95.05-1.el9"), package("kmod-nvidia-latest-dkms", "3:580.95.05-1.el9")]
    assert driver_package_actions(kept, plan, selection)["lock"] == {
        "nvidia-driver-cuda": "3:580.95.05-1.el9",
        "kmod-nvidia-latest-dkms": "3:580.95.05-1.el9",
    }
    # A fresh installation that failed and was removed: nothing to lock.
    assert driver_package_actions([], plan, selection)["lock"] == {}


def test_dnf_open_without_module_streams_writes_only_the_nouveau_blacklist():
    plan = plan_for({"gpu_models": ["B200"], **EL_PIN}, checks=ROCKY_CHECKS, os_data=rocky_os(streams=False), facts=ROCKY_FACTS)
    assert plan["flavour"] == "open" and plan["top_packages"] == ["nvidia-driver-cuda", "kmod-nvidia-open-dkms"]
    assert [f["template"] for f in plan["files"]] == ["blacklist-nouveau.conf.j2"]


# ---------------------------------------------------------------------------- absent


def test_absent_removes_every_package_of_the_installed_version_and_the_role_files():
    installed = [
        package("nvidia-dkms-580", "580.95.05-0ubuntu1", held=True),
        package("libnvidia-compute-580", "580.95.05-0ubuntu1", held=True),
        package("nvidia-firmware-580", "580.95.05-0ubuntu1"),
        package("nvidia-driver-pinning-580", "580-1", held=True),
        package("nvidia-container-toolkit", "1.17.8-1"),
    ]
    # No GPUs known: removal needs no flavour decision.
    plan = plan_for({"state": "absent", "gpu_models": []}, node=info(installed))
    assert plan["error"] is None and plan["flavour"] == "open"
    assert plan["driver_packages"] == ["nvidia-dkms-580", "libnvidia-compute-580", "nvidia-firmware-580", "nvidia-driver-pinning-580"]
    assert plan["release_for_removal"] == ["nvidia-dkms-580", "libnvidia-compute-580", "nvidia-driver-pinning-580"]
    removed = [f["path"] for f in plan["owned_files"]]
    assert removed[:3] == [APT_FILES["sources_file"], APT_FILES["pin_file"], APT_FILES["unattended_upgrades_file"]]
    assert "/etc/apt/keyrings/gpufleet-nvidia-cuda.asc" in removed
    assert {f["state"] for f in plan["owned_files"]} == {"absent"}


def test_absent_ignores_a_running_kernel_that_is_gone():
    plan = plan_for({"state": "absent", "gpu_models": []}, node=info(running_installed=False))
    assert plan["error"] is None


# ---------------------------------------------------------------------------- files and reboot


def test_files_only_the_stale_ones_are_written_by_their_step():
    plan = plan_for()
    rendered = ["deb sources\n", "pin\n", "unattended\n", "blacklist nouveau\n"]
    found = {
        APT_FILES["sources_file"]: {"exists": True, "content": "deb sources\n", "mode": "0644"},
        APT_FILES["pin_file"]: {"exists": True, "content": "pin\n", "mode": "0600"},
        APT_FILES["nouveau_file"]: {"exists": True, "content": "old\n", "mode": "0644"},
    }
    files = driver_files(plan, rendered, found)
    assert files["stale"] == [APT_FILES["pin_file"], APT_FILES["unattended_upgrades_file"], APT_FILES["nouveau_file"]]
    assert files["write"]["repository"] == [
        {"path": APT_FILES["pin_file"], "content": "pin\n", "mode": "0644"},
        {"path": APT_FILES["unattended_upgrades_file"], "content": "unattended\n", "mode": "0644"},
    ]
    assert [f["path"] for f in files["write"]["configure"]] == [APT_FILES["nouveau_file"]]
    with pytest.raises(AnsibleFilterError, match="3 contents for 4 files"):
        driver_files(plan, rendered[:3], found)


@pytest.mark.parametrize(
    "nvml,changing,reboot,mok,reason",
    [
        (NOT_LOADED, [], "auto", False, "the nvidia module is not loaded (driver_not_loaded)"),
        ({"status": "version_mismatch"}, [], "auto", False, "the loaded nvidia module does not match the installed libraries (version mismatch)"),
        ({"status": "ok", "driver_version": "580.82.07"}, [], "auto", False, "the loaded nvidia module is 580.82.07, the installed driver is 580.95.05"),
        ({"status": "ok", "driver_version": "580.95.05"}, [], "auto", True, "a Machine Owner Key enrolment is queued (confirm it at the console)"),
        ({"status": "ok", "driver_version": "580.95.05"}, ["nvidia-utils-580"], "always", False, "driver_reboot: always and this run changed the driver"),
        ({"status": "ok", "driver_version": "580.95.05"}, ["nvidia-utils-580"], "auto", False, ""),
    ],
)
def test_reboot_reasons(nvml, changing, reboot, mok, reason):
    selection = {"version": "580.95.05", "changing": changing}
    assert driver_reboot(nvml, selection, info(), reboot, False, mok)["reason"] == reason


def test_reboot_is_not_ours_in_a_bake_or_a_container_and_the_marks_append():
    selection = {"version": "580.95.05", "changing": []}
    assert driver_reboot(NOT_LOADED, selection, info(), "auto", True)["forbidden"] == "an image bake (driver_bake)"
    assert driver_reboot(NOT_LOADED, selection, info(container="podman"), "auto")["forbidden"] == "a container (podman)"
    assert driver_reboot(NOT_LOADED, selection, info(), "never")["forbidden"] == "driver_reboot: never"
    found = {
        "/run/reboot-required": {"exists": True, "content": "*** System restart required ***\n"},
        "/run/reboot-required.pkgs": {"exists": True, "content": "linux-image-6.8.0-51-generic"},
    }
    marks = driver_reboot(NOT_LOADED, selection, info(files=found), "auto")["marks"]
    assert marks == [{"path": "/run/reboot-required.pkgs", "content": "linux-image-6.8.0-51-generic\nnvidia-driver\n", "mode": "0644"}]
    listed = copy.deepcopy(found)
    listed["/run/reboot-required.pkgs"]["content"] = "nvidia-driver\n"
    assert driver_reboot(NOT_LOADED, selection, info(files=listed), "auto")["marks"] == []
    assert [m["path"] for m in driver_reboot(NOT_LOADED, selection, info(), "auto")["marks"]] == ["/run/reboot-required", "/run/reboot-required.pkgs"]


def test_kernels_missing_from_apt_cache_policy():
    plan = plan_for(node=info(kernels=(("6.8.0-45-generic", False), ("6.8.0-51-generic", False))))
    policy = (
        "linux-headers-6.8.0-45-generic:\n  Installed: (none)\n  Candidate: 6.8.0-45.45\n"
        "linux-headers-6.8.0-51-generic:\n  Installed: (none)\n  Candidate: (none)\n"
    )
    assert driver_kernels_missing(plan, policy) == ["linux-headers-6.8.0-51-generic"]
    with pytest.raises(AnsibleFilterError, match="driver_kernels_missing: expects the stdout"):
        driver_kernels_missing(plan, None)


# ---------------------------------------------------------------------------- bad declarations


@pytest.mark.parametrize(
    "declaration,checks,node,message",
    [
        (
            {},
            dict(UBUNTU_CHECKS, backend=None, distribution="Arch", distribution_version="rolling"),
            None,
            "driver: Arch rolling is not supported; the role installs the driver on Debian 12/13",
        ),
        ({"branch": "58O"}, None, None, 'driver_branch "58O" is not a driver branch: give its three digits as a string, for example "580"'),
        ({"version": "580.95"}, None, None, None),
        ({"version": "v580"}, None, None, 'driver_version "v580" is not an NVIDIA driver version'),
        # A trailing newline passed re.match's `$`, and the version reached a shell command.
        ({"version": "580.95.05\n"}, None, None, 'driver_version "580.95.05\\n" is not an NVIDIA driver version'),
        ({"branch": "580\n"}, None, None, 'driver_branch "580\\n" is not a driver branch'),
        ({"source": "distribution"}, ROCKY_CHECKS, None, "driver_source: distribution has no NVIDIA driver for Rocky 9.4; use driver_source: cuda"),
        ({"module_build": "precompiled"}, DEBIAN_CHECKS, None, "driver_module_build: precompiled modules are Canonical's signed linux-modules-nvidia packages"),
        ({"secure_boot_enroll": True}, None, None, "set driver_secure_boot_enroll_password (from a vault)"),
        ({"kernel_module": "proprietary", "gpu_models": ["B200"]}, None, None, "driver_kernel_module: proprietary cannot drive B200 (blackwell)"),
        ({"gpu_models": []}, None, None, "declare driver_gpu_models"),
        (
            {},
            None,
            info(secure_boot=True, enrolled=False),
            "Secure Boot is enabled and DKMS would sign the nvidia modules with /var/lib/dkms/mok.pub, which is not enrolled",
        ),
    ],
)
def test_bad_declarations_name_the_variable_and_the_fix(declaration, checks, node, message):
    decision = driver_decision(dict(DECLARATION, **declaration), checks or UBUNTU_CHECKS, node or info(), NOT_LOADED)
    if message is None:
        assert decision["error"] is None
    else:
        assert message in decision["error"]
        # The plan passes the decision's error on without planning.
        assert driver_plan(decision, DECLARATION, {}, UBUNTU_FACTS, info()) == {"error": decision["error"]}


def test_fabric_manager_the_source_does_not_package():
    plan = plan_for(
        {"source": "distribution", "kernel_module": "proprietary", "branch": "535", "fabricmanager": True},
        checks=DEBIAN_CHECKS,
        os_data=debian_os(),
        facts=DEBIAN_FACTS,
    )
    assert plan["error"] == (
        "Fabric Manager is needed, but Debian contrib/non-free does not package it; use "
        "driver_source: cuda (NVIDIA's repository has Fabric Manager at every driver version)."
    )
    plan = plan_for(
        {"source": "distribution", "kernel_module": "proprietary", "branch": "535"},
        checks=DEBIAN_CHECKS,
        os_data=debian_os(),
        facts=DEBIAN_FACTS,
        node=info(nvswitches=["0:7:0.0"]),
    )
    assert plan["error"].startswith("NVSwitches were found, so Fabric Manager is needed")
    assert plan["error"].endswith("or set driver_fabricmanager: false if these GPUs do not use the NVSwitches.")


def test_a_running_kernel_that_is_gone_stops_the_plan_unless_it_is_a_container_hosts():
    node = info(kernels=(("6.8.0-51-generic", False),), running_installed=False)
    plan = plan_for(node=node)
    assert plan["error"] == (
        "the running kernel 6.8.0-51-generic is not installed any more (no "
        "/boot/vmlinuz-6.8.0-51-generic), so no module can be built for it; reboot into an "
        "installed kernel (6.8.0-51-generic) first."
    )
    in_container = plan_for(node=info(kernels=(), running_installed=False, container="docker"))
    assert in_container["error"] is None and in_container["running_kernel_foreign"] is True
    assert in_container["kernel_packages"] == []


def test_the_repository_not_offering_the_version_names_driver_version():
    plan = plan_for({"version": "580.999.99"})
    selection = driver_selection(plan, UBUNTU_580, "580.999.99", NOT_LOADED)
    assert selection["error"].startswith("driver_version 580.999.99 is not offered by NVIDIA CUDA repository ubuntu2404/x86_64")


def test_malformed_arguments_name_the_filter_and_the_argument():
    with pytest.raises(AnsibleFilterError, match="driver_decision: os_data must be a mapping, not list"):
        driver_decision(DECLARATION, [], info(), NOT_LOADED)
    with pytest.raises(AnsibleFilterError, match="driver_plan: the OS data or the declaration lacks 'packages'"):
        decision = driver_decision(DECLARATION, UBUNTU_CHECKS, info(), NOT_LOADED)
        driver_plan(decision, DECLARATION, {"backend": "apt"}, UBUNTU_FACTS, info())


def test_the_filters_are_registered():
    names = set(FilterModule().filters())
    assert {"driver_decision", "driver_plan", "driver_selection", "driver_files", "driver_package_actions", "driver_kernels_missing", "driver_reboot"} <= names
