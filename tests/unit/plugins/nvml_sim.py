# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Drive tests/nvml-sim from the unit tests.

Builds the simulated libnvidia-ml.so.1, renders node fixtures into private
state files, reads them back with `simctl.py show`, injects faults, and runs
our modules against the simulator in a subprocess each (see module_runner).
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import typing as t
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SIM_DIR = ROOT / "tests" / "nvml-sim"
SIM_LIBRARY = SIM_DIR / "build" / "libnvidia-ml.so.1"
SIMCTL = SIM_DIR / "simctl.py"
NODES_DIR = SIM_DIR / "nodes"
RUNNER = "ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_runner"


def node_fixtures() -> list[Path]:
    return sorted(NODES_DIR.glob("*.yml"))


@functools.cache
def build() -> Path:
    """Build the simulator and return a private copy of the library.

    The copy (one per test process) keeps a run stable while someone rebuilds
    tests/nvml-sim/build in the same checkout.
    """
    proc = subprocess.run(
        ["make", "-s", "-C", str(SIM_DIR)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        check=False,
    )
    if proc.returncode != 0 or not SIM_LIBRARY.is_file():
        raise RuntimeError("building nvml-sim failed:\n" + proc.stdout.decode(errors="replace"))
    private = Path(tempfile.mkdtemp(prefix="nvml-sim-lib-"))
    atexit.register(shutil.rmtree, str(private), True)
    copy = private / SIM_LIBRARY.name
    shutil.copy2(str(SIM_LIBRARY), str(copy))
    return copy


def _subprocess_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    # The child imports ansible_collections.* exactly as this process does.
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    env.update(extra or {})
    return env


def run_module_subprocess(
    name: str,
    args: dict[str, t.Any],
    workdir: Path,
    env: dict[str, str] | None = None,
) -> dict[str, t.Any]:
    """Run plugins/modules/<name> in a fresh interpreter; see module_runner.run_module."""
    workdir.mkdir(parents=True, exist_ok=True)
    args_path, out_path = workdir / "module-args.json", workdir / "module-outcome.json"
    args_path.write_text(json.dumps(args), encoding="utf-8")
    if out_path.exists():
        out_path.unlink()
    proc = subprocess.run(
        [sys.executable, "-m", RUNNER, name, str(args_path), str(out_path)],
        env=_subprocess_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        check=False,
        timeout=120,
    )
    if proc.returncode != 0 or not out_path.exists():
        # A crash of the interpreter itself (e.g. a segfault inside the library).
        return {
            "kind": "crash",
            "result": None,
            "traceback": "rc={0}\n{1}".format(proc.returncode, proc.stderr.decode(errors="replace")),
            "resolved": [],
        }
    outcome = json.loads(out_path.read_text(encoding="utf-8"))
    outcome["stderr"] = proc.stderr.decode(errors="replace")
    return outcome


class SimNode:
    """One simulated node: a private state file and boot-marker directory."""

    def __init__(self, workdir: Path, fixture: Path | str, booted: bool = True) -> None:
        self.workdir = workdir
        self.fixture = Path(fixture) if os.sep in str(fixture) else NODES_DIR / "{0}.yml".format(fixture)
        self.state = workdir / "state"
        self.rundir = workdir / "run"
        workdir.mkdir(parents=True, exist_ok=True)
        cmd = ["render", str(self.fixture), "-o", str(self.state)]
        self.simctl(*(cmd + (["--booted"] if booted else [])))

    @property
    def env(self) -> dict[str, str]:
        return {"NVML_SIM_STATE": str(self.state), "NVML_SIM_RUNDIR": str(self.rundir)}

    def simctl(self, *args: str) -> str:
        cmd = [sys.executable, str(SIMCTL)] + list(args)
        if args[0] != "errors":
            cmd += ["--state", str(self.state), "--rundir", str(self.rundir)]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
        if proc.returncode != 0:
            raise RuntimeError("simctl {0} failed: {1}".format(" ".join(args), proc.stderr.decode(errors="replace")))
        return proc.stdout.decode()

    def show(self) -> dict[str, t.Any]:
        return json.loads(self.simctl("show"))

    def fault(self, call: str, error: str | int, once: bool = False, skip: int = 0, gpu: int | None = None) -> None:
        args = ["fault", "add", call, str(error), "--once" if once else "--always"]
        if skip:
            args += ["--skip", str(skip)]
        if gpu is not None:
            args += ["--gpu", str(gpu)]
        self.simctl(*args)

    def set(self, *assignments: str, gpu: int | None = None) -> None:
        args = ["set"] + list(assignments)
        if gpu is not None:
            args += ["--gpu", str(gpu)]
        self.simctl(*args)

    def run(self, name: str = "nvml_info", extra_env: dict[str, str] | None = None, **args: t.Any) -> dict[str, t.Any]:
        args.setdefault("library", str(build()))
        env = dict(self.env)
        env.update(extra_env or {})
        return run_module_subprocess(name, args, self.workdir / "module", env)
