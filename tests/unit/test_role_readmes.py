"""Role READMEs that carry a generated variable table agree with meta/argument_specs.yml."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROLES = sorted(p for p in (ROOT / "roles").iterdir() if (p / "meta" / "argument_specs.yml").exists()) \
    if (ROOT / "roles").is_dir() else []


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_variable_table_is_current(role: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "harness" / "role-readme.py"), "--check", str(role)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert done.returncode == 0, done.stdout
