"""Fixtures for the nvml-sim tests: build the library, render nodes, load ctypes.

The simulated libnvidia-ml.so.1 is loaded once per test session (a ctypes
library cannot be unloaded).  It reads NVML_SIM_STATE / NVML_SIM_RUNDIR /
NVML_SIM_SOCKET at the first nvmlInit of a session, so every test points
those variables at its own temporary files and the `sim` fixture shuts the
library down completely afterwards.  The socket variable always names a
test's own path, so a host that runs nvml-sim-persistenced on the default
socket cannot answer for a test's missing state file.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, Iterator, Optional

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SIM_DIR = os.path.join(ROOT, "tests", "nvml-sim")
NODES_DIR = os.path.join(SIM_DIR, "nodes")
MODELS_DIR = os.path.join(SIM_DIR, "models")
LIB_PATH = os.path.join(SIM_DIR, "build", "libnvidia-ml.so.1")
NATIVE_SMI = os.path.join(SIM_DIR, "build", "nvidia-smi")
PERSISTENCED = os.path.join(SIM_DIR, "nvml-sim-persistenced")

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1


def load_simctl() -> Any:
    """Import tests/nvml-sim/simctl.py as a module."""
    spec = importlib.util.spec_from_file_location("nvml_simctl", os.path.join(SIM_DIR, "simctl.py"))
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["nvml_simctl"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def simctl() -> Any:
    """The simctl module."""
    return load_simctl()


@pytest.fixture(scope="session")
def libpath() -> str:
    """Build the library with make, as a test host would."""
    proc = subprocess.run(["make", "-C", SIM_DIR], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    assert proc.returncode == 0, proc.stdout
    assert os.path.exists(LIB_PATH)
    return LIB_PATH


@pytest.fixture(scope="session")
def nvml(libpath: str) -> ctypes.CDLL:
    """The simulated library, loaded once for the whole session."""
    lib = ctypes.CDLL(libpath)
    lib.nvmlErrorString.restype = ctypes.c_char_p
    lib.nvmlErrorString.argtypes = [ctypes.c_int]
    return lib


class Sim:
    """One test's simulated node: state file, run dir and helpers."""

    def __init__(self, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, lib: ctypes.CDLL, ctl: Any) -> None:
        self.tmp = str(tmp_path)
        self.state_path = os.path.join(self.tmp, "var", "state")
        self.run_dir = os.path.join(self.tmp, "run")
        self.lib = lib
        self.ctl = ctl
        self.socket_path = os.path.join(self.tmp, "no-persistenced", "socket")
        os.makedirs(os.path.dirname(self.state_path))
        monkeypatch.setenv("NVML_SIM_STATE", self.state_path)
        monkeypatch.setenv("NVML_SIM_RUNDIR", self.run_dir)
        monkeypatch.setenv("NVML_SIM_SOCKET", self.socket_path)
        monkeypatch.delenv("NVML_SIM_EUID", raising=False)

    def render(self, node: str = "dgx-a100-8x40gb", booted: bool = True) -> None:
        """Render nodes/<node>.yml into this test's state file."""
        state = self.ctl.render_node(os.path.join(NODES_DIR, node + ".yml"))
        with self.ctl.locked(self.state_path):
            self.ctl.write_state(self.state_path, state)
        if booted:
            self.ctl.mark_booted(self.run_dir)

    def show(self) -> Dict[str, Any]:
        """simctl show, as a dict."""
        with self.ctl.locked(self.state_path):
            state = self.ctl.read_state(self.state_path)
        return self.ctl.show_state(state, self.state_path, self.run_dir)

    def edit(self) -> Any:
        """Context manager yielding the editable simctl State."""
        return self.ctl.editing(self.state_path)

    def text(self) -> str:
        """The raw state file."""
        with open(self.state_path, "r", encoding="utf-8") as handle:
            return handle.read()

    def shutdown_all(self) -> None:
        """Drop every reference the test left behind.

        A surplus nvmlShutdown succeeds (as in the real library), so the
        session state is probed with a call that needs nvmlInit.
        """
        buf = ctypes.create_string_buffer(80)
        for _attempt in range(64):
            if self.lib.nvmlSystemGetDriverVersion(buf, ctypes.c_uint(80)) == NVML_ERROR_UNINITIALIZED:
                return
            self.lib.nvmlShutdown()
        raise AssertionError("the library never became uninitialised")


@pytest.fixture
def sim(tmp_path: Any, monkeypatch: pytest.MonkeyPatch, nvml: ctypes.CDLL, simctl: Any) -> Iterator[Sim]:
    """A fresh simulated node per test; the library is fully shut down afterwards."""
    instance = Sim(tmp_path, monkeypatch, nvml, simctl)
    instance.shutdown_all()
    yield instance
    instance.shutdown_all()


class Persistenced:
    """A running nvml-sim-persistenced serving one state file on its own socket."""

    def __init__(self, state: str, rundir: str) -> None:
        # sun_path holds 108 bytes: pytest's tmp_path can be longer
        self.dir = tempfile.mkdtemp(prefix="nvsim-")
        self.socket = os.path.join(self.dir, "nvidia-persistenced", "socket")
        self.log = os.path.join(self.dir, "log")
        with open(self.log, "wb") as log:
            self.proc: Optional[subprocess.Popen] = subprocess.Popen(
                [sys.executable, PERSISTENCED, "--socket", self.socket, "--state", state, "--rundir", rundir], stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + 10
        while not os.path.exists(self.socket):
            assert self.proc.poll() is None, open(self.log, encoding="utf-8").read()
            assert time.monotonic() < deadline, "nvml-sim-persistenced did not create its socket"
            time.sleep(0.02)

    def stop(self) -> int:
        """SIGTERM; the exit status."""
        assert self.proc is not None
        self.proc.terminate()
        code = self.proc.wait(10)
        self.proc = None
        return code

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def persistenced() -> Iterator[Any]:
    """Factory: persistenced(state, rundir) starts a server; all are stopped afterwards."""
    started = []

    def start(state: str, rundir: str) -> Persistenced:
        server = Persistenced(state, rundir)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()
