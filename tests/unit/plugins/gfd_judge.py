# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""NVIDIA's GPU Feature Discovery as the judge of our labels: built from
github.com/NVIDIA/k8s-device-plugin at the pin in tests/harness/go-tools.txt
(tests/harness/gfd.sh, cached), run one-shot against a simulated node with
the device plugin's config file, as a cluster's GFD runs beside the plugin."""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

from ansible_collections.gpufleet.nvidia.tests.unit.plugins import nvml_sim

ROOT = Path(__file__).resolve().parents[3]


@functools.cache
def binary() -> Path:
    """The gpu-feature-discovery binary (built once per pin and Go version, then cached)."""
    done = subprocess.run([str(ROOT / "tests" / "harness" / "gfd.sh")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    return Path(done.stdout.strip().splitlines()[-1])


def parse(text: str) -> dict[str, str]:
    """A features.d file's labels (comments and directives left out)."""
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def run(node: nvml_sim.SimNode, workdir: Path, config: str, machine: str | None = None) -> tuple[dict[str, str] | None, str]:
    """GFD's labels on `node` (None when it refused the node) and its log.

    config: the device plugin's config file; machine: the machine-type file's content, or None to let GFD read
    this machine's own (/sys/class/dmi/id/product_name), as a command run on the node does.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.yaml").write_text(config)
    output = workdir / "gfd-labels"
    argv = [str(binary()), "--oneshot", "--no-timestamp", "--use-node-feature-api=false", "--output-file=" + str(output)]
    argv.append("--config-file=" + str(workdir / "config.yaml"))
    if machine is not None:
        (workdir / "machine").write_text(machine)
        argv.append("--machine-type-file=" + str(workdir / "machine"))
    env = dict(os.environ, **node.env)
    env["LD_LIBRARY_PATH"] = str(nvml_sim.build().parent)
    done = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120, check=False)
    if done.returncode != 0:
        return None, done.stdout
    return parse(output.read_text()), done.stdout
