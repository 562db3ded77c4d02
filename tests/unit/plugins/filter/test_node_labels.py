# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""node_labels_plan's rules that GPU Feature Discovery cannot judge here: the
GPUs' PCI classes (gpu.mode; the simulated GPUs have no sysfs entries, so GFD
reads "unknown" on every one), an unreadable machine, the file's form, bad
input, and the MIG memory names. The labels themselves are judged by the
real GFD on every simulator fixture (test_node_labels_gfd.py).
"""

from __future__ import annotations

import typing as t
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.filter.node_labels import node_labels_plan
from ansible_collections.gpufleet.nvidia.plugins.module_utils._gfd_labels import mig_memory_gb, sanitise

MACHINE = "NVIDIA DGX A100 920-23687-2530-000\n"
BUS_IDS = ("00000000:07:00.0", "00000000:0F:00.0", "00000000:47:00.0", "00000000:4E:00.0",
           "00000000:87:00.0", "00000000:90:00.0", "00000000:B7:00.0", "00000000:BD:00.0")  # fmt: skip
COMPUTE = {bus: "0x030200\n" for bus in BUS_IDS}
# The DGX's NVIDIA functions as read from sysfs: none carries a vendor capability (passthrough or bare metal).
NO_VGPU = {"devices": [], "error": None}


def facts(workdir: Path, fixture: str | Path) -> dict[str, t.Any]:
    """nvml_info's real facts of a simulated node."""
    from ansible_collections.gpufleet.nvidia.tests.unit.plugins import nvml_sim

    outcome = nvml_sim.SimNode(workdir, fixture).run()
    assert outcome["kind"] == "exit", outcome
    return outcome["result"]["nvml"]


def plan(nvml: dict, mig_strategy: str = "none", classes: dict | None = None, **sharing: t.Any) -> dict[str, t.Any]:
    settings = {"mig_strategy": mig_strategy, "time_slicing": [], "mps": None, "rename_by_default": False}
    settings.update(sharing)
    return node_labels_plan(
        {
            "nvml": nvml,
            "settings": settings,
            "reads": {"machine": MACHINE, "pci_classes": COMPUTE if classes is None else classes, "nvidia_pci": NO_VGPU},
            "expiry_time": "",
            "header": "test",
        }
    )


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> dict[str, t.Any]:
    return facts(tmp_path_factory.mktemp("whole"), "dgx-a100-8x40gb")


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, t.Any]:
    return facts(tmp_path_factory.mktemp("mixed"), "dgx-a100-mig-mixed")


@pytest.mark.parametrize(
    "classes,mode",
    [
        ({bus: "0x030000" for bus in BUS_IDS}, "graphics"),
        (dict(COMPUTE, **{BUS_IDS[3]: "0x030000"}), "unknown"),
        (dict(COMPUTE, **{BUS_IDS[0]: None}), "unknown"),
        ({}, "unknown"),
    ],
    ids=["graphics", "two-classes", "one-unreadable", "no-sysfs"],
)
def test_gpu_mode(whole: dict, classes: dict, mode: str) -> None:
    assert plan(whole, classes=classes)["labels"]["nvidia.com/gpu.mode"] == mode


def test_unreadable_machine_is_unknown(whole: dict) -> None:
    request = {"nvml": whole, "settings": {}, "reads": {"machine": None}, "expiry_time": "", "header": ""}
    assert node_labels_plan(request)["labels"]["nvidia.com/gpu.machine"] == "unknown"


def test_the_file_carries_the_expiry_before_the_labels(whole: dict) -> None:
    request = {"nvml": whole, "settings": {}, "reads": {}, "expiry_time": "2030-01-31T00:00:00Z", "header": "Written by us\nline two"}
    lines = node_labels_plan(request)["content"].splitlines()
    assert lines[:3] == ["# Written by us", "# line two", "# +expiry-time=2030-01-31T00:00:00Z"]
    assert lines[3:] == sorted(lines[3:]) and all("=" in line and not line.startswith("#") for line in lines[3:])


def test_summary(mixed: dict) -> None:
    assert plan(mixed, "mixed")["summary"] == {
        "product": "NVIDIA-A100-SXM4-40GB",
        "memory_mib": 40960,
        "count": 8,
        "mig_strategy": "mixed",
        "mig_resources": ["mig-1c.3g.20gb", "mig-1g.5gb", "mig-2g.10gb", "mig-3g.20gb"],
    }


@pytest.mark.parametrize(
    "change,message",
    [
        ({"expiry_time": "tomorrow"}, "node_labels_expiry_time must be an RFC 3339 time"),
        ({"expiry_time": "2030-02-30T00:00:00Z"}, "is not a real date"),
        ({"settings": {"mig_strategy": "auto"}}, "node_labels_mig_strategy must be one of none, single, mixed"),
        ({"settings": {"time_slicing": [{"name": "nvidia.com/gpu", "replicas": 0}]}}, "node_labels_time_slicing[0]"),
        ({"nvml": {"status": "driver_not_loaded"}}, "NVML is not usable on this node (nvml.status='driver_not_loaded')"),
        ({"header": "x" * 70000}, "NFD reads at most 65536"),
        ({"path": "/etc/kubernetes/node-feature-discovery/features.d/.gpu"}, "node_labels_file '.gpu' would never be read"),
        ({"path": "features.d/gpu"}, "node_labels_dir must be an absolute path"),
    ],
    ids=["expiry-format", "expiry-date", "strategy", "replicas", "no-driver", "too-big", "dotfile", "relative-dir"],
)
def test_bad_input_is_refused_with_the_fix(whole: dict, change: dict, message: str) -> None:
    request = {"nvml": whole, "settings": {}, "reads": {}, "expiry_time": "", "header": ""}
    request.update(change)
    with pytest.raises(AnsibleFilterError, match="^node_labels_plan: .*" + __import__("re").escape(message)):
        node_labels_plan(request)


def test_mps_with_mig_on_is_refused(mixed: dict) -> None:
    with pytest.raises(AnsibleFilterError, match="MPS sharing is not supported with MIG on"):
        plan(mixed, "mixed", mps=[{"name": "nvidia.com/gpu", "replicas": 2}])


@pytest.mark.parametrize(
    "total_mib,mig_mib,gb",
    # go-nvlib's getMigMemorySizeGB by hand: ceil(8 * mig / total) / 8 * ceil(total GiB), rounded.
    [(40960, 4864, 5), (40960, 9856, 10), (40960, 19968, 20), (40960, 40192, 40), (81559, 9856, 10), (81559, 40192, 40)],
)
def test_mig_memory_names(total_mib: int, mig_mib: int, gb: int) -> None:
    assert mig_memory_gb(total_mib * 1024 * 1024, mig_mib) == gb


@pytest.mark.parametrize("raw,clean", [("NVIDIA A100-SXM4-40GB", "NVIDIA-A100-SXM4-40GB"), ("Tesla T4 (rev a1)", "Tesla-T4-rev-a1"), ("  a  b\tc ", "a-bc")])
def test_sanitise(raw: str, clean: str) -> None:
    # A tab is outside GFD's character class: dropped before the words are split, so b and c join.
    assert sanitise(raw) == clean
