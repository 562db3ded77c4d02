"""--check --diff on a changed declaration shows the gres.conf change before it is made: a node written with
slurm_gres_autodetect: nvml, now declared "off" (the default), shows the AutoDetect line going and the explicit
lines coming, and its gres.conf stays as it was."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "..", "_shared"))

# pylint: disable=wrong-import-position
from stack import node, sha256

DIR = "/tmp/gpufleet-slurm-diff"


def test_check_diff_shows_the_gres_conf_change_before_it_is_made(host):
    node(host).run_expect([0], "mkdir -p %s && printf '# written with slurm_gres_autodetect: nvml\\nAutoDetect=nvml\\n' > %s/gres.conf", DIR, DIR)
    before = sha256(host, DIR + "/gres.conf")
    play = [{"name": "check --diff", "hosts": host.backend.host, "gather_facts": False, "roles": [{"role": "gpufleet.nvidia.slurm_gres"}]}]
    with tempfile.TemporaryDirectory() as tmp:
        book = os.path.join(tmp, "play.yml")
        with open(book, "w", encoding="utf-8") as handle:
            yaml.safe_dump(play, handle)
        varfile = os.path.join(tmp, "vars.json")
        with open(varfile, "w", encoding="utf-8") as handle:
            json.dump({"slurm_gres_config_dir": DIR, "slurm_gres_autodetect": "off"}, handle)
        run = subprocess.run(
            ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], book, "-e", "@" + varfile, "--check", "--diff"],
            capture_output=True,
            text=True,
            check=False,
            env=dict(os.environ, ANSIBLE_NOCOLOR="1"),
        )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr
    assert "-AutoDetect=nvml" in run.stdout, run.stdout[-4000:]
    assert "+Name=gpu Type=nvidia_a100-sxm4-40gb File=/dev/nvidia4" in run.stdout, run.stdout[-4000:]
    assert sha256(host, DIR + "/gres.conf") == before
