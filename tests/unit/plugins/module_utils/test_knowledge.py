# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Every fact of the knowledge base names its source and the day it was
checked, and no table of it is kept a second time elsewhere."""

from __future__ import annotations

import datetime
import importlib
import pkgutil
import re
import subprocess
import sys
import typing as t
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils import _knowledge

ROOT = Path(__file__).resolve().parents[4]


def tables() -> list[tuple[str, t.Any]]:
    """(module.NAME, value) for every public table of every module of the package."""
    found = []
    for info in pkgutil.iter_modules(_knowledge.__path__):
        module = importlib.import_module("{0}.{1}".format(_knowledge.__name__, info.name))
        for name, value in vars(module).items():
            if name.isupper() and not name.startswith("_"):
                found.append(("{0}.{1}".format(info.name, name), value))
    return found


def rows() -> list[tuple[str, dict[str, t.Any]]]:
    """Every row: the dicts of a tuple table, or a one-off {value, source, checked} constant."""
    found = []
    for name, value in tables():
        if isinstance(value, dict):
            found.append((name, value))
        else:
            found.extend(("{0}[{1}]".format(name, index), row) for index, row in enumerate(value))
    return found


ROWS = rows()


def test_the_package_holds_the_tables():
    names = {name for name, _value in tables()}
    assert {
        "cuda.CUDA_DRIVERS",
        "cuda.MVC_FLOORS",
        "drivers.DRIVER_BRANCHES",
        "drivers.KERNEL_MODULE_FLAVOURS",
        "gpus.ARCHITECTURES",
        "gpus.GPU_MODELS",
        "toolkit.CTK_FEATURES",
        "toolkit.CTK_CVE_FLOORS",
        "engines.ENGINE_CDI",
        "engines.ENGINE_EOL",
        "kubernetes.CRICTL_GROUPS",
    } <= names
    assert len(ROWS) > 150


@pytest.mark.parametrize("name,value", tables(), ids=[name for name, _value in tables()])
def test_every_table_is_rows_or_a_sourced_constant(name: str, value: t.Any):
    if isinstance(value, dict):
        assert set(value) == {"value", "source", "checked"}, name
    else:
        assert isinstance(value, tuple) and value, name
        assert all(isinstance(row, dict) for row in value), name


@pytest.mark.parametrize("name,row", ROWS, ids=[name for name, _row in ROWS])
def test_every_row_has_a_source_and_a_check_date(name: str, row: dict[str, t.Any]):
    source = row.get("source")
    assert isinstance(source, str) and source.strip(), "{0} has no source".format(name)
    # A URL, a repository path (owner/repo@commit:path, owner/repo:path), an
    # issue or pull request (owner/repo#123), or a source marked secondary.
    assert re.search(r"https?://|^[\w.-]+/[\w.-]+([@:]|#\d)|^secondary: ", source), "{0}: {1!r}".format(name, source)
    checked = row.get("checked")
    assert isinstance(checked, str) and re.match(r"^\d{4}-\d{2}-\d{2}$", checked), name
    day = datetime.datetime.strptime(checked, "%Y-%m-%d").date()
    assert datetime.date(2026, 1, 1) <= day <= datetime.date.today(), name


@pytest.mark.parametrize("name,row", [(n, r) for n, r in ROWS if "status" in r], ids=[n for n, r in ROWS if "status" in r])
def test_unverified_rows_are_marked_as_such(name: str, row: dict[str, t.Any]):
    assert row["status"] in ("V", "S", "U"), name
    if row["source"].startswith("secondary: "):
        assert row["status"] in ("S", "U"), "{0}: a secondary source cannot make a verified row".format(name)


def test_the_test_fails_for_a_row_without_a_source():
    with pytest.raises(AssertionError):
        test_every_row_has_a_source_and_a_check_date("example", {"branch": "999", "checked": "2026-11-25"})
    with pytest.raises(AssertionError):
        test_every_row_has_a_source_and_a_check_date("example", {"source": "https://docs.nvidia.com/x", "checked": "25.11.2026"})


def _files() -> list[Path]:
    skip = {"_knowledge", "changelogs", ".git", "build", ".venv", "tests"}
    return [
        path for path in ROOT.rglob("*") if path.is_file() and path.suffix in (".py", ".yml", ".yaml", ".j2") and not skip & set(path.relative_to(ROOT).parts)
    ]


@pytest.mark.parametrize(
    "pattern,why",
    [
        # The driver role's own copies, merged into gpus.GPU_MODELS and drivers.KERNEL_MODULE_FLAVOURS.
        (r"__driver_architecture_by_model", "GPU model -> architecture"),
        (r"__driver_flavours_by_architecture", "kernel-module flavours"),
        (r"__driver_open_first_branch", "first branch with open modules"),
        # A row of the GPU model table or the flavour table written outside the knowledge base.
        (r"[\"']match[\"']:\s*r[\"']\\b[a-z]", "a GPU model row"),
        (r"\bgrace_hopper:\s*\[", "a flavour row"),
        (r"\(\"\d+\.\d+\.\d+\",\s*\"(GA|Update \d+)\",\s*\"\d{3}\.", "a CUDA -> driver row"),
    ],
)
def test_no_knowledge_table_is_kept_twice(pattern: str, why: str):
    regex = re.compile(pattern)
    hits = [str(path.relative_to(ROOT)) for path in _files() if regex.search(path.read_text(errors="replace"))]
    assert hits == [], "{0} tabulated outside plugins/module_utils/_knowledge: {1}".format(why, hits)


def test_the_version_matrix_doc_is_generated_from_the_knowledge_base():
    script = ROOT / "tests" / "harness" / "render-version-matrix.py"
    outcome = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, check=False)
    assert outcome.returncode == 0, outcome.stdout + outcome.stderr
