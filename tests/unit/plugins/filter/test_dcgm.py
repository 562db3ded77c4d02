# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""dcgm_plan and the dcgmi readers: package naming on Debian/Ubuntu and RHEL, the CUDA flavour rule, the
exporter's command line, and each problem's fix."""

from __future__ import annotations

import json
import typing as t
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.filter.dcgm import FilterModule, dcgm_diag_failures, dcgm_health_watches, dcgm_plan

ROLE = Path(__file__).parents[4] / "roles" / "dcgm"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
# The site's own build of dcgm-exporter, pinned as the site pins it.
PINNED = "ab" * 32


def settings(**over: t.Any) -> dict[str, t.Any]:
    """The role's defaults as preflight.yml hands them over, for a Debian 12 node with a CUDA 12.4 driver."""
    base = {
        "version": DEFAULTS["dcgm_version"],
        "cuda_major": DEFAULTS["dcgm_cuda_major"],
        "driver_version": "",
        "nvml": {"driver_version": "550.127.05", "cuda_driver_version": "12.4", "driver_loaded": True},
        "os_family": "Debian",
        "distribution": "Debian",
        "distribution_major_version": "12",
        "architecture": "x86_64",
        "proprietary": DEFAULTS["dcgm_proprietary"],
        "repo_url": DEFAULTS["dcgm_repo_url"],
        "repo_distro": DEFAULTS["dcgm_repo_distro"],
        "gpg_key_url": DEFAULTS["dcgm_gpg_key_url"],
        "exporter": DEFAULTS["dcgm_exporter"],
        "exporter_version": DEFAULTS["dcgm_exporter_version"],
        "exporter_download_url": "https://mirror.invalid/files/dcgm-exporter",
        "exporter_sha256": PINNED,
        "exporter_allow_insecure_transport": DEFAULTS["dcgm_exporter_allow_insecure_transport"],
        "exporter_install_dir": DEFAULTS["dcgm_exporter_install_dir"],
        "exporter_address": DEFAULTS["dcgm_exporter_address"],
        "exporter_counters_file": DEFAULTS["dcgm_exporter_counters_file"],
        "exporter_attribution": DEFAULTS["dcgm_exporter_attribution"],
        "exporter_pod_resources_socket": DEFAULTS["dcgm_exporter_pod_resources_socket"],
        "exporter_hpc_job_mapping_dir": DEFAULTS["dcgm_exporter_hpc_job_mapping_dir"],
        "exporter_hostengine": DEFAULTS["dcgm_exporter_hostengine"],
        "exporter_extra_args": DEFAULTS["dcgm_exporter_extra_args"],
        "health_watches": DEFAULTS["dcgm_health_watches"],
        "diag_level": DEFAULTS["dcgm_diag_level"],
    }
    base.update(over)
    return base


def test_the_filter_is_registered():
    assert set(FilterModule().filters()) == {"dcgm_plan", "dcgm_health_watches", "dcgm_diag_failures"}


@pytest.mark.parametrize(
    "distribution,major,family,repo,install",
    [
        ("Debian", "12", "Debian", "debian12", ["datacenter-gpu-manager-4-core=1:4.5.3-1", "datacenter-gpu-manager-4-cuda12=1:4.5.3-1"]),
        ("Ubuntu", "22", "Debian", "ubuntu2204", ["datacenter-gpu-manager-4-core=1:4.5.3-1", "datacenter-gpu-manager-4-cuda12=1:4.5.3-1"]),
        ("Ubuntu", "24", "Debian", "ubuntu2404", ["datacenter-gpu-manager-4-core=1:4.5.3-1", "datacenter-gpu-manager-4-cuda12=1:4.5.3-1"]),
        ("RedHat", "9", "RedHat", "rhel9", ["datacenter-gpu-manager-4-core-4.5.3-1", "datacenter-gpu-manager-4-cuda12-4.5.3-1"]),
        ("Rocky", "8", "RedHat", "rhel8", ["datacenter-gpu-manager-4-core-4.5.3-1", "datacenter-gpu-manager-4-cuda12-4.5.3-1"]),
        ("RedHat", "10", "RedHat", "rhel10", ["datacenter-gpu-manager-4-core-4.5.3-1", "datacenter-gpu-manager-4-cuda12-4.5.3-1"]),
    ],
)
def test_package_naming_and_pins_by_distribution(distribution, major, family, repo, install):
    plan = dcgm_plan(settings(distribution=distribution, distribution_major_version=major, os_family=family))
    assert plan["problem"] == ""
    assert plan["install"] == install
    assert plan["manager"] == ("dnf" if family == "RedHat" else "apt")
    assert plan["repo"] == {"distro": repo, "arch": "x86_64", "url": DEFAULTS["dcgm_repo_url"] + "/" + repo + "/x86_64"}
    assert plan["service"] == "nvidia-dcgm"


def test_proprietary_adds_its_pair_of_the_same_flavour():
    plan = dcgm_plan(settings(proprietary=True, nvml={"driver_version": "580.159.04", "cuda_driver_version": "13.0"}))
    assert plan["packages"] == [
        "datacenter-gpu-manager-4-core",
        "datacenter-gpu-manager-4-cuda13",
        "datacenter-gpu-manager-4-proprietary",
        "datacenter-gpu-manager-4-proprietary-cuda13",
    ]


def test_aarch64_uses_nvidias_sbsa_directory():
    plan = dcgm_plan(settings(architecture="aarch64", distribution="Ubuntu", distribution_major_version="24"))
    assert plan["repo"]["url"].endswith("/ubuntu2404/sbsa")
    assert plan["exporter"]["tarball_url"].endswith("-linux-arm64.tar.gz")


def test_the_flavour_follows_the_running_drivers_cuda_major():
    plan = dcgm_plan(settings(nvml={"driver_version": "580.159.04", "cuda_driver_version": "13.0"}))
    assert plan["cuda_major"] == 13
    assert "CUDA 13.0 of the running driver 580.159.04" in plan["cuda_source"]


def test_without_a_driver_the_declared_driver_decides_through_the_matrix():
    plan = dcgm_plan(settings(nvml={}, driver_version="550.127.05"))
    assert plan["cuda_major"] == 12
    assert "550.127.05" in plan["cuda_source"]
    assert dcgm_plan(settings(nvml={}, driver_version="580.159.04"))["cuda_major"] == 13


def test_a_declared_flavour_must_match_the_running_driver():
    problem = dcgm_plan(settings(cuda_major="13"))["problem"]
    assert "dcgm_cuda_major=13, but the running driver 550.127.05 reports CUDA 12.4" in problem
    assert "set dcgm_cuda_major=12" in problem
    assert dcgm_plan(settings(cuda_major="12"))["problem"] == ""
    assert dcgm_plan(settings(nvml={}, cuda_major="11"))["cuda_major"] == 11


@pytest.mark.parametrize(
    "over,expected",
    [
        ({"nvml": {}, "driver_version": ""}, "set dcgm_driver_version"),
        ({"version": "3.3.6"}, "is not DCGM 4"),
        ({"version": "4.5"}, "dcgm_version must look like 4.5.3"),
        ({"version": "4.2.0", "nvml": {"cuda_driver_version": "13.0"}}, "DCGM 4.2.0 has no cuda13 packages (first in 4.3.0)"),
        ({"nvml": {"cuda_driver_version": "10.2"}}, "DCGM 4 has no CUDA 10 flavour"),
        ({"distribution": "Debian", "distribution_major_version": "11"}, "DCGM 4 has no repository for Debian 11"),
        ({"architecture": "ppc64le"}, "no packages for the architecture ppc64le"),
        ({"exporter_download_url": ""}, "dcgm_exporter_download_url is empty"),
        ({"exporter_version": "4.8.0"}, "dcgm_exporter_version must look like"),
        ({"exporter_sha256": "abc"}, "dcgm_exporter_sha256 must be the sha256 of the site's dcgm-exporter tarball"),
        ({"exporter_sha256": DEFAULTS["dcgm_exporter_sha256"]}, "dcgm_exporter_sha256 must be the sha256 of the site's dcgm-exporter tarball"),
        ({"exporter_download_url": "http://mirror.invalid/files"}, "set dcgm_exporter_allow_insecure_transport: true"),
        ({"exporter_download_url": "https://fleet:s3cret@mirror.invalid/files"}, "dcgm_exporter_download_url carries credentials"),
        ({"repo_url": "https://fleet:s3cret@mirror.invalid/cuda/repos"}, "dcgm_repo_url carries credentials"),
        ({"gpg_key_url": "https://fleet:s3cret@mirror.invalid/key.asc"}, "dcgm_gpg_key_url carries credentials"),
        ({"exporter_attribution": "slurm"}, "dcgm_exporter_attribution must be one of none, kubernetes, hpc"),
        ({"exporter_attribution": "hpc", "exporter_hpc_job_mapping_dir": ""}, "needs dcgm_exporter_hpc_job_mapping_dir"),
        ({"exporter_address": "9400"}, "dcgm_exporter_address must be [host]:port"),
        ({"exporter_counters_file": "counters.csv"}, "dcgm_exporter_counters_file must be an absolute path"),
        ({"exporter_extra_args": "--debug"}, "dcgm_exporter_extra_args must be a list of strings"),
        ({"health_watches": "pz"}, "dcgm_health_watches takes the letters"),
        ({"diag_level": 5}, "dcgm_diag_level must be 1, 2, 3 or 4"),
    ],
)
def test_each_problem_names_the_field_and_the_fix(over, expected):
    assert expected in dcgm_plan(settings(**over))["problem"]


def test_a_mirror_directory_overrides_the_table():
    plan = dcgm_plan(settings(distribution="Debian", distribution_major_version="13", repo_distro="debian13"))
    assert plan["problem"] == "" and plan["repo"]["distro"] == "debian13"


def test_a_full_package_version_is_pinned_as_given():
    assert dcgm_plan(settings(version="1:4.5.2-2"))["install"][0] == "datacenter-gpu-manager-4-core=1:4.5.2-2"


@pytest.mark.parametrize(
    "attribution,tail",
    [
        ("none", []),
        ("kubernetes", ["--kubernetes", "--pod-resources-kubelet-socket", "/var/lib/kubelet/pod-resources/kubelet.sock"]),
        ("hpc", ["--hpc-job-mapping-dir", "/run/dcgm-job-map"]),
    ],
)
def test_exporter_command_line_by_attribution(attribution, tail):
    exporter = dcgm_plan(settings(exporter_attribution=attribution, exporter_extra_args=["--debug"]))["exporter"]
    assert exporter["argv"] == [
        "/usr/local/bin/dcgm-exporter",
        "--collectors",
        "/etc/dcgm-exporter/default-counters.csv",
        "--address",
        ":9400",
        "--remote-hostengine-info",
        "localhost:5555",
        *tail,
        "--debug",
    ]
    assert exporter["tarball_url"] == "https://mirror.invalid/files/dcgm-exporter/4.5.3-4.8.2/dcgm-exporter-4.5.3-4.8.2-linux-amd64.tar.gz"
    assert exporter["sha256"] == PINNED and exporter["allow_insecure_transport"] is False


def test_the_exporter_is_pinned_by_the_site_never_by_a_published_sha256():
    # Issue 37: with dcgm_exporter_sha256 empty the role read <tarball>.sha256 from the same mirror.
    unpinned = dcgm_plan(settings(exporter_sha256=""))
    assert unpinned["problem"].startswith("dcgm_exporter_sha256 must be the sha256 of the site's dcgm-exporter tarball"), unpinned
    exporter = dcgm_plan(settings(exporter_sha256="A" * 64))["exporter"]
    assert exporter["sha256"] == "a" * 64 and "sha256_url" not in exporter


def test_a_plain_http_mirror_needs_the_flag_and_credentials_never_pass():
    url = "http://127.0.0.1:8765/files/dcgm-exporter"
    refused = dcgm_plan(settings(exporter_download_url=url))["problem"]
    assert refused == (
        "dcgm_exporter_download_url {0} is fetched over http, which does not authenticate the server; use an https:// "
        "mirror, or set dcgm_exporter_allow_insecure_transport: true (the pinned dcgm_exporter_sha256 still checks the tarball)".format(url)
    )
    allowed = dcgm_plan(settings(exporter_download_url=url, exporter_allow_insecure_transport=True))
    assert allowed["problem"] == "" and allowed["exporter"]["allow_insecure_transport"] is True
    secret = dcgm_plan(settings(exporter_download_url="https://fleet:s3cret@mirror.invalid/files", exporter_allow_insecure_transport=True))["problem"]
    assert secret.startswith("dcgm_exporter_download_url carries credentials") and "s3cret" not in secret
    # Nothing to download, nothing to pin.
    assert dcgm_plan(settings(exporter=False, exporter_sha256="", exporter_download_url=url))["problem"] == ""


def test_health_watch_letters_name_systems():
    assert dcgm_plan(settings(health_watches="pm"))["health"] == {"argv": ["dcgmi", "health", "--set", "pm"], "systems": ["PCIe", "memory"]}
    assert dcgm_plan(settings(health_watches="a"))["health"]["systems"] == ["PCIe", "memory", "infoROM", "thermal and power", "NVLink"]
    assert dcgm_plan(settings(health_watches=""))["health"] is None


def test_settings_must_be_complete():
    with pytest.raises(AnsibleFilterError, match="settings lack version"):
        dcgm_plan({k: v for k, v in settings().items() if k != "version"})
    with pytest.raises(AnsibleFilterError, match="as a mapping"):
        dcgm_plan("x")


FETCH = """+---------------------------+----------------------------+
| Health monitor systems status                          |
+===========================+============================+
| PCIe                      | On                         |
| NVLINK                    | Off                        |
| Memory                    | On                         |
| Inforom                   | Off                        |
| Thermal                   | On                         |
| Power                     | On                         |
+---------------------------+----------------------------+
"""


def test_health_fetch_is_read_as_systems():
    assert dcgm_health_watches(FETCH) == ["PCIe", "memory", "thermal and power"]
    assert dcgm_health_watches("") == []


def _report(*tests: dict) -> str:
    return json.dumps({"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": list(tests)}]}})


def test_diag_failures_name_the_test_gpu_and_warning():
    report = _report(
        {"name": "software", "results": [{"gpu_id": 0, "status": "Pass"}]},
        {"name": "memory", "results": [{"gpu_id": 3, "status": "Fail", "warnings": [{"warning": "DBE detected"}]}]},
    )
    assert dcgm_diag_failures(report, 226) == ["memory: GPU 3: DBE detected"]


def test_a_passing_diag_has_no_failures():
    assert dcgm_diag_failures(_report({"name": "software", "results": [{"gpu_id": 0, "status": "Pass"}]}), 0) == []


def test_an_unexplained_failure_is_still_a_failure():
    assert dcgm_diag_failures("Error: unable to connect", 255) == ["dcgmi diag exited 255 without a JSON report of a failing test: Error: unable to connect"]
    assert dcgm_diag_failures(_report({"name": "software", "results": [{"status": "Pass"}]}), 1)[0].startswith("dcgmi diag exited 1")
