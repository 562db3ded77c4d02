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

from ansible_collections.gpufleet.nvidia.plugins.filter.verify import verify_report

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


@pytest.fixture
def scontrol(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A stand-in scontrol that records its arguments, one call a line; the node's name for the drain."""
    calls = tmp_path / "scontrol.calls"
    command = tmp_path / "scontrol"
    command.write_text("#!/bin/sh\nprintf '%s|' \"$@\" >> {0}\necho >> {0}\n".format(calls))
    command.chmod(0o755)
    monkeypatch.setenv("SLURMD_NODENAME", "gpu-01")

    def drains() -> list[str]:
        return [line.rstrip("|") for line in calls.read_text().splitlines()] if calls.exists() else []

    return str(command), drains


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
    assert "boot.json: stale (read in an earlier boot, an-earlier-boot, at an unknown time; this boot is this-boot)" in capsys.readouterr().err
    assert guard.guard(node({"boot.json": stale}, missing="refuse")) == guard.BROKEN


def test_a_verify_report_from_before_a_reboot_does_not_refuse_the_job_or_drain_the_node(node, scontrol, monkeypatch, capsys):
    """Issue 37 (fresh state): verify marked GPU 2 critical (Xid 79), then the node rebooted, which cleared it. The
    report as the verify role writes it (verify_report) carries the boot it was read in; in the next boot the
    guard ignores its findings, says why, and the job on GPU 2 runs. In the boot it was read in, it refuses."""
    command, drains = scontrol
    check = dict(VERIFY_REPORT["checks"][0], status="fail", summary="1 critical")
    report = json.loads(json.dumps(verify_report([check], "gpu-01", {}, {}, boot_id="a-boot-before-the-reboot", time="2026-01-02T03:04:05Z")))
    report["gpus"] = VERIFY_REPORT["gpus"]
    monkeypatch.setenv("SLURM_JOB_GPUS", "1")  # slurmd's index 1: GPU 2, the one the report marks critical
    assert guard.guard(dict(node({"verify.json": report}), scontrol=command)) == guard.ALLOW
    said = capsys.readouterr().err
    assert "verify.json: stale (read in an earlier boot, a-boot-before-the-reboot, at 2026-01-02T03:04:05Z; this boot is this-boot)" in said
    assert "its findings are ignored" in said
    assert drains() == []
    # The same report in the boot it was read in: the GPU is refused and the node drained naming it.
    report["boot_id"] = "this-boot"
    assert guard.guard(dict(node({"verify.json": report}), scontrol=command)) == guard.REFUSE
    reason = "gpufleet health: GPU /dev/nvidia2 (PCI 0000:47:00.0, Slurm index 1) is critical: xid: Xid 79 on GPU 2 (verify.json)"
    assert drains() == ["update|NodeName=gpu-01|State=DRAIN|Reason=" + reason]


def test_a_report_without_a_boot_id_is_judged_as_this_boots(node, monkeypatch):
    """Written before reports carried one: it cannot be told stale, so its findings count (the safe side)."""
    monkeypatch.setenv("SLURM_JOB_GPUS", "1")
    assert guard.guard(node({"verify.json": VERIFY_REPORT})) == guard.REFUSE


@pytest.mark.parametrize(
    "slurmd, why",
    [
        ("/nonexistent/sbin/slurmd", "cannot run /nonexistent/sbin/slurmd -G ([Errno 2] No such file or directory"),
        ("", "no slurmd in /etc/gpufleet/slurm-health-guard.json"),
        ("/bin/false", "/bin/false -G exited 1: no output"),
        ("/bin/true", "/bin/true -G lists no GPU index 1 (0 listed)"),
    ],
)
def test_the_guard_fails_closed_when_it_cannot_tell_the_jobs_gpus(node, scontrol, monkeypatch, capsys, slurmd, why):
    """Issue 37 (fresh state): a GPU is critical and slurmd -G does not answer where the settings say (Slurm lives
    elsewhere), fails, or lists too few GPUs. The guard cannot tell whether the job has the critical GPU: it refuses
    the job, even with missing: allow, and drains the node with a reason that says why (sinfo -R shows it)."""
    command, drains = scontrol
    monkeypatch.setenv("SLURM_JOB_GPUS", "1")
    assert guard.guard(dict(node({"verify.json": VERIFY_REPORT}, missing="allow"), slurmd=slurmd, scontrol=command)) == guard.BROKEN
    assert "job 42 refused: the guard cannot tell whether GPUs 1 are the critical ones: " + why in capsys.readouterr().err
    (drain,) = drains()
    assert drain.startswith("update|NodeName=gpu-01|State=DRAIN|Reason=gpufleet health guard cannot judge the GPUs: " + why), drain
    assert len(drain.split("Reason=", 1)[1]) <= 250
    if slurmd.startswith("/nonexistent"):
        assert "set slurm_gres_slurmd_path to this node's slurmd" in drain


def test_the_guard_fails_closed_when_the_driver_does_not_show_the_jobs_gpu(node, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("SLURM_JOB_GPUS", "1")
    monkeypatch.setattr(guard, "DRIVER_GPUS", str(tmp_path / "nowhere" / "*" / "information"))
    assert guard.guard(node({"verify.json": VERIFY_REPORT})) == guard.BROKEN
    assert "GPU index 1 (/dev/nvidia2) has no GPU in " in capsys.readouterr().err


def test_no_critical_gpu_needs_no_slurmd(node, monkeypatch):
    """Nothing to refuse: the job runs without asking slurmd (a healthy node does not depend on the path)."""
    monkeypatch.setenv("SLURM_JOB_GPUS", "1")
    healthy = dict(VERIFY_REPORT, checks=[dict(VERIFY_REPORT["checks"][0], findings=[])])
    assert guard.guard(dict(node({"verify.json": healthy}), slurmd="/nonexistent/sbin/slurmd")) == guard.ALLOW


def test_unreadable_settings_refuse_the_job_but_never_fail_the_epilog(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(guard, "syslog", None)
    monkeypatch.setenv("GPUFLEET_SLURM_HEALTH_GUARD_CONFIG", str(tmp_path / "missing.json"))
    monkeypatch.setenv("SLURM_JOB_GPUS", "0")
    monkeypatch.setenv("SLURM_SCRIPT_CONTEXT", "prolog_slurmd")
    assert guard.main() == guard.BROKEN
    assert "refusing the job: run the slurm_gres role again" in capsys.readouterr().err
    monkeypatch.setenv("SLURM_SCRIPT_CONTEXT", "epilog_slurmd")
    assert guard.main() == guard.ALLOW


def test_no_report_allows_or_refuses_as_set(node, monkeypatch, capsys):
    monkeypatch.setenv("SLURM_JOB_GPUS", "1")
    assert guard.guard(node({"verify.json": None})) == guard.ALLOW
    assert "no health report to judge GPUs 1 by" in capsys.readouterr().err
    assert guard.guard(node({"verify.json": None}, missing="refuse")) == guard.BROKEN


# The dcgm-exporter HPC job mapping: the same script as Prolog and Epilog (SLURM_SCRIPT_CONTEXT).
# dgx-like node: minors 1, 2, 4 at buses 0f, 47, 87, and a GPU at bus 07 with minor 3: DCGM ids follow the bus order.
MIG_MINORS = "config 1\nmonitor 2\ngpu1/gi7/access 120\ngpu1/gi7/ci0/access 121\ngpu1/gi8/access 129\n"


@pytest.fixture
def mapped(node, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The node above with a GPU at bus 07 (minor 3), the driver's mig-minors, and the mapping directory set."""
    directory = tmp_path / "gpus" / "0000:07:00.0"
    directory.mkdir(parents=True)
    (directory / "information").write_text("GPU UUID: \t GPU-3\nBus Location: \t 0000:07:00.0\nDevice Minor: \t 3\n")
    (tmp_path / "mig-minors").write_text(MIG_MINORS)
    monkeypatch.setattr(guard, "MIG_MINORS", str(tmp_path / "mig-minors"))
    (tmp_path / "slurmd").write_text(
        "#!/bin/sh\ncat <<'EOF'\n"
        "slurmd: Gres Name=gpu Type=a_1g Count=1 Index=1 ID=1 File=/dev/nvidia1,/dev/nvidia-caps/nvidia-cap120,"
        "/dev/nvidia-caps/nvidia-cap121 Links=(null) Flags=HAS_MULT\n"
        "slurmd: Gres Name=gpu Type=a Count=2 Index=2 ID=1 File=/dev/nvidia[2,4] Links=(null) Flags=HAS_FILE\n"
        "EOF\n"
    )
    job_map = tmp_path / "job-map"

    def settings(**overrides) -> dict:
        config = dict(node({"verify.json": VERIFY_REPORT}), job_map_dir=str(job_map))
        config.update(overrides)
        monkeypatch.setenv("GPUFLEET_SLURM_HEALTH_GUARD_CONFIG", str(tmp_path / "guard.json"))
        (tmp_path / "guard.json").write_text(json.dumps(config))
        return config

    return settings, job_map


def run_as(monkeypatch: pytest.MonkeyPatch, context: str, job: str, gpus: str | None = None) -> int:
    monkeypatch.setenv("SLURM_SCRIPT_CONTEXT", context)
    monkeypatch.setenv("SLURM_JOB_ID", job)
    if gpus is None:
        monkeypatch.delenv("SLURM_JOB_GPUS", raising=False)
    else:
        monkeypatch.setenv("SLURM_JOB_GPUS", gpus)
    return guard.main()


def contents(job_map: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(job_map.iterdir())} if job_map.exists() else {}


def test_dcgm_ids_are_the_pci_bus_order():
    gpus = {4: {"bus": (0, 0x87, 0)}, 1: {"bus": (0, 0x0F, 0)}, 3: {"bus": (0, 0x07, 0)}, 2: {"bus": (0, 0x47, 0)}}
    assert guard.dcgm_gpu_ids(gpus) == {3: 0, 1: 1, 2: 2, 4: 3}
    assert guard.dcgm_gpu_ids({0: {"bus": (1, 0x01, 0)}, 1: {"bus": (0, 0xFF, 0)}}) == {1: 0, 0: 1}


def test_gpu_instances_come_from_the_gi_access_lines():
    assert guard.gpu_instances(MIG_MINORS) == {120: (1, 7), 129: (1, 8)}


def test_a_prolog_maps_whole_gpus_and_a_mig_device_by_dcgm_id(mapped, monkeypatch):
    settings, job_map = mapped
    settings()
    # slurmd index 0: the MIG device gi7 of minor 1 (bus 0f: DCGM id 1); 1: minor 2 (bus 47: id 2); 2: minor 4 (id 3).
    assert run_as(monkeypatch, "prolog_slurmd", "42", "0,2") == guard.ALLOW
    assert contents(job_map) == {".lock": "", "1": "42\n", "1.7": "42\n", "3": "42\n"}
    assert (job_map / "3").stat().st_mode & 0o777 == 0o644
    assert (job_map / ".lock").stat().st_mode & 0o777 == 0o600
    # A second job on a GPU of the first: appended, once however often its Prolog runs.
    assert run_as(monkeypatch, "prolog_slurmd", "43", "2") == guard.ALLOW
    assert run_as(monkeypatch, "prolog_slurmd", "43", "2") == guard.ALLOW
    assert contents(job_map)["3"] == "42\n43\n"


def test_an_epilog_takes_the_job_out_everywhere_and_removes_emptied_files(mapped, monkeypatch):
    settings, job_map = mapped
    settings()
    run_as(monkeypatch, "prolog_slurmd", "42", "0,2")
    run_as(monkeypatch, "prolog_slurmd", "43", "2")
    (job_map / "notes").write_text("42\n")  # not a mapping file name: left alone
    # The Epilog needs no GPU list: the id is the job's on every GPU.
    assert run_as(monkeypatch, "epilog_slurmd", "42") == guard.ALLOW
    assert contents(job_map) == {".lock": "", "3": "43\n", "notes": "42\n"}
    assert run_as(monkeypatch, "epilog_slurmd", "43", "2") == guard.ALLOW
    assert contents(job_map) == {".lock": "", "notes": "42\n"}


def test_a_refused_job_is_not_mapped(mapped, monkeypatch):
    settings, job_map = mapped
    settings()
    assert run_as(monkeypatch, "prolog_slurmd", "44", "1") == guard.REFUSE  # minor 2: critical in VERIFY_REPORT
    assert contents(job_map) == {}


def test_without_the_guard_the_prolog_only_maps(mapped, monkeypatch):
    settings, job_map = mapped
    settings(guard=False)
    assert run_as(monkeypatch, "prolog_slurmd", "44", "1") == guard.ALLOW
    assert contents(job_map)["2"] == "44\n"


def test_a_mapping_that_cannot_be_written_is_logged_and_the_job_runs(mapped, monkeypatch, tmp_path, capsys):
    settings, job_map = mapped
    job_map.write_text("a file where the directory should be")
    settings()
    assert run_as(monkeypatch, "prolog_slurmd", "45", "2") == guard.ALLOW
    assert "job 45: cannot write the job mapping in {0}".format(job_map) in capsys.readouterr().err
    # A bug or a broken slurmd -G is the same for the mapping: logged, the job runs, the Epilog exits 0. (With the
    # guard on and a critical GPU, a broken slurmd -G refuses the job: the guard fails closed, tested above.)
    settings(slurmd=str(tmp_path / "no-such-slurmd"), guard=False)
    job_map.unlink()
    assert run_as(monkeypatch, "prolog_slurmd", "46", "2") == guard.ALLOW
    assert "job 46: cannot write the job mapping" in capsys.readouterr().err
    assert run_as(monkeypatch, "epilog_slurmd", "46") == guard.ALLOW


def test_gpus_the_node_cannot_place_are_logged_and_the_rest_mapped(mapped, monkeypatch, capsys):
    settings, job_map = mapped
    settings(guard=False)  # the guard would refuse the job: it cannot place GPU 9 while GPU 2 is critical
    assert run_as(monkeypatch, "prolog_slurmd", "47", "2,9") == guard.ALLOW
    assert "job 47: not in the job mapping: slurmd -G lists no GPU index 9 (3 listed)" in capsys.readouterr().err
    assert contents(job_map)["3"] == "47\n"


def test_concurrent_prologs_and_epilogs_lose_no_job(mapped, monkeypatch):
    """Jobs sharing a GPU start and end at once, in separate processes (slurmd forks one per job): the flock
    keeps each read-and-rewrite whole, so every id that went in and was not taken out is there."""
    settings, job_map = mapped
    settings(guard=False)
    import multiprocessing  # pylint: disable=import-outside-toplevel

    def one(job: int) -> None:
        for context in ("prolog_slurmd",) if job % 3 else ("prolog_slurmd", "epilog_slurmd"):
            run_as(monkeypatch, context, str(job), "2")

    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=one, args=(job,)) for job in range(1, 41)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
        assert worker.exitcode == 0
    kept = sorted(int(line) for line in (job_map / "3").read_text().split())
    assert kept == [job for job in range(1, 41) if job % 3]
    assert sorted(p.name for p in job_map.iterdir()) == [".lock", "3"]  # no temporary file left
