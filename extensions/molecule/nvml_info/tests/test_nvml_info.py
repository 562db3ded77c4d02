"""nvml_info on a live node, checked against the simulator's own state.

The expectation comes from `nvml-simctl show` inside the node and the same
oracle the unit tests use, so nothing here is a hard-coded answer.
"""

from __future__ import annotations

import json
import os
import sys

ROOT = os.environ.get("MOLECULE_PROJECT_DIRECTORY", os.getcwd())
sys.path.insert(0, os.path.join(ROOT, "build", "collections"))

# pylint: disable=wrong-import-position
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.nvml_expected import (
    differences,
    expected_facts,
)

DEFAULT_LIBRARY = "libnvidia-ml.so.1"


def nvml_info(host, **options) -> dict:
    args = " ".join(f"{key}={value}" for key, value in options.items())
    result = host.ansible("gpufleet.nvidia.nvml_info", args, check=False)
    assert not result.get("failed"), result.get("msg")
    assert result["changed"] is False
    return result["nvml"]


def simulator_state(host) -> dict:
    return json.loads(host.check_output("nvml-simctl show"))


def debian_libnvidia_ml(host) -> str:
    """The real library Debian's libnvidia-ml1 installed (not the alternatives link)."""
    files = host.check_output("dpkg-query -L libnvidia-ml1").split()
    return next(f for f in files if f.endswith("/nvidia/current/libnvidia-ml.so.1"))


def test_facts_equal_the_simulated_gpus(host):
    state = simulator_state(host)
    assert state["gpus"], "the node has no simulated GPUs"
    mismatches = differences(nvml_info(host), expected_facts(state, DEFAULT_LIBRARY, False))
    assert not mismatches, "\n".join(mismatches)


def test_mig_profiles_and_placements_equal_the_simulator(host):
    state = simulator_state(host)
    mismatches = differences(nvml_info(host, gather_mig_profiles="true"), expected_facts(state, DEFAULT_LIBRARY, True))
    assert not mismatches, "\n".join(mismatches)


def test_reading_facts_changes_nothing(host):
    before = host.file("/var/lib/nvml-sim/state").sha256sum
    nvml_info(host, gather_mig_profiles="true")
    assert host.file("/var/lib/nvml-sim/state").sha256sum == before


def test_debian_library_came_from_the_signed_local_mirror(host):
    assert host.package("libnvidia-ml1").is_installed
    policy = host.check_output("apt-cache policy libnvidia-ml1")
    mirror = host.ansible.get_variables()["gpufleet_test_mirror_url"]
    assert mirror in policy, policy
    assert "signed-by=" in host.file("/etc/apt/sources.list.d/gpufleet-test-mirror.list").content_string


def test_real_library_without_kernel_driver_is_reported_not_failed(host):
    library = debian_libnvidia_ml(host)
    nvml = nvml_info(host, library=library)
    assert (nvml["status"], nvml["driver_loaded"], nvml["library"]) == ("driver_not_loaded", False, library)
    assert "Driver Not Loaded" in nvml["reason"]
    assert (nvml["gpu_count"], nvml["gpus"], nvml["driver_version"]) == (0, [], None)


def test_missing_library_is_reported_not_failed(host):
    library = "/usr/lib/gpufleet-absent/libnvidia-ml.so.1"
    nvml = nvml_info(host, library=library)
    assert (nvml["status"], nvml["driver_loaded"]) == ("library_not_found", False)
    assert library in nvml["reason"]
