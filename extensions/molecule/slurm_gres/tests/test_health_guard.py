"""The health guard under Debian's real slurmctld and slurmd: jobs (srun, sbatch) on GPUs the verify role's health
layer passes run; a job given a GPU the layer marks critical is refused by the Prolog, Slurm drains the node with
the guard's reason (naming the GPU and the finding) and requeues a batch job held. The critical fault is real to
the layer: nvml-simctl writes the driver's Xid 79 line for GPU 2 into the kernel log verify reads, and the
verify role runs again. GPU 2 carries only 1c.3g.20gb MIG devices, so a job of that type lands on it through
slurmd's own device numbering, which the guard reads."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from contextlib import contextmanager

import pytest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "..", "_shared"))

# pylint: disable=wrong-import-position
from stack import node, run_role

GUARD = "/usr/local/sbin/gpufleet-slurm-health-guard"
KMSG = "/run/nvml-sim/kmsg"
REPORT = "/var/lib/gpufleet/verify.json"
JOB_MAP = "/run/dcgm-job-map"
ON_GPU_2 = "gpu:nvidia_a100_1c.3g.20gb:1"  # only GPU 2 has this MIG type
ON_GPU_0 = "gpu:nvidia_a100_3g.20gb:1"  # only GPU 0 has this one
WHOLE = "gpu:nvidia_a100-sxm4-40gb:4"  # GPUs 4-7
ONE_WHOLE = "gpu:nvidia_a100-sxm4-40gb:1"


def node_state(host) -> tuple[str, str]:
    out = node(host).check_output("sinfo -h -N -o '%T|%E'")
    state, _sep, reason = out.partition("|")
    return state.strip(), reason.strip()


def wait_for(host, what, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.5)


# What slurmctld says while the last job's allocation is being released: "completing" (then idle), "draining"
# (then drained). It takes a moment on a busy machine, so a state is judged once it has settled.
PASSING_STATES = ("completing", "draining")


def settled(host) -> tuple[str, str]:
    """The node's state and reason once the last job's allocation is released."""
    wait_for(host, lambda: node_state(host)[0] not in PASSING_STATES)
    return node_state(host)


def srun(host, gres: str):
    return node(host).run("timeout 60 srun -t 1 --gres=%s true", gres)


@pytest.fixture(scope="module")
def cluster(host):
    """slurmctld and slurmd on the node (munged runs from prepare), with the test slurm.conf (Prolog= from slurm_gres_prolog)."""
    node(host).run_expect([0], "cp -p %s %s.before", REPORT, REPORT)
    node(host).run_expect([0], "systemctl start slurmctld slurmd")
    # slurmctld keeps a drain across restarts: a second verify run starts from an undrained node too.
    wait_for(host, lambda: node(host).run("scontrol update NodeName=%s State=RESUME", host.backend.host).rc == 0 or node_state(host)[0] == "idle")
    assert wait_for(host, lambda: node_state(host)[0] == "idle"), node_state(host)
    yield
    node(host).run("scancel --quiet --user=root; systemctl stop slurmd slurmctld")
    for gpu in range(8):
        node(host).run("nvml-simctl inject clear --gpu %s", str(gpu))
    node(host).run(": > " + KMSG)
    node(host).run("mv %s.before %s", REPORT, REPORT)


def test_the_guard_is_root_owned_and_named_by_slurm_conf(host):
    f = node(host).file(GUARD)
    assert (f.user, f.group, f.mode) == ("root", "root", 0o755)
    lines = node(host).file("/etc/slurm/slurm.conf").content_string.splitlines()
    assert "Prolog=" + GUARD in lines and "Epilog=" + GUARD in lines
    settings = json.loads(node(host).file("/etc/gpufleet/slurm-health-guard.json").content_string)
    assert settings["reports"] == ["/var/lib/gpufleet/verify.json", "/var/lib/gpufleet/verify-boot.json"]
    assert (settings["guard"], settings["job_map_dir"]) == (True, JOB_MAP)


def test_jobs_on_healthy_gpus_run(host, cluster):
    for gres in (ON_GPU_2, ON_GPU_0, WHOLE):
        run = srun(host, gres)
        assert run.rc == 0, (gres, run.stderr)
    assert settled(host)[0] == "idle"


def job_map_files(host, job: str) -> list[str]:
    """The mapping files holding the job's id (dcgm-exporter's names only: <gpu id>[.<GPU instance id>])."""
    out = node(host).run("grep -lx %s %s/* 2>/dev/null", job, JOB_MAP).stdout
    return sorted(os.path.basename(path) for path in out.split() if re.match(r"^\d+(\.\d+)?$", os.path.basename(path)))


def test_a_job_sees_its_id_in_the_dcgm_job_mapping_of_its_gpu_until_it_ends(host, cluster):
    """From inside the job (srun, the Prolog has run): its id in the file of its GPU, named by DCGM's GPU id, which
    is NVML's index (the simulator's), and for a MIG device also in <gpu id>.<GPU instance id>. After: gone."""
    gpus = json.loads(node(host).check_output("nvml-simctl show"))["gpus"]
    gi = next(g["id"] for g in gpus[0]["gis"] if "3g.20gb" in g["profile_name"])
    inside = "echo $SLURM_JOB_ID; for f in %s/*; do grep -qx $SLURM_JOB_ID $f && echo ${f##*/}; done; true" % JOB_MAP
    for gres, wanted in ((ON_GPU_0, [["0", "0.%d" % gi]]), (ONE_WHOLE, [[str(i)] for i in range(4, 8)])):
        run = node(host).run("timeout 60 srun -t 1 --gres=%s sh -c %s", gres, inside)
        assert run.rc == 0, (gres, run.stderr)
        job, *seen = run.stdout.split()
        assert sorted(seen) in wanted, (gres, seen)
        # The Epilog runs once the job ends, after srun has returned.
        assert wait_for(host, lambda: job_map_files(host, job) == [], timeout=15), job_map_files(host, job)
    # Every job so far has ended: the files it emptied are gone.
    assert wait_for(host, lambda: node(host).check_output("ls -A %s", JOB_MAP).split() == [".lock"]), node(host).check_output("ls -A %s", JOB_MAP)


def test_a_job_on_a_critical_gpu_is_refused_and_the_node_drained_naming_it(host, cluster):
    gpu = json.loads(node(host).check_output("nvml-simctl show"))["gpus"][2]
    node(host).run_expect([0], "nvml-simctl inject xid --gpu 2 --xid 79")
    # Reports on the node only: the controller's fleet report stays the converge's.
    run = run_role(host, "verify", {"verify_report_dir": ""})
    assert not run.failed, run
    report = json.loads(node(host).file(REPORT).content_string)
    judged = next(c for c in report["checks"] if c["layer"] == "health")["observed"]["judged"]
    # What the guard reads of each finding: its check, severity and GPU (the finding also says what was seen and what to do).
    named = [{key: item[key] for key in ("check", "severity", "gpu")} for item in judged]
    assert {"check": "xid", "severity": "critical", "gpu": {"index": 2, "uuid": gpu["uuid"], "bus_id": gpu["bus_id"]}} in named

    # The other GPUs still take jobs: the guard judges each job's own GPUs.
    for gres in (ON_GPU_0, WHOLE):
        ok = srun(host, gres)
        assert ok.rc == 0, (gres, ok.stderr)

    refused = srun(host, ON_GPU_2)
    assert refused.rc != 0
    assert "Job prolog failed" in refused.stderr, refused.stderr
    state, reason = settled(host)
    assert state == "drained", (state, reason)
    bus = gpu["bus_id"].lower()[4:]
    assert reason.startswith("gpufleet health: GPU /dev/nvidia2 (PCI {0}, Slurm index ".format(bus)), reason
    assert "is critical: xid: Xid 79 (GPU has fallen off the bus)" in reason, reason

    # A batch job: requeued and held (slurm.conf(5), Prolog), the node drained again.
    node(host).run_expect([0], "scontrol update NodeName=%s State=RESUME", host.backend.host)
    job = node(host).check_output("sbatch --parsable -o /dev/null -t 1 --gres=%s --wrap true", ON_GPU_2)
    held = wait_for(host, lambda: "launch_failed_requeued_held" in node(host).check_output("scontrol show job %s", job))
    assert held, node(host).check_output("scontrol show job %s", job)
    assert settled(host)[0] == "drained"


# -- issue 37, fresh state: a report of an earlier boot, and a guard that cannot tell the job's GPUs ----------------


def test_the_verify_report_carries_the_boot_it_was_read_in(host):
    report = json.loads(node(host).file(REPORT).content_string)
    assert report["boot_id"] == node(host).file("/proc/sys/kernel/random/boot_id").content_string.strip()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", report["time"]), report["time"]


@contextmanager
def rebooted(host):
    """The node as after a reboot, to the guard: another boot id (a bind mount over the kernel's file, which the
    privileged node's slurmd sees too). The kernel log still has the Xid: only verify reads it, and verify does not run."""
    node(host).run_expect([0], "echo 00000000-0000-4000-8000-0000000000b2 > /run/next-boot-id")
    node(host).run_expect([0], "mount --bind /run/next-boot-id /proc/sys/kernel/random/boot_id")
    try:
        yield
    finally:
        node(host).run("umount /proc/sys/kernel/random/boot_id")


def test_a_report_from_before_a_reboot_does_not_drain_the_node(host, cluster):
    """The report still marks GPU 2 critical (the test above); then the node reboots, which clears an Xid 79. The
    guard ignores the findings of the earlier boot: the job on GPU 2 runs, and the node stays in service."""
    report = json.loads(node(host).file(REPORT).content_string)
    assert any(f["severity"] == "error" and "Xid 79" in f["message"] for c in report["checks"] for f in c["findings"]), "no critical report"
    node(host).run_expect([0], "scontrol update NodeName=%s State=RESUME", host.backend.host)
    assert wait_for(host, lambda: node_state(host)[0] == "idle"), node_state(host)
    since = node(host).check_output("date '+%Y-%m-%d %H:%M:%S'")
    with rebooted(host):
        run = srun(host, ON_GPU_2)
        assert run.rc == 0, run.stderr
        assert settled(host)[0] == "idle", node_state(host)
    said = node(host).check_output("journalctl -q --no-pager -t gpufleet-slurm-health-guard --since %s", since)
    assert "verify.json: stale (read in an earlier boot, {0}".format(report["boot_id"]) in said, said
    # In the boot it was read in, the same report refuses the GPU again.
    assert srun(host, ON_GPU_2).rc != 0
    assert settled(host)[0] == "drained"


def test_the_guard_fails_closed_where_slurmd_is_not_where_it_looks(host, cluster):
    """Slurm installed elsewhere than the guard's settings say: with a GPU critical, the guard cannot tell whether
    the job has it, so it refuses the job and drains the node saying why and what to set - not run it."""
    settings = "/etc/gpufleet/slurm-health-guard.json"
    node(host).run_expect([0], "cp -p %s %s.before", settings, settings)
    moved = dict(json.loads(node(host).file(settings).content_string), slurmd="/opt/slurm/sbin/slurmd")
    try:
        node(host).run_expect([0], "printf '%%s\\n' %s > %s", json.dumps(moved), settings)
        node(host).run_expect([0], "scontrol update NodeName=%s State=RESUME", host.backend.host)
        assert wait_for(host, lambda: node_state(host)[0] == "idle"), node_state(host)
        refused = srun(host, ON_GPU_0)  # a healthy GPU: still refused, the guard cannot tell it from GPU 2
        assert refused.rc != 0 and "Job prolog failed" in refused.stderr, refused.stderr
        state, reason = settled(host)
        assert state == "drained", (state, reason)
        assert reason.startswith("gpufleet health guard cannot judge the GPUs: cannot run /opt/slurm/sbin/slurmd -G"), reason
        assert "set slurm_gres_slurmd_path" in reason, reason
    finally:
        node(host).run("mv %s.before %s", settings, settings)


def test_preflight_refuses_a_slurmd_path_that_is_not_there_before_touching_the_node(host):
    before = node(host).file("/etc/gpufleet/slurm-health-guard.json").content_string
    run = run_role(host, "slurm_gres", {"slurm_gres_slurmd_path": "/opt/slurm/sbin/slurmd", "slurm_gres_scontrol_path": "scontrol"})
    assert run.failed, run
    assert "slurm_gres_slurmd_path: /opt/slurm/sbin/slurmd is not an executable file on the node; set it to where slurmd is" in run.output, run
    assert "slurm_gres_scontrol_path must be an absolute path (a Prolog has no search path), not " in run.output, run
    assert node(host).file("/etc/gpufleet/slurm-health-guard.json").content_string == before
