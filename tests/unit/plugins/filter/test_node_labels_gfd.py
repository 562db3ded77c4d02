# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The real judge of node_labels: NVIDIA's GPU Feature Discovery (built from
github.com/NVIDIA/k8s-device-plugin at the pin in tests/harness/go-tools.txt)
runs one-shot against each simulated node, beside nvml_info and the role's
plan on the same node; the two label sets must be equal.

The allow-list: gfd.timestamp is never compared (GFD runs with
--no-timestamp; the role writes none), and on a node with GPUs of different
models GFD labels the whole-GPU labels (product, memory, count, family,
compute capability) of whichever model it met first in a map's iteration
(random), so those are left out there, once GFD's product is seen to be one of
the node's models.

The same runs judge the device plugin's config as the device_plugin role
writes it: GFD loads --config-file with the plugin's own api/config/v1 code,
and logs "... is not yet supported in the config. Ignoring..." for anything it
rewrites (DisableResourceNamingInConfig); such a line fails the test.
"""

from __future__ import annotations

import json
import typing as t
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.plugins.filter.device_plugin import device_plugin_problems
from ansible_collections.gpufleet.nvidia.plugins.filter.node_labels import node_labels_plan
from ansible_collections.gpufleet.nvidia.plugins.module_utils._pci import read_nvidia_functions
from ansible_collections.gpufleet.nvidia.tests.unit.plugins import gfd_judge, nvml_sim

ROOT = Path(__file__).resolve().parents[4]
FIXTURES = sorted(path.stem for path in nvml_sim.NODES_DIR.glob("*.yml"))
MACHINE = "NVIDIA DGX A100 920-23687-2530-000\n"
# The labels of a whole-GPU model, which GFD takes from the model it meets first
# in a map's iteration on a node of several models (random): the allow-list.
ONE_MODELS_LABELS = (
    "nvidia.com/gpu.product",
    "nvidia.com/gpu.memory",
    "nvidia.com/gpu.count",
    "nvidia.com/gpu.family",
    "nvidia.com/gpu.compute.major",
    "nvidia.com/gpu.compute.minor",
)
IGNORED = ("is not yet supported in the config",)


@pytest.fixture(scope="module")
def gfd() -> Path:
    """The gpu-feature-discovery binary, built once and cached by tests/harness/go-build.sh."""
    return gfd_judge.binary()


def device_plugin_config(strategy: str, time_slicing: list[dict[str, t.Any]], rename_by_default: bool = False) -> str:
    """The device plugin's config file as the device_plugin role writes it: its own template, over its
    defaults, rendered by ansible-core's Templar (the declaration checked as the role checks it first)."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    from ansible_collections.gpufleet.nvidia.plugins.action.pinned_artifacts import trusted

    role = ROOT / "roles" / "device_plugin"
    variables = yaml.safe_load((role / "defaults" / "main.yml").read_text())
    variables.update(
        device_plugin_mig_strategy=strategy,
        device_plugin_time_slicing=time_slicing,
        device_plugin_rename_by_default=rename_by_default,
        ansible_managed="Ansible managed",
    )
    role_vars = yaml.safe_load((role / "vars" / "main.yml").read_text())
    assert (
        device_plugin_problems(
            time_slicing, variables["device_plugin_config_path"], strategy, role_vars["__device_plugin_name_pattern"], role_vars["__device_plugin_name_max"]
        )
        == []
    )
    return Templar(loader=DataLoader(), variables=variables).template(trusted((role / "templates" / "config.yaml.j2").read_text()))


def run_gfd(gfd: Path, node: nvml_sim.SimNode, tmp: Path, config: str) -> tuple[dict[str, str] | None, str]:
    """GFD's labels (None when it failed) and its log, with the device plugin's config file `config`."""
    assert gfd == gfd_judge.binary()
    return gfd_judge.run(node, tmp / "gfd", config, machine=MACHINE)


def ours(node: nvml_sim.SimNode, config_text: str) -> dict[str, str] | None:
    """node_labels_plan's labels on nvml_info's facts of the same node and the same config (None when it refuses)."""
    config = yaml.safe_load(config_text)
    facts = node.run()
    assert facts["kind"] == "exit", facts
    nvml = facts["result"]["nvml"]
    sharing = (config.get("sharing") or {}).get("timeSlicing") or {}
    mps = (config.get("sharing") or {}).get("mps") or {}
    settings = {
        "mig_strategy": config["flags"]["migStrategy"],
        "time_slicing": sharing.get("resources") or [],
        "mps": mps.get("resources") or None,
        "rename_by_default": bool(sharing.get("renameByDefault") or mps.get("renameByDefault")),
    }
    classes = {}
    for gpu in nvml.get("gpus") or []:
        path = Path("/sys/bus/pci/devices") / gpu["pci"]["bus_id"][-12:].lower() / "class"
        classes[gpu["pci"]["bus_id"]] = path.read_text() if path.exists() else None
    request = {"nvml": nvml, "settings": settings, "reads": {"machine": MACHINE, "pci_classes": classes, "nvidia_pci": read_nvidia_functions()}}
    try:
        return node_labels_plan(dict(request, expiry_time="", header="judged by GFD"))["labels"]
    except Exception:
        return None


def models(node: nvml_sim.SimNode) -> set[str]:
    return {gpu["name"] for gpu in node.show()["gpus"]}


@pytest.mark.parametrize("strategy", ["none", "single", "mixed"])
@pytest.mark.parametrize("fixture", FIXTURES)
def test_our_labels_are_gfds(gfd: Path, tmp_path: Path, fixture: str, strategy: str) -> None:
    node = nvml_sim.SimNode(tmp_path / "node", fixture)
    config = device_plugin_config(strategy, [])
    theirs, log = run_gfd(gfd, node, tmp_path, config)
    mine = ours(node, config)
    if theirs is None or mine is None:
        # Both refuse the node, or neither does.
        assert theirs is None and mine is None, "GFD: {0}\nours: {1}\n{2}".format(theirs, mine, log[-3000:])
        return
    if len(models(node)) > 1:
        # GFD's pick is one of the node's models, whichever; the rest must still be equal.
        assert theirs["nvidia.com/gpu.product"].split("-SHARED")[0] in {"-".join(name.split()) for name in models(node)}, theirs
        for name in ONE_MODELS_LABELS:
            theirs.pop(name, None)
            mine.pop(name, None)
    assert mine == theirs, json.dumps(
        {"only GFD": sorted(set(theirs.items()) - set(mine.items())), "only ours": sorted(set(mine.items()) - set(theirs.items()))}, indent=1
    )
    assert not [line for line in log.splitlines() if any(marker in line for marker in IGNORED)], log


@pytest.mark.parametrize(
    "time_slicing,rename_by_default",
    [
        ([{"name": "nvidia.com/gpu", "replicas": 4}], False),
        ([{"name": "nvidia.com/gpu", "replicas": 4}], True),
        ([{"name": "nvidia.com/gpu", "replicas": 2, "devices": "all"}], False),
    ],
)
def test_the_device_plugin_loads_the_roles_sharing_config_unchanged(gfd: Path, tmp_path: Path, time_slicing: list, rename_by_default: bool) -> None:
    node = nvml_sim.SimNode(tmp_path / "node", "dgx-a100-8x40gb")
    config = device_plugin_config("none", time_slicing, rename_by_default)
    theirs, log = run_gfd(gfd, node, tmp_path, config)
    assert theirs is not None, log
    assert not [line for line in log.splitlines() if any(marker in line for marker in IGNORED)], log
    assert ours(node, config) == theirs


def test_mps_sharing_labels_are_gfds(gfd: Path, tmp_path: Path) -> None:
    # MPS is not a role setting (node_labels passes mps: null), but the labeller carries GFD's rule for it.
    node = nvml_sim.SimNode(tmp_path / "node", "dgx-a100-8x40gb")
    config = yaml.safe_dump({"version": "v1", "flags": {"migStrategy": "none"}, "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}})
    theirs, log = run_gfd(gfd, node, tmp_path, config)
    assert theirs is not None, log
    assert theirs["nvidia.com/gpu.sharing-strategy"] == "mps", theirs
    assert ours(node, config) == theirs


@pytest.mark.parametrize(
    "entry,warning",
    [
        ({"name": "nvidia.com/gpu", "replicas": 2, "rename": "nvidia.com/gpu.dev"}, "Setting the 'rename' field"),
        ({"name": "nvidia.com/gpu", "replicas": 2, "devices": [0, 1]}, "Customizing the 'devices' field"),
    ],
)
def test_what_the_role_refuses_the_plugin_would_rewrite(gfd: Path, tmp_path: Path, entry: dict, warning: str) -> None:
    # The other side of device_plugin_problems' refusals: the plugin's own loader rewrites these.
    assert device_plugin_problems([entry], "/etc/config.yaml", "none", r"^nvidia\.com/[a-z0-9.-]+$", 63)
    node = nvml_sim.SimNode(tmp_path / "node", "dgx-a100-8x40gb")
    config = {"version": "v1", "flags": {"migStrategy": "none"}, "sharing": {"timeSlicing": {"resources": [entry]}}}
    _theirs, log = run_gfd(gfd, node, tmp_path, yaml.safe_dump(config))
    assert warning in log, log
