# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpufleet-slurm-health-guard, slurm_gres's Prolog: how it reads slurmd -G, the driver's GPU files and the two
health reports, and what it decides. The scenario (extensions/molecule/slurm_gres) runs it under the real slurmd."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import stat
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
COMMAND = ROOT / "roles" / "slurm_gres" / "files" / "gpufleet-slurm-health-guard"


def load_guard():
    loader = importlib.machinery.SourceFileLoader("slurm_health_guard", str(COMMAND))
    spec = importlib.util.spec_from_loader("slurm_health_guard", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


guard = load_guard()

# slurmd -G (24.11, _log_gres_slurmd_conf's DebugFlags=Gres form): a MIG device, two whole GPUs on one line, MPS.
SLURMD_G = (
    "slurmd: Gres Name=gpu Type=nvidia_a100_1g.5gb Count=1 Index=0 ID=7696487"
    " File=/dev/nvidia1,/dev/nvidia-caps/nvidia-cap138,/dev/nvidia-caps/nvidia-cap139 Links=(null) Flags=HAS_FILE,HAS_MULT\n"
    "slurmd: Gres Name=gpu Type=nvidia_a100-sxm4-40gb Count=2 Index=4 ID=7696487 File=/dev/nvidia[4-5] Cores=0-3 CoreCnt=4"
    " Links=(null) Flags=HAS_FILE\n"
    "slurmd: Gres Name=mps Type=(null) Count=100 Index=0 ID=7467891 File=/dev/nvidia0 Links=(null) Flags=HAS_FILE\n"
)


def test_slurmd_devices_numbers_as_slurmd_does():
    devices = guard.slurmd_devices(SLURMD_G)
    assert devices == [
        ["/dev/nvidia1", "/dev/nvidia-caps/nvidia-cap138", "/dev/nvidia-caps/nvidia-cap139"],
        ["/dev/nvidia4"],
        ["/dev/nvidia5"],
    ]


def test_expand_takes_slurm_ranges():
    assert guard.expand("/dev/nvidia[0-2,7]") == ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia2", "/dev/nvidia7"]
    assert guard.expand("/dev/nvidia3") == ["/dev/nvidia3"]


def test_bus_keys_of_nvml_and_the_driver_agree():
    assert guard.bus_key("00000000:47:00.0") == guard.bus_key("0000:47:00.0") == (0, 0x47, 0)
    assert guard.bus_key("not a bus") is None


VERIFY_REPORT = {
    "checks": [
        {
            "layer": "health",
            "observed": {
                "judged": [
                    {"check": "service_persistenced", "gpu": None, "severity": "critical"},
                    {"check": "xid", "gpu": {"bus_id": "00000000:47:00.0", "index": 2, "uuid": "GPU-2"}, "severity": "critical"},
                    {"check": "pcie_width", "gpu": {"bus_id": "00000000:07:00.0", "index": 0, "uuid": "GPU-0"}, "severity": "warn"},
                ]
            },
            "findings": [
                {"subject": "node", "severity": "error", "message": "service_persistenced: not installed"},
                {"subject": "GPU 2", "severity": "error", "message": "xid: Xid 79 on GPU 2"},
                {"subject": "GPU 0", "severity": "warning", "message": "pcie_width: x8 on GPU 0"},
            ],
        }
    ],
    "gpus": [{"index": 0, "uuid": "GPU-0"}, {"index": 2, "uuid": "GPU-2"}],
}
BOOT_REPORT = {
    "boot_id": "this-boot",
    "checks": [{"layer": "health", "findings": [{"subject": "GPU 1", "severity": "error", "message": "gpu_lost on GPU 1"}]}],
    "gpus": [{"index": 1, "uuid": "GPU-1", "pci": {"bus_id": "00000000:0F:00.0"}}],
}


def test_only_critical_gpu_findings_count_in_either_report():
    assert guard.critical_gpus(VERIFY_REPORT) == {(0, 0x47, 0): ["xid: Xid 79 on GPU 2"]}
    assert guard.critical_gpus(BOOT_REPORT) == {(0, 0x0F, 0): ["gpu_lost on GPU 1"]}


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A node: the driver's GPU files for minors 1, 2 and 4, a boot id, a stand-in slurmd -G, the guard's settings."""
    for minor, bus in ((1, "0000:0f:00.0"), (2, "0000:47:00.0"), (4, "0000:87:00.0")):
        directory = tmp_path / "gpus" / bus
        directory.mkdir(parents=True)
        (directory / "information").write_text("GPU UUID: \t GPU-{0}\nBus Location: \t {1}\nDevice Minor: \t {0}\n".format(minor, bus))
    monkeypatch.setattr(guard, "DRIVER_GPUS", str(tmp_path / "gpus" / "*" / "information"))
    (tmp_path / "boot_id").write_text("this-boot\n")
    monkeypatch.setattr(guard, "BOOT_ID", str(tmp_path / "boot_id"))
    slurmd = tmp_path / "slurmd"
    # slurmd's index 0: a MIG device of GPU 1; 1: GPU 2 whole; 2: GPU 4 whole.
    slurmd.write_text(
        "#!/bin/sh\ncat <<'EOF'\n"
        "slurmd: Gres Name=gpu Type=a_1g Count=1 Index=1 ID=1 File=/dev/nvidia1,/dev/nvidia-caps/nvidia-cap12 Links=(null) Flags=HAS_MULT\n"
        "slurmd: Gres Name=gpu Type=a Count=2 Index=2 ID=1 File=/dev/nvidia[2,4] Links=(null) Flags=HAS_FILE\n"
        "EOF\n"
    )
    slurmd.chmod(slurmd.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(guard, "syslog", None)
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.delenv("SLURM_CONF", raising=False)
    monkeypatch.delenv("SLURMD_NODENAME", raising=False)

    def settings(reports: dict[str, dict], missing: str = "allow") -> dict:
        paths = []
        for name, report in reports.items():
            path = tmp_path / name
            if report is not None:
                path.write_text(json.dumps(report))
            paths.append(str(path))
        return {"reports": paths, "missing": missing, "slurmd": str(slurmd), "scontrol": ""}

    return settings


def test_a_job_on_the_critical_gpu_is_refused_naming_it(node, monkeypatch, capsys):
    monkeypatch.setenv("SLURM_JOB_GPUS", "2,1")
    assert guard.guard(node({"verify.json": VERIFY_REPORT})) == guard.REFUSE
    said = capsys.readouterr().err
    assert "job 42 refused: GPU /dev/nvidia2 (PCI 0000:47:00.0, Slurm index 1) is critical: xid: Xid 79 on GPU 2 (verify.json)" in said


def test_a_mig_device_is_judged_by_its_gpu(node, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_GPUS", "0")
    assert guard.guard(node({"verify.json": VERIFY_REPORT, "boot.json": BOOT_REPORT})) == guard.REFUSE
    assert guard.guard(node({"verify.json": VERIFY_REPORT})) == guard.ALLOW


def test_jobs_on_other_gpus_and_without_gpus_run(node, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_GPUS", "2")
    assert guard.guard(node({"verify.json": VERIFY_REPORT})) == guard.ALLOW
    monkeypatch.delenv("SLURM_JOB_GPUS")
    assert guard.guard(node({"verify.json": VERIFY_REPORT}, missing="refuse")) == guard.ALLOW


def test_a_boot_report_of_an_earlier_boot_is_no_judgement(node, monkeypatch, capsys):
    monkeypatch.setenv("SLURM_JOB_GPUS", "0")
    stale = dict(BOOT_REPORT, boot_id="an-earlier-boot")
    assert guard.guard(node({"boot.json": stale})) == guard.ALLOW
    assert "boot.json: stale (written in an earlier boot)" in capsys.readouterr().err
    assert guard.guard(node({"boot.json": stale}, missing="refuse")) == guard.BROKEN


def test_no_report_allows_or_refuses_as_set(node, monkeypatch, capsys):
    monkeypatch.setenv("SLURM_JOB_GPUS", "1")
    assert guard.guard(node({"verify.json": None})) == guard.ALLOW
    assert "no health report to judge GPUs 1 by" in capsys.readouterr().err
    assert guard.guard(node({"verify.json": None}, missing="refuse")) == guard.BROKEN
