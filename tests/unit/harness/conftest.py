"""Shared by the tests of tests/harness/'s scripts."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

HARNESS = Path(__file__).resolve().parents[2] / "harness"


def load_script(path: Path, name: str) -> ModuleType:
    """Import a script by its path: the harness's scripts are files to run, not a package."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(name="harness_script", scope="session")
def fixture_harness_script():
    """load_script for a file of tests/harness/, by its name there."""
    return lambda filename: load_script(HARNESS / filename, "gpufleet_test_" + Path(filename).stem.replace("-", "_"))
