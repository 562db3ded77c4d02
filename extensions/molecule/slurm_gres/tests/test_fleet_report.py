"""The fleet report verify wrote on the controller shows this node as the schedulers see it: its labels' key
values (as the node_labels role wrote them for nfd-worker) and the Gres= value the real slurmd accepts."""

from __future__ import annotations

import os
import re
import sys
from collections import Counter

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "..", "_shared"))

# pylint: disable=wrong-import-position
from stack import node

REPORTS = os.path.join(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", ""), "reports")
FEATURES = "/etc/kubernetes/node-feature-discovery/features.d/gpufleet-gpu"
# By hand for dgx-a100-mig-mixed (GFD's rules): the GPU's product and memory, 8 GPUs, mixed MIG.
LABELS = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB", "nvidia.com/gpu.memory": "40960", "nvidia.com/gpu.count": "8", "nvidia.com/mig.strategy": "mixed"}


def schedulers_row(host) -> list[str]:
    with open(os.path.join(REPORTS, "fleet-report.md"), encoding="utf-8") as handle:
        text = handle.read()
    section = text.split("## What the schedulers see", 1)[1].split("\n## ", 1)[0]
    row = next(line for line in section.splitlines() if line.startswith("| {0} |".format(host.backend.host)))
    return [cell.strip() for cell in row.strip("|").split("|")]


def test_the_labels_columns_are_the_labels_on_the_node(host):
    written = dict(line.split("=", 1) for line in node(host).file(FEATURES).content_string.splitlines() if "=" in line and not line.startswith("#"))
    assert {key: written[key] for key in LABELS} == LABELS
    _host, product, memory, count, strategy, _slurm = schedulers_row(host)
    assert (product, memory, count, strategy) == ("NVIDIA-A100-SXM4-40GB", "40960 MiB", "8", "mixed")


def test_the_slurm_column_is_the_gres_value_slurmd_accepts(host):
    gres = schedulers_row(host)[5]
    conf = node(host).file("/etc/slurm/slurm.conf").content_string
    assert gres == "Gres=" + re.search(r"^NodeName=.* Gres=(\S+)", conf, re.MULTILINE).group(1)
    run = node(host).run("slurmd -G -f /etc/slurm/slurm.conf")
    assert run.rc == 0, run.stderr
    found = Counter()
    for match in re.finditer(r"Gres Name=gpu Type=(\S+) Count=(\d+) ", run.stdout + run.stderr):
        found[match.group(1)] += int(match.group(2))
    assert dict(found) == {t: int(c) for _g, t, c in (item.split(":") for item in gres[len("Gres=") :].split(","))}
    with open(os.path.join(REPORTS, "fleet-report.html"), encoding="utf-8") as handle:
        assert gres in handle.read()
