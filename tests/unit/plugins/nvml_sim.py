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
import contextlib
import functools
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import types
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
    """Run plugins/modules/<name> in a process of its own; see module_runner.run_module.

    The process is forked from the runner's zygote (module_runner.serve), which has imported the runner
    and never loads a library, so each run still starts with no NVML mapped, for a fork's cost instead
    of an interpreter's. A run whose environment changes what the dynamic loader reads at start
    (LD_LIBRARY_PATH, LD_PRELOAD) gets a fresh interpreter: a forked child keeps its parent's loader.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    args_path, out_path = workdir / "module-args.json", workdir / "module-outcome.json"
    args_path.write_text(json.dumps(args), encoding="utf-8")
    if out_path.exists():
        out_path.unlink()
    child_env = _subprocess_env(env)
    if any(child_env.get(var) != os.environ.get(var) for var in LOADER_VARIABLES):
        proc = subprocess.run(
            [sys.executable, "-m", RUNNER, name, str(args_path), str(out_path)],
            env=child_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            check=False,
            timeout=RUN_TIMEOUT,
        )
        returncode, stderr = proc.returncode, proc.stderr.decode(errors="replace")
    else:
        stderr_path = workdir / "module-stderr.txt"
        returncode = _zygote().run(name, args_path, out_path, stderr_path, child_env)
        stderr = stderr_path.read_text(encoding="utf-8", errors="replace")
    if returncode != 0 or not out_path.exists():
        # A crash of the interpreter itself (e.g. a segfault inside the library).
        return {
            "kind": "crash",
            "result": None,
            "traceback": "rc={0}\n{1}".format(returncode, stderr),
            "resolved": [],
        }
    outcome = json.loads(out_path.read_text(encoding="utf-8"))
    outcome["stderr"] = stderr
    return outcome


# What the dynamic loader reads once, when a process starts.
LOADER_VARIABLES = ("LD_LIBRARY_PATH", "LD_PRELOAD")
RUN_TIMEOUT = 120


class _Zygote:
    """The runner's zygote (module_runner.serve): one request a line in, one exit status a line out."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", RUNNER, "--serve"],
            env=_subprocess_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        atexit.register(self.close)

    def run(self, name: str, args_path: Path, out_path: Path, stderr_path: Path, env: dict[str, str]) -> int:
        request = {
            "name": name,
            "args": str(args_path),
            "out": str(out_path),
            "stderr": str(stderr_path),
            "env": env,
            "cwd": os.getcwd(),
            "timeout": RUN_TIMEOUT,
        }
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            raise RuntimeError("the module runner's zygote ended (exit status {0})".format(self.proc.wait()))
        return int(json.loads(answer)["returncode"])

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


@functools.cache
def _zygote() -> _Zygote:
    return _Zygote()


@functools.cache
def _simctl() -> types.ModuleType:
    """tests/nvml-sim/simctl.py, imported once (it is a script, not a package module)."""
    spec = importlib.util.spec_from_file_location("gpufleet_nvml_simctl", SIMCTL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


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
        """simctl.py's answer to ARGS about this node.

        Its main() runs in this process: it is plain Python that reads and writes the state file and
        never loads the library, and an interpreter per call cost the unit tests a minute or two.
        tests/unit/nvml_sim runs the script itself, as the harness does.
        """
        argv = list(args)
        if args[0] != "errors":
            argv += ["--state", str(self.state), "--rundir", str(self.rundir)]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = _simctl().main(argv)
            except SystemExit as exit_:  # argparse's usage errors
                status = exit_.code if isinstance(exit_.code, int) else 2
        if status != 0:
            raise RuntimeError("simctl {0} failed: {1}".format(" ".join(args), err.getvalue()))
        return out.getvalue()

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
