# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpufleet-mig, the boot unit's command, installed as the mig role installs it, against the simulator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import typing as t
from collections import Counter
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.plugins import mig_expected, nvml_sim, runtime_install

ROOT = Path(__file__).resolve().parents[3]
COMMAND = ROOT / "roles" / "mig" / "files" / "gpufleet-mig"


@pytest.fixture
def installed(tmp_path: Path) -> Path:
    """sbin/gpufleet-mig and the node runtime under lib/gpufleet/, the layout of /usr/local on a node."""
    return runtime_install.install_command(tmp_path, COMMAND)


def layouts(node: nvml_sim.SimNode) -> dict[str, dict[str, int]]:
    return mig_expected.layouts_for(mig_expected.gpu_state(node.show()["gpus"][0], mig_enabled=True))


def run(
    command: Path,
    node: nvml_sim.SimNode,
    *args: str,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("GPUFLEET_MIG_")}
    environment.update(node.env)
    environment["PATH"] = "{0}:{1}".format(nvml_sim.SIM_DIR, environment.get("PATH", ""))  # its nvidia-smi
    environment["LD_LIBRARY_PATH"] = str(nvml_sim.build().parent)
    environment.pop("NVML_SIM_EUID", None)
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, str(command), *args], env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False, timeout=120
    )


def write_config(tmp_path: Path, config: dict[str, t.Any]) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return path


def test_apply_then_assert_from_the_env_file(installed: Path, sim_node: t.Any, tmp_path: Path) -> None:
    node = sim_node("dgx-a100-8x40gb")
    wanted = layouts(node)["all-balanced"]
    config = write_config(tmp_path, mig_expected.config("balanced", {"devices": "all", "mig-enabled": True, "mig-devices": wanted}))
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
    config = write_config(tmp_path, mig_expected.config("seven", {"devices": [0, 1], "mig-enabled": True, "mig-devices": wanted}))
    args = ("--config", str(config), "--label", "seven")
    assert run(installed, node, "apply", *args).returncode == 0
    node.simctl("reboot")  # the next nvmlInit drops every GPU/compute instance
    assert run(installed, node, "apply", *args).returncode == 0
    assert [mig_expected.device_counts(g) == Counter(wanted) for g in node.show()["gpus"][:2]] == [True, True]


def test_reset_then_finish(installed: Path, sim_node: t.Any, tmp_path: Path) -> None:
    node = sim_node("dgx-a100-8x40gb")
    node.set("mig_toggle=reboot", gpu=1)
    wanted = layouts(node)["all-3g"]
    config = write_config(tmp_path, mig_expected.config("x", {"devices": [1], "mig-enabled": True, "mig-devices": wanted}))
    args = ("--config", str(config), "--label", "x")
    without = run(installed, node, "apply", *args)
    assert without.returncode == 1 and "GPU 1: MIG mode change pending until a GPU reset or reboot" in without.stdout
    done = run(installed, node, "apply", "--reset", *args)
    assert done.returncode == 0, done.stdout
    assert "resetting GPU 1" in done.stdout and "was successfully reset" in done.stdout
    assert mig_expected.device_counts(node.show()["gpus"][1]) == Counter(wanted)


def waiting_for_reset(installed: Path, node: nvml_sim.SimNode, tmp_path: Path) -> tuple[tuple[str, ...], Counter]:
    """Issue 25's setup: a MIG mode change that waits for a reset on GPUs 0-7 (requested, not yet reset)."""
    for index in range(8):
        node.set("mig_toggle=reboot", gpu=index)
    wanted = layouts(node)["all-3g"]
    config = write_config(tmp_path, mig_expected.config("x", {"devices": "all", "mig-enabled": True, "mig-devices": wanted}))
    args = ("--config", str(config), "--label", "x")
    requested = run(installed, node, "apply", *args)
    assert requested.returncode == 1, requested.stdout
    assert [(g["mig_current"], g["mig_pending"]) for g in node.show()["gpus"]] == [(0, 1)] * 8
    return args, Counter(wanted)


def half_done(node: nvml_sim.SimNode, wanted: Counter) -> list[int]:
    """GPUs in MIG mode without their layout: no CUDA work runs on them."""
    return [g["index"] for g in node.show()["gpus"] if g["mig_current"] and mig_expected.device_counts(g) != wanted]


def test_a_process_on_a_gpu_waiting_for_its_reset_refuses_before_any_reset(installed: Path, sim_node: t.Any, tmp_path: Path) -> None:
    """Issue 25's reproduction: the old command reset GPUs 0 and 1, stopped at GPU 2, and left 0-1 without instances."""
    node = sim_node("dgx-a100-8x40gb")
    args, wanted = waiting_for_reset(installed, node, tmp_path)
    node.simctl("process", "add", "--gpu", "2", "--pid", "4242", "--name", "python3")
    before = node.state.read_bytes()
    refused = run(installed, node, "apply", "--reset", *args)
    assert refused.returncode == 1, refused.stdout
    assert half_done(node, wanted) == [] and node.state.read_bytes() == before, refused.stdout
    assert "GPU clients are still attached, so nothing was changed: GPU 2 (NVIDIA A100-SXM4-40GB)" in refused.stdout
    assert "pid 4242" in refused.stdout and "resetting" not in refused.stdout
    node.simctl("process", "clear", "--gpu", "2")
    done = run(installed, node, "apply", "--reset", *args)
    assert done.returncode == 0, done.stdout
    # One reset for all eight, as mig-parted does it.
    assert done.stdout.count("resetting GPU") == 1 and "resetting GPU 0,1,2,3,4,5,6,7 " in done.stdout
    assert [mig_expected.device_counts(g) for g in node.show()["gpus"]] == [wanted] * 8


def test_a_reset_that_fails_part_way_finishes_every_gpu_that_did_reset(installed: Path, sim_node: t.Any, tmp_path: Path) -> None:
    """A process that starts after the check, met by an nvidia-smi that resets GPU by GPU and stops at it."""
    node = sim_node("dgx-a100-8x40gb")
    args, wanted = waiting_for_reset(installed, node, tmp_path)
    # The simulator's own nvidia-smi, driven as a GPU-by-GPU reset would go:
    # GPUs 0-3 reset, then a CUDA job lands on GPU 5 and the rest is refused.
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(
        '#!/bin/sh\n{0} {1} --gpu-reset -i 0,1,2,3 || exit 1\n{0} {2} process add --gpu 5 --pid 777 --name late || exit 1\nexec {0} {1} "$@"\n'.format(
            sys.executable, nvml_sim.SIM_DIR / "nvidia-smi", nvml_sim.SIMCTL
        )
    )
    smi.chmod(0o755)
    path = "{0}:{1}:{2}".format(smi.parent, nvml_sim.SIM_DIR, os.environ.get("PATH", ""))
    failed = run(installed, node, "apply", "--reset", *args, env={"PATH": path})
    assert failed.returncode == 1, failed.stdout
    assert half_done(node, wanted) == [], failed.stdout
    assert ("The layout was finished on GPU 0-3, which did reset. GPU 4-7 stay as they were before the reset, with the new MIG mode pending") in failed.stdout
    gpus = node.show()["gpus"]
    assert [mig_expected.device_counts(g) for g in gpus[:4]] == [wanted] * 4
    assert [(g["mig_current"], g["mig_pending"]) for g in gpus[4:]] == [(0, 1)] * 4


def test_export_then_apply_changes_nothing(installed: Path, sim_node: t.Any, tmp_path: Path) -> None:
    node = sim_node("dgx-a100-mig-mixed")
    before = node.state.read_bytes()
    exported = run(installed, node, "export", "--label", "here", env={"GPUFLEET_MIG_ENV": str(tmp_path / "absent.env")})
    assert exported.returncode == 0, exported.stdout
    config = tmp_path / "exported.json"
    config.write_text(exported.stdout)  # stdout is the config alone
    assert sorted(json.loads(exported.stdout)["mig-configs"]) == ["here"]
    applied = run(installed, node, "apply", "--config", str(config), "--label", "here")
    # GPU 4's enable waits for its reset; nothing else is to do.
    assert "done:" not in applied.stdout and node.state.read_bytes() == before, applied.stdout
    assert "GPU 4: MIG mode change pending until a GPU reset or reboot" in applied.stdout


def test_assert_mode_only(installed: Path, sim_node: t.Any, tmp_path: Path) -> None:
    node = sim_node("dgx-a100-mig-mixed")  # GPU 3: MIG on, no GPU instances
    config = write_config(tmp_path, mig_expected.config("x", {"devices": [3], "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}))
    args = ("--config", str(config), "--label", "x")
    assert run(installed, node, "assert", *args).returncode == 1
    assert run(installed, node, "assert", "--mode-only", *args).returncode == 0


def hooks_file(tmp_path: Path, log: Path, pre_apply_mode: str) -> Path:
    """A mig-parted hooks file (version v1) whose hooks append to `log`."""

    def hook(text: str) -> list[dict[str, t.Any]]:
        return [{"command": "/bin/sh", "args": ["-c", "{ " + text + '; } >> "$LOG"'], "envs": {"LOG": str(log)}}]

    path = tmp_path / "hooks.json"
    path.write_text(
        json.dumps(
            {
                "version": "v1",
                "hooks": {
                    "apply-start": hook("echo start $MIG_PARTED_SELECTED_CONFIG skip-reset=$MIG_PARTED_SKIP_RESET"),
                    "pre-apply-mode": hook(pre_apply_mode),
                    "pre-apply-config": hook("echo config"),
                    "apply-exit": hook("echo exit"),
                },
            }
        )
    )
    return path


def test_hooks_run_where_mig_parted_runs_them(installed: Path, sim_node: t.Any, tmp_path: Path) -> None:
    """pre-apply-mode stops what holds a GPU (as the GPU Operator's hooks do); the run reads the GPUs after it."""
    node = sim_node("dgx-a100-8x40gb")
    node.simctl("process", "add", "--gpu", "2", "--pid", "4242", "--name", "dcgm")
    config = write_config(tmp_path, mig_expected.config("x", {"devices": "all", "mig-enabled": True, "mig-devices": layouts(node)["all-1g"]}))
    args = ("--config", str(config), "--label", "x")
    assert "GPU clients are still attached" in run(installed, node, "apply", *args).stdout
    log = tmp_path / "hooks.log"
    clear = "echo mode; {0} {1} process clear --gpu 2 >/dev/null".format(sys.executable, nvml_sim.SIMCTL)
    done = run(installed, node, "apply", *args, "--hooks", str(hooks_file(tmp_path, log, clear)))
    assert done.returncode == 0, done.stdout
    assert log.read_text().split("\n") == ["start x skip-reset=true", "mode", "config", "exit", ""]
    assert [mig_expected.device_counts(g) for g in node.show()["gpus"]] == [Counter(layouts(node)["all-1g"])] * 8
    log.unlink()
    again = run(installed, node, "apply", *args, "--hooks", str(tmp_path / "hooks.json"))
    assert again.returncode == 0 and log.read_text().split("\n") == ["start x skip-reset=true", "exit", ""]


def test_a_failing_hook_stops_the_run_before_any_change(installed: Path, sim_node: t.Any, tmp_path: Path) -> None:
    node = sim_node("dgx-a100-8x40gb")
    config = write_config(tmp_path, mig_expected.config("x", {"devices": "all", "mig-enabled": True, "mig-devices": layouts(node)["all-1g"]}))
    log = tmp_path / "hooks.log"
    before = node.state.read_bytes()
    failed = run(installed, node, "apply", "--config", str(config), "--label", "x", "--hooks", str(hooks_file(tmp_path, log, "echo stopping; exit 3")))
    assert failed.returncode == 1 and node.state.read_bytes() == before
    assert "hooks.hooks.pre-apply-mode[0] (/bin/sh) failed with exit 3" in failed.stdout
    assert log.read_text().split("\n") == ["start x skip-reset=true", "stopping", "exit", ""]  # apply-exit still ran


def test_a_bad_hooks_file_is_refused_naming_the_field(installed: Path, sim_node: t.Any, tmp_path: Path) -> None:
    node = sim_node("dgx-a100-8x40gb")
    config = write_config(tmp_path, mig_expected.config("x", {"devices": "all", "mig-enabled": False}))
    hooks = tmp_path / "hooks.json"
    hooks.write_text(json.dumps({"version": "v1", "hooks": {"pre-apply": [{"command": "/bin/true"}]}}))
    bad = run(installed, node, "apply", "--config", str(config), "--label", "x", "--hooks", str(hooks))
    assert bad.returncode == 2, bad.stdout
    assert "hooks.hooks: unknown hook 'pre-apply'" in bad.stdout and "apply-start, pre-apply-mode" in bad.stdout


@pytest.mark.parametrize(
    ("setup", "args", "code", "text"),
    [
        ("none", ("apply",), 2, "--config and --label (or GPUFLEET_MIG_CONFIG and GPUFLEET_MIG_LABEL) are required"),
        ("bad", ("apply", "--label", "x"), 2, "invalid MIG config"),
        ("label", ("apply", "--label", "nope"), 2, "label 'nope' is not in the config"),
        ("client", ("apply", "--label", "x"), 1, "GPU clients are still attached, so nothing was changed"),
    ],
)
def test_errors(installed: Path, sim_node: t.Any, tmp_path: Path, setup: str, args: tuple[str, ...], code: int, text: str) -> None:
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
