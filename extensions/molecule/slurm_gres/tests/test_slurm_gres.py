"""Debian's real slurmd reads the role's gres.conf and slurm.conf (with the role's Gres= fact) and finds the GRES
worked out by hand for dgx-a100-mig-mixed from Slurm's gpu/nvml naming rule."""

from __future__ import annotations

import os
import re
import sys
from collections import Counter

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "..", "_shared"))

# pylint: disable=wrong-import-position
from stack import node, run_role

# By hand: GPU 0 3g.20gb + 2g.10gb + 1g.5gb x2, GPU 1 1g.5gb x7, GPU 2 1c.3g.20gb x3,
# GPU 3 MIG on without devices (none), GPUs 4-7 whole (4 with its MIG change still pending).
EXPECTED = {
    "nvidia_a100_3g.20gb": 1,
    "nvidia_a100_2g.10gb": 1,
    "nvidia_a100_1g.5gb": 9,
    "nvidia_a100_1c.3g.20gb": 3,
    "nvidia_a100-sxm4-40gb": 4,
}
GRES_LINE = re.compile(r"Gres Name=gpu Type=(?P<type>\S+) Count=(?P<count>\d+) .*File=(?P<files>\S+) ")


def slurmd_gres(host, conf: str = "/etc/slurm/slurm.conf") -> tuple[list[dict], str]:
    run = node(host).run("slurmd -G -f %s", conf)
    assert run.rc == 0, run.stderr
    output = run.stdout + run.stderr
    return [m.groupdict() for m in GRES_LINE.finditer(output)], output


def test_slurmd_finds_the_expected_gres(host):
    gres, output = slurmd_gres(host)
    counts = Counter()
    for item in gres:
        counts[item["type"]] += int(item["count"])
    assert dict(counts) == EXPECTED, output
    # Nothing slurmd says about GRES is an error (its CPU and hwloc complaints are the container's);
    # the message after "error:", as the node's name holds "gres".
    complaints = [m.group(1) for m in re.finditer(r"(?:error|fatal): (.*)", output)]
    assert not [text for text in complaints if re.search(r"gres|gpu", text, re.IGNORECASE)], output


def test_every_gres_holds_device_files_that_exist(host):
    gres, output = slurmd_gres(host)
    files = [path for item in gres for path in item["files"].split(",")]
    assert len(gres) == sum(EXPECTED.values()), output
    for path in set(files):
        assert node(host).run("test -c %s", path).rc == 0, path
    # A MIG GRES holds its GPU and the caps of its GPU and compute instance.
    assert all(len(item["files"].split(",")) == 3 for item in gres if "_" in item["type"].split("nvidia_", 1)[1])
    assert "/dev/nvidia3" not in files


def test_slurm_conf_node_line_carries_the_fact(host):
    conf = node(host).file("/etc/slurm/slurm.conf").content_string
    line = next(line for line in conf.splitlines() if line.startswith("NodeName="))
    value = re.search(r"Gres=(\S+)", line).group(1)
    assert {t: int(c) for _g, t, c in (item.split(":") for item in value.split(","))} == EXPECTED


def test_cgroup_conf_keeps_the_site_lines_and_constrains_devices(host):
    conf = node(host).file("/etc/slurm/cgroup.conf").content_string.splitlines()
    assert conf == [
        "# the site's own",
        "CgroupPlugin=autodetect",
        "ConstrainCores=yes",
        "# BEGIN gpufleet.nvidia slurm_gres",
        "ConstrainDevices=yes",
        "# END gpufleet.nvidia slurm_gres",
    ]


def test_files_are_root_owned_and_world_readable(host):
    for path in ("/etc/slurm/gres.conf", "/etc/slurm/cgroup.conf"):
        f = node(host).file(path)
        assert (f.user, f.group, f.mode) == ("root", "root", 0o644), path


def test_a_site_constraindevices_line_stops_the_role_before_it_writes(host):
    node(host).run_expect([0], "mkdir -p /tmp/gpufleet-slurm-site && printf 'ConstrainDevices=no\\n' > /tmp/gpufleet-slurm-site/cgroup.conf")
    run = run_role(host, "slurm_gres", {"slurm_gres_config_dir": "/tmp/gpufleet-slurm-site"})
    assert run.failed, run
    assert "cgroup.conf line 1 sets 'ConstrainDevices=no' outside the block slurm_gres manages" in run.output, run
    assert not node(host).file("/tmp/gpufleet-slurm-site/gres.conf").exists


def test_autodetect_nvml_agrees_with_the_explicit_lines(host):
    """Slurm's own gpu/nvml plugin against the simulated NVML names and files every GRES as the role does."""
    node(host).run_expect(
        [0],
        "mkdir -p /tmp/gpufleet-autodetect && cp /etc/slurm/slurm.conf /tmp/gpufleet-autodetect/ && echo AutoDetect=nvml >/tmp/gpufleet-autodetect/gres.conf",
    )
    explicit = slurmd_gres(host)[0]
    detected, output = slurmd_gres(host, "/tmp/gpufleet-autodetect/slurm.conf")
    assert "_get_system_gpu_list_nvml: 8 GPU system device(s) detected" in output, output
    explicit_set = {(item["type"], item["files"]) for item in explicit}
    detected_set = {(item["type"], item["files"]) for item in detected}
    # The one difference, by design: GPU 3 (MIG on, no MIG devices) is offered whole by the plugin,
    # which then, held to slurm.conf's count of 4 whole GPUs, leaves a good one (GPU 7) out.
    whole = "nvidia_a100-sxm4-40gb"
    assert detected_set == (explicit_set - {(whole, "/dev/nvidia7")}) | {(whole, "/dev/nvidia3")}, output
