# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpufleet-node-labels, the node_labels role's refresh command, installed as the role installs it, on the simulator.

Its labels are held to real GPU Feature Discovery's on the same node (GFD reads this machine's DMI and PCI entries as
the command does), and its file to the one the role's filter plans from nvml_info's facts of the same node: byte for
byte, as the role and the unit must agree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import typing as t
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.plugins.filter.node_labels import node_labels_plan
from ansible_collections.gpufleet.nvidia.plugins.module_utils._pci import read_nvidia_functions
from ansible_collections.gpufleet.nvidia.tests.unit.plugins import gfd_judge, nvml_sim, runtime_install

ROOT = Path(__file__).resolve().parents[3]
COMMAND = ROOT / "roles" / "node_labels" / "files" / "gpufleet-node-labels"
HEADER = "GPU labels\nfor this test"
SETTINGS = {"mig_strategy": "mixed", "time_slicing": [], "mps": None, "rename_by_default": False}


@pytest.fixture
def installed(tmp_path: Path) -> Path:
    """sbin/gpufleet-node-labels and the node runtime under lib/gpufleet/, the layout of /usr/local on a node."""
    return runtime_install.install_command(tmp_path / "usr-local", COMMAND)


def config(tmp_path: Path, **overrides: t.Any) -> Path:
    """The config file the role writes (its __node_labels_config_content)."""
    content = {"path": str(tmp_path / "features.d" / "gpufleet-gpu"), "settings": SETTINGS, "expiry_time": "2099-01-01T00:00:00Z", "header": HEADER}
    content.update(overrides)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(content, indent=2, sort_keys=True) + "\n")
    return path


def run(command: Path, node: nvml_sim.SimNode, conf: Path, *args: str) -> subprocess.CompletedProcess:
    environment = dict(os.environ)
    environment.update(node.env)
    environment["LD_LIBRARY_PATH"] = str(nvml_sim.build().parent)
    environment.pop("NVML_SIM_EUID", None)
    argv = [sys.executable, str(command), "--config", str(conf), *args]
    return subprocess.run(argv, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False, timeout=120)


def labels_of(path: Path) -> dict[str, str]:
    return gfd_judge.parse(path.read_text())


def entries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_it_writes_gfds_labels_and_the_same_file_as_the_roles_plan(installed: Path, sim_node: t.Any, tmp_path: Path) -> None:
    node = sim_node("dgx-a100-mig-mixed")
    conf = config(tmp_path)
    done = run(installed, node, conf)
    assert done.returncode == 0, done.stdout
    written = tmp_path / "features.d" / "gpufleet-gpu"
    # The device plugin's config with the same MIG strategy, as the cluster's GFD would load it.
    gfd, log = gfd_judge.run(node, tmp_path / "gfd", "version: v1\nflags:\n  migStrategy: mixed\n")
    assert gfd is not None, log
    assert labels_of(written) == gfd
    assert written.read_text().splitlines()[:3] == ["# GPU labels", "# for this test", "# +expiry-time=2099-01-01T00:00:00Z"]
    assert (written.stat().st_mode & 0o777) == 0o644
    assert entries(written.parent) == ["gpufleet-gpu"]  # no dotfile left from the rename
    assert "rewrote {0}".format(written) in done.stdout
    # The role's filter on nvml_info's facts of the same node and the same reads gives the same bytes.
    facts = node.run()
    assert facts["kind"] == "exit", facts
    reads = {"machine": _read("/sys/class/dmi/id/product_name"), "pci_classes": {}, "nvidia_pci": read_nvidia_functions()}
    for gpu in facts["result"]["nvml"]["gpus"]:
        reads["pci_classes"][gpu["pci"]["bus_id"]] = _read("/sys/bus/pci/devices/{0}/class".format(gpu["pci"]["bus_id"][-12:].lower()))
    request = dict(json.loads(conf.read_text()), nvml=facts["result"]["nvml"], reads=reads)
    assert node_labels_plan(request)["content"] == written.read_text()


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return None


@pytest.fixture
def labelled(installed: Path, sim_node: t.Any, tmp_path: Path) -> tuple[t.Any, Path, Path, os.stat_result]:
    """A whole-GPU node the command has labelled once: the node, its config, the file and the file's first stat."""
    node = sim_node("dgx-a100-8x40gb")
    conf = config(tmp_path, settings=dict(SETTINGS, mig_strategy="none"))
    assert run(installed, node, conf).returncode == 0
    written = tmp_path / "features.d" / "gpufleet-gpu"
    return node, conf, written, written.stat()


def test_an_unchanged_node_is_not_written_again(installed: Path, labelled: tuple[t.Any, Path, Path, os.stat_result]) -> None:
    node, conf, written, before = labelled
    again = run(installed, node, conf)
    assert again.returncode == 0, again.stdout
    assert "is up to date (25 labels)" in again.stdout
    after = written.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_a_changed_node_is_written_by_rename_and_check_writes_nothing(installed: Path, labelled: tuple[t.Any, Path, Path, os.stat_result]) -> None:
    node, conf, written, before = labelled
    # A driver upgrade: the versions' labels change.
    node.set("driver_version=570.172.08", "cuda_driver_version=12080")
    check = run(installed, node, conf, "--check")
    assert check.returncode == 0, check.stdout
    assert "would rewrite" in check.stdout and "+nvidia.com/cuda.driver-version.full=570.172.08" in check.stdout
    assert written.stat().st_ino == before.st_ino and labels_of(written)["nvidia.com/cuda.driver-version.major"] == "550"
    done = run(installed, node, conf)
    assert done.returncode == 0, done.stdout
    assert "-nvidia.com/cuda.driver-version.full=550.127.05" in done.stdout
    assert "+nvidia.com/cuda.driver-version.full=570.172.08" in done.stdout
    # A new inode: written beside the file and renamed over it, never rewritten in place under NFD's reader.
    assert written.stat().st_ino != before.st_ino
    labels = labels_of(written)
    assert (labels["nvidia.com/cuda.driver-version.major"], labels["nvidia.com/cuda.runtime-version.full"]) == ("570", "12.8")
    assert (written.stat().st_mode & 0o777) == 0o644
    assert entries(written.parent) == ["gpufleet-gpu"]


@pytest.mark.parametrize(
    "breakage, message",
    [
        (lambda node: node.set("driver_loaded=0"), "NVML is not usable (driver_not_loaded"),
        (lambda node: node.simctl("inject", "gpu-lost", "--gpu", "3"), "GPU(s) [3] fell off the bus"),
    ],
    ids=["driver-unloaded", "gpu-lost"],
)
def test_without_usable_nvml_the_old_file_stays_and_it_fails(
    installed: Path, sim_node: t.Any, tmp_path: Path, breakage: t.Callable[[nvml_sim.SimNode], t.Any], message: str
) -> None:
    node = sim_node("dgx-a100-8x40gb")
    conf = config(tmp_path, settings=dict(SETTINGS, mig_strategy="none"))
    assert run(installed, node, conf).returncode == 0
    written = tmp_path / "features.d" / "gpufleet-gpu"
    before, content = written.stat(), written.read_bytes()
    breakage(node)
    done = run(installed, node, conf)
    assert done.returncode == 1, done.stdout
    assert message in done.stdout and "{0} left as it was".format(written) in done.stdout
    assert written.read_bytes() == content and written.stat().st_ino == before.st_ino
    assert entries(written.parent) == ["gpufleet-gpu"]


def test_without_nvml_on_a_fresh_node_nothing_is_written(installed: Path, sim_node: t.Any, tmp_path: Path) -> None:
    node = sim_node("dgx-a100-8x40gb")
    node.set("driver_loaded=0")
    done = run(installed, node, config(tmp_path))
    assert done.returncode == 1, done.stdout
    assert not (tmp_path / "features.d").exists()


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"settings": "mixed"}, "settings must be a dict"),
        ({"path": "features.d/gpufleet-gpu"}, "node_labels_dir must be an absolute path"),
        ({"path": "/etc/features.d/.hidden"}, "would never be read"),
    ],
)
def test_a_bad_config_is_refused_naming_the_field(installed: Path, sim_node: t.Any, tmp_path: Path, overrides: dict, message: str) -> None:
    done = run(installed, sim_node("dgx-a100-8x40gb"), config(tmp_path, **overrides))
    assert done.returncode == 2, done.stdout
    assert message in done.stdout


def test_a_missing_config_says_which_role_writes_it(installed: Path, sim_node: t.Any, tmp_path: Path) -> None:
    done = run(installed, sim_node("dgx-a100-8x40gb"), tmp_path / "absent.json")
    assert done.returncode == 2
    assert "run the gpufleet.nvidia.node_labels role to write it" in done.stdout


def test_bad_settings_fail_as_the_roles_plan_does(installed: Path, sim_node: t.Any, tmp_path: Path) -> None:
    done = run(installed, sim_node("dgx-a100-8x40gb"), config(tmp_path, settings=dict(SETTINGS, mig_strategy="some")))
    assert done.returncode == 1
    assert "node_labels_mig_strategy must be one of none, single, mixed, got 'some'" in done.stdout
    assert not (tmp_path / "features.d").exists()
