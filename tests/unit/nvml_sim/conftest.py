"""Fixtures for the nvml-sim tests: build the library, render nodes, load ctypes.

The simulated libnvidia-ml.so.1 is loaded once per test session (a ctypes
library cannot be unloaded).  It reads NVML_SIM_STATE / NVML_SIM_RUNDIR at
the first nvmlInit of a session, so every test points those variables at its
own temporary files and the `sim` fixture shuts the library down completely
afterwards.
"""
from __future__ import annotations

import ctypes
import importlib.util
import os
import subprocess
import sys
from typing import Any, Dict, Iterator

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SIM_DIR = os.path.join(ROOT, "tests", "nvml-sim")
NODES_DIR = os.path.join(SIM_DIR, "nodes")
MODELS_DIR = os.path.join(SIM_DIR, "models")
LIB_PATH = os.path.join(SIM_DIR, "build", "libnvidia-ml.so.1")

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
    proc = subprocess.run(["make", "-C", SIM_DIR], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)
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
        os.makedirs(os.path.dirname(self.state_path))
        monkeypatch.setenv("NVML_SIM_STATE", self.state_path)
        monkeypatch.setenv("NVML_SIM_RUNDIR", self.run_dir)
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
