"""The nvidia-smi stand-in of a simulated node: -L and --gpu-reset."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any, Dict

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SIM_DIR = os.path.join(ROOT, "tests", "nvml-sim")
NODES_DIR = os.path.join(SIM_DIR, "nodes")
NVIDIA_SMI = os.path.join(SIM_DIR, "nvidia-smi")


@pytest.fixture
def node(tmp_path: Any, simctl: Any) -> Dict[str, str]:
    """dgx-a100-mig-mixed rendered into tmp_path; returns the environment that points at it."""
    env = dict(os.environ, NVML_SIM_STATE=str(tmp_path / "state"), NVML_SIM_RUNDIR=str(tmp_path / "run"))
    env.pop("NVML_SIM_EUID", None)
    state = simctl.render_node(os.path.join(NODES_DIR, "dgx-a100-mig-mixed.yml"))
    with simctl.locked(env["NVML_SIM_STATE"]):
        simctl.write_state(env["NVML_SIM_STATE"], state)
    simctl.mark_booted(env["NVML_SIM_RUNDIR"])
    return env


def smi(env: Dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, NVIDIA_SMI, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)


def gpus(simctl: Any, env: Dict[str, str]) -> Any:
    return simctl.show_state(simctl.read_state(env["NVML_SIM_STATE"]), "", "")["gpus"]


def test_list_shows_gpus_and_mig_devices(node: Dict[str, str], simctl: Any) -> None:
    out = smi(node, "-L")
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    shown = gpus(simctl, node)
    assert lines[0] == "GPU 0: NVIDIA A100-SXM4-40GB (UUID: {0})".format(shown[0]["uuid"])
    mig = [line for line in lines if line.startswith("  MIG ")]
    assert len(mig) == sum(len(gi["cis"]) for g in shown for gi in g["gis"])
    assert any("MIG 1c.3g.20gb" in line for line in mig)
    assert sum(1 for line in lines if line.startswith("GPU ")) == len(shown)


def test_reset_applies_the_pending_mode_and_drops_instances(node: Dict[str, str], simctl: Any) -> None:
    before = gpus(simctl, node)
    assert (before[4]["mig_current"], before[4]["mig_pending"]) == (0, 1)
    out = smi(node, "--gpu-reset", "-i", "4")
    assert out.returncode == 0 and "GPU 00000000:87:00.0 was successfully reset." in out.stdout
    assert (gpus(simctl, node)[4]["mig_current"], gpus(simctl, node)[4]["mig_pending"]) == (1, 1)
    assert smi(node, "-r", "-i", "0,3").returncode == 0
    after = gpus(simctl, node)
    assert after[0]["gis"] == [] and after[0]["mig_current"] == 1
    assert after[2]["gis"] == before[2]["gis"]  # untouched


def test_reset_refuses_a_gpu_held_by_a_process(node: Dict[str, str], simctl: Any) -> None:
    before = open(node["NVML_SIM_STATE"], encoding="utf-8").read()
    out = smi(node, "--gpu-reset", "-i", "1")
    assert out.returncode == 255
    assert "GPU 00000000:0F:00.0: In use by another client" in out.stdout
    assert open(node["NVML_SIM_STATE"], encoding="utf-8").read() == before
    del simctl


@pytest.mark.parametrize(
    ("args", "env", "code", "text"),
    [
        (("--gpu-reset", "-i", "0"), {"NVML_SIM_EUID": "1000"}, 4, "Insufficient Permissions"),
        (("--gpu-reset", "-i", "9"), {}, 6, "No devices were found"),
        (("--gpu-reset",), {}, 2, ""),
        (("-q",), {}, 2, ""),
    ],
)
def test_errors(node: Dict[str, str], args: Any, env: Dict[str, str], code: int, text: str) -> None:
    out = smi(dict(node, **env), *args)
    assert out.returncode == code and text in out.stdout


def test_no_driver(node: Dict[str, str], simctl: Any) -> None:
    with simctl.editing(node["NVML_SIM_STATE"]) as state:
        state.system().fields["driver_loaded"] = "0"
    out = smi(node, "-L")
    assert out.returncode == 9 and "couldn't communicate with the NVIDIA driver" in out.stdout


def test_a_missing_boot_marker_means_a_boot_first(node: Dict[str, str], simctl: Any) -> None:
    os.unlink(os.path.join(node["NVML_SIM_RUNDIR"], "booted"))
    assert smi(node, "-L").returncode == 0
    shown = gpus(simctl, node)
    assert all(g["gis"] == [] for g in shown) and shown[4]["mig_current"] == 1
