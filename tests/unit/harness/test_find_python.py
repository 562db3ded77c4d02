"""tests/harness/find-python.sh: the newest Python >= 3.12 that really runs, else nothing (exit 1)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

FIND_PYTHON = Path(__file__).resolve().parents[2] / "harness" / "find-python.sh"


def find(path: Path, pyenv_root: Path) -> subprocess.CompletedProcess:
    # pyenv's shims first on PATH, as pyenv's set-up puts them.
    env = dict(os.environ, PATH="{0}:{1}:/usr/bin:/bin".format(pyenv_root / "shims", path), PYENV_ROOT=str(pyenv_root))
    return subprocess.run(["bash", str(FIND_PYTHON)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60, check=False)


@pytest.fixture(name="ground")
def fixture_ground(tmp_path):
    if sys.version_info[:2] < (3, 12):
        pytest.skip("needs a Python >= 3.12 to stand in for the ones found (this venv's)")
    path, pyenv = tmp_path / "bin", tmp_path / "pyenv"
    path.mkdir()
    # A python3.14 that does not run, and a pyenv shim, which answers only for pyenv's selected version.
    (path / "python3.14").write_text("#!/bin/sh\nexit 127\n")
    (path / "python3.14").chmod(0o755)
    (pyenv / "shims").mkdir(parents=True)
    (pyenv / "shims" / "python3.13").symlink_to(sys.executable)
    return path, pyenv


def pyenv_build(pyenv: Path, version: str) -> Path:
    python = pyenv / "versions" / version / "bin" / "python3"
    python.parent.mkdir(parents=True)
    python.symlink_to(sys.executable)
    return python


def test_the_highest_pyenv_build_of_the_newest_minor_that_runs(ground):
    path, pyenv = ground
    pyenv_build(pyenv, "3.12.1")
    pyenv_build(pyenv, "3.13.9")
    newest = pyenv_build(pyenv, "3.13.10")
    done = find(path, pyenv)
    assert (done.returncode, done.stdout.strip()) == (0, str(newest))


def test_a_python_on_path_before_pyenvs_of_the_same_minor_and_shims_skipped(ground):
    path, pyenv = ground
    (path / "python3.13").symlink_to(sys.executable)
    pyenv_build(pyenv, "3.13.10")
    done = find(path, pyenv)
    assert (done.returncode, done.stdout.strip()) == (0, str(path / "python3.13"))


def test_nothing_found_exits_1_with_no_output(ground, tmp_path):
    path, pyenv = ground
    (pyenv / "versions" / "3.11.7" / "bin").mkdir(parents=True)
    (pyenv / "versions" / "3.11.7" / "bin" / "python3").symlink_to("/usr/bin/python3")
    done = find(path, pyenv)
    # Only the broken python3.14, a shim and a 3.11 build: none qualifies (/usr/bin's python3.1x may: skip then).
    if any(Path("/usr/bin/python3.{0}".format(minor)).exists() for minor in (12, 13, 14)):
        pytest.skip("this machine's /usr/bin has a Python >= 3.12")
    assert (done.returncode, done.stdout) == (1, "")
