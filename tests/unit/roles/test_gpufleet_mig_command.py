# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpufleet-mig, the boot unit's command, installed as the mig role installs it, against the simulator."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import typing as t
from collections import Counter
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.tests.unit.plugins import mig_expected, nvml_sim

ROOT = Path(__file__).resolve().parents[3]
COMMAND = ROOT / "roles" / "mig" / "files" / "gpufleet-mig"
MODULE_UTILS = ROOT / "plugins" / "module_utils"
# The applier's files as roles/mig/vars/main.yml installs them (__mig_install_files).
LIB_FILES = tuple(sorted(
    re.search(r"__mig_module_utils ~ '/(_\w+\.py)'", entry["content"]).group(1)
    for entry in yaml.safe_load((ROOT / "roles" / "mig" / "vars" / "main.yml").read_text())["__mig_install_files"]
    if "__mig_module_utils" in entry.get("content", "")))


@pytest.fixture
def installed(tmp_path: Path) -> Path:
    """sbin/gpufleet-mig and lib/gpufleet/gpufleet_mig/, the layout of /usr/local on a node."""
    package = tmp_path / "lib" / "gpufleet" / "gpufleet_mig"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for name in LIB_FILES:
        shutil.copy(str(MODULE_UTILS / name), str(package / name))
    (tmp_path / "sbin").mkdir()
    command = tmp_path / "sbin" / "gpufleet-mig"
    shutil.copy(str(COMMAND), str(command))
    return command


def layouts(node: nvml_sim.SimNode) -> dict[str, dict[str, int]]:
    return mig_expected.layouts_for(mig_expected.gpu_state(node.show()["gpus"][0], mig_enabled=True))


def run(command: Path, node: nvml_sim.SimNode, *args: str, env: dict[str, str] | None = None,
        ) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("GPUFLEET_MIG_")}
    environment.update(node.env)
    environment["PATH"] = "{0}:{1}".format(nvml_sim.SIM_DIR, environment.get("PATH", ""))  # its nvidia-smi
    environment["LD_LIBRARY_PATH"] = str(nvml_sim.build().parent)
    environment.pop("NVML_SIM_EUID", None)
    environment.update(env or {})
    return subprocess.run([sys.executable, str(command), *args], env=environment, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, check=False, timeout=120)


def write_config(tmp_path: Path, config: dict[str, t.Any]) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return path


def test_apply_then_assert_from_the_env_file(installed: Path, sim_node: t.Any, tmp_path: Path) -> None:
    node = sim_node("dgx-a100-8x40gb")
    wanted = layouts(node)["all-balanced"]
    config = write_config(tmp_path, mig_expected.config("balanced", {
        "devices": "all", "mig-enabled": True, "mig-devices": wanted}))
    env_file = tmp_path / "gpufleet-mig.env"
    env_file.write_text("# managed\nGPUFLEET_MIG_CONFIG={0}\nGPUFLEET_MIG_LABEL=balanced\n".format(config))
    env = {"GPUFLEET_MIG_ENV": str(env_file)}
    assert run(installed, node, "assert", env=env).returncode == 1
    plan = run(installed, node, "plan", env=env)
    assert plan.returncode == 0 and "GPU 0: would enable MIG mode" in plan.stdout
    applied = run(installed, node, "apply", env=env)
    assert applied.returncode == 0, applied.stdout
    assert "gpufleet-mig: done: GPU 7: create" in applied.stdout
    assert all(mig_expected.device_counts(g) == Counter(wanted) for g in node.show()["gpus"])
    assert run(installed, node, "assert", env=env).returncode == 0
    assert run(installed, node, "apply", env=env).stdout.count("done:") == 0  # nothing left to do


def test_boot_after_a_reboot_restores_the_layout(installed: Path, sim_node: t.Any, tmp_path: Path) -> None:
    node = sim_node("dgx-a100-8x40gb")
    wanted = layouts(node)["all-1g"]
    config = write_config(tmp_path, mig_expected.config("seven", {
        "devices": [0, 1], "mig-enabled": True, "mig-devices": wanted}))
    args = ("--config", str(config), "--label", "seven")
    assert run(installed, node, "apply", *args).returncode == 0
    node.simctl("reboot")  # the next nvmlInit drops every GPU/compute instance
    assert run(installed, node, "apply", *args).returncode == 0
    assert [mig_expected.device_counts(g) == Counter(wanted) for g in node.show()["gpus"][:2]] == [True, True]


def test_reset_then_finish(installed: Path, sim_node: t.Any, tmp_path: Path) -> None:
    node = sim_node("dgx-a100-8x40gb")
    node.set("mig_toggle=reboot", gpu=1)
    wanted = layouts(node)["all-3g"]
    config = write_config(tmp_path, mig_expected.config("x", {"devices": [1], "mig-enabled": True,
                                                              "mig-devices": wanted}))
    args = ("--config", str(config), "--label", "x")
    without = run(installed, node, "apply", *args)
    assert without.returncode == 1 and "GPU 1: MIG mode change pending until a GPU reset or reboot" in without.stdout
    done = run(installed, node, "apply", "--reset", *args)
    assert done.returncode == 0, done.stdout
    assert "resetting GPU 1" in done.stdout and "was successfully reset" in done.stdout
    assert mig_expected.device_counts(node.show()["gpus"][1]) == Counter(wanted)


@pytest.mark.parametrize(
    ("setup", "args", "code", "text"),
    [
        ("none", ("apply",), 2, "--config and --label (or GPUFLEET_MIG_CONFIG and GPUFLEET_MIG_LABEL) are required"),
        ("bad", ("apply", "--label", "x"), 2, "invalid MIG config"),
        ("label", ("apply", "--label", "nope"), 2, "label 'nope' is not in the config"),
        ("client", ("apply", "--label", "x"), 1, "GPU clients are still attached, nothing was changed"),
    ],
)
def test_errors(installed: Path, sim_node: t.Any, tmp_path: Path, setup: str, args: tuple[str, ...], code: int,
                text: str) -> None:
    node = sim_node("dgx-a100-mig-mixed")
    config = mig_expected.config("x", {"devices": [1], "mig-enabled": False})
    if setup == "bad":
        config = {"version": "v1", "mig-configs": {"x": [{"devices": [1]}]}}
    path = write_config(tmp_path, config)
    extra = () if setup == "none" else ("--config", str(path))
    before = node.state.read_bytes()
    done = run(installed, node, *args, *extra, env={"GPUFLEET_MIG_ENV": str(tmp_path / "absent.env")})
    assert done.returncode == code and text in done.stdout, done.stdout
    assert node.state.read_bytes() == before
