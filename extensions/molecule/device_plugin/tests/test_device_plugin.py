"""The device plugin's config file: exactly the declared config, and bad declarations refused."""

from __future__ import annotations

import os
import sys

import pytest
import yaml

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "..", "_shared"))

# pylint: disable=wrong-import-position
from stack import node, run_role, sha256

# What each node's molecule.yml host_vars must produce, in the plugin's format.
EXPECTED = {
    "device_plugin-debian12": (
        "/etc/nvidia-device-plugin/config.yaml",
        {
            "version": "v1",
            "flags": {"migStrategy": "none", "failOnInitError": True, "plugin": {"deviceListStrategy": "envvar"}},
            "sharing": {
                "timeSlicing": {
                    "renameByDefault": False,
                    "failRequestsGreaterThanOne": True,
                    "resources": [{"name": "nvidia.com/gpu", "replicas": 4}],
                }
            },
        },
    ),
    "device_plugin-debian13": (
        "/etc/gpufleet/device-plugin/config.yaml",
        {
            "version": "v1",
            "flags": {"migStrategy": "mixed", "failOnInitError": True, "plugin": {"deviceListStrategy": "cdi-cri"}},
            "sharing": {
                "timeSlicing": {
                    "renameByDefault": True,
                    "failRequestsGreaterThanOne": False,
                    "resources": [
                        {"name": "nvidia.com/mig-1g.10gb", "replicas": 2, "devices": "all"},
                        {"name": "nvidia.com/gpu", "replicas": 3},
                    ],
                }
            },
        },
    ),
}


def expected(host) -> tuple[str, dict]:
    return EXPECTED[host.backend.host]


def test_config_file_is_exactly_the_declaration(host):
    path, config = expected(host)
    f = node(host).file(path)
    assert f.is_file
    assert (f.user, f.group, f.mode) == ("root", "root", 0o644)
    assert yaml.safe_load(f.content_string) == config


def test_check_mode_shows_a_change_as_a_diff_and_writes_nothing(host, monkeypatch):
    monkeypatch.setenv("ANSIBLE_DIFF_ALWAYS", "1")  # run_role passes the environment on
    path = expected(host)[0]
    before = sha256(host, path)
    run = run_role(host, "device_plugin", {"device_plugin_time_slicing": [{"name": "nvidia.com/gpu", "replicas": 8}]}, check=True)
    assert not run.failed, run
    assert "changed=1" in run.output, run
    assert "+        replicas: 8" in run.output, run
    assert sha256(host, path) == before


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"name": "nvidia.com/gpu", "replicas": 1}, "device_plugin_time_slicing[0] (nvidia.com/gpu): replicas is 1; time-slicing needs replicas >= 2"),
        ({"name": "gpu", "replicas": 4}, "device_plugin_time_slicing[0] (gpu): the name is not a resource of the device plugin; use nvidia.com/gpu"),
        ({"name": "nvidia.com/mig-1g.10gb", "replicas": 2}, "MIG resources are advertised by name only with device_plugin_mig_strategy: mixed (it is none)"),
        ({"name": "nvidia.com/gpu"}, "missing required arguments: replicas"),
        # What the plugin would rewrite at start-up with only a warning in its log.
        ({"name": "nvidia.com/gpu", "replicas": 2, "rename": "nvidia.com/gpu.dev"}, 'rename "nvidia.com/gpu.dev" would be ignored'),
        ({"name": "nvidia.com/gpu", "replicas": 2, "devices": [0, 1]}, "devices [0, 1] would be ignored: the device plugin shares every GPU"),
    ],
)
def test_bad_declaration_fails_before_the_node_is_touched(host, entry, message):
    if host.backend.host != "device_plugin-debian12":
        pytest.skip("the checks run on the controller; one node is enough")
    path = expected(host)[0]
    before = sha256(host, path)
    run = run_role(host, "device_plugin", {"device_plugin_mig_strategy": "none", "device_plugin_time_slicing": [entry]})
    assert run.failed, run
    assert message in run.output, run
    assert sha256(host, path) == before


# A MIG declaration as the mig role reads it (mig_label in mig_config).
MIG_CONFIG = {
    "version": "v1",
    "mig-configs": {
        "split": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}],
        "half": [{"devices": [0, 1], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}, {"devices": [2, 3], "mig-enabled": False}],
        "off": [{"devices": "all", "mig-enabled": False}],
    },
}


@pytest.mark.parametrize(
    "strategy, label, message",
    [
        ("none", "split", 'device_plugin_mig_strategy is none, but mig_label "split" turns MIG on'),
        (
            "single",
            "half",
            'device_plugin_mig_strategy is single, which needs MIG on every GPU with the same MIG devices, but mig_label "half" does not declare that',
        ),
    ],
)
def test_a_strategy_that_contradicts_the_mig_layout_fails_before_the_node_is_touched(host, strategy, label, message):
    if host.backend.host != "device_plugin-debian12":
        pytest.skip("the checks run on the controller; one node is enough")
    path = expected(host)[0]
    before = sha256(host, path)
    run = run_role(host, "device_plugin", {"device_plugin_mig_strategy": strategy, "mig_label": label, "mig_config": MIG_CONFIG})
    assert run.failed, run
    assert message in run.output, run
    assert sha256(host, path) == before


@pytest.mark.parametrize("label, strategy", [("split", "mixed"), ("half", "mixed"), ("off", "none")])
def test_an_unset_strategy_follows_the_mig_layout(host, monkeypatch, label, strategy):
    if host.backend.host != "device_plugin-debian12":
        pytest.skip("device_plugin-debian12 leaves device_plugin_mig_strategy unset")
    monkeypatch.setenv("ANSIBLE_DIFF_ALWAYS", "1")
    run = run_role(host, "device_plugin", {"mig_label": label, "mig_config": MIG_CONFIG}, check=True)
    assert not run.failed, run
    if strategy == "none":
        assert "changed=0" in run.output, run
    else:
        assert "-  migStrategy: none" in run.output and "+  migStrategy: mixed" in run.output, run
