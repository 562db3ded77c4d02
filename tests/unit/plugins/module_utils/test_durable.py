# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Crash-safe writes: the data is fsync'd before the rename, and the directory after it, for the shared helper and
for node_files (units, drop-ins, the MIG config), in that order."""

from __future__ import annotations

import os
import stat
import typing as t
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils import _durable
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_runner import module_result


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """What reached the disk, in order: ("fsync", what the descriptor names) and ("rename", to where)."""
    found: list[tuple[str, str]] = []
    real_fsync, real_rename, real_replace = os.fsync, os.rename, os.replace

    def fsync(descriptor: int) -> None:
        found.append(("fsync", os.readlink("/proc/self/fd/{0}".format(descriptor))))
        real_fsync(descriptor)

    def rename(source: t.Any, target: t.Any) -> None:
        found.append(("rename", os.fsdecode(target)))
        real_rename(source, target)

    def replace(source: t.Any, target: t.Any) -> None:
        found.append(("rename", os.fsdecode(target)))
        real_replace(source, target)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "rename", rename)
    monkeypatch.setattr(os, "replace", replace)
    return found


def durable_order(found: list[tuple[str, str]], path: Path) -> None:
    renamed = found.index(("rename", str(path)))
    synced_before = [what for kind, what in found[:renamed] if kind == "fsync"]
    assert any(Path(what).parent == path.parent and Path(what).name.startswith(".") for what in synced_before), found
    assert ("fsync", str(path.parent)) in found[renamed:], found


def test_the_helper_syncs_the_data_then_the_rename(tmp_path: Path, events: list[tuple[str, str]]) -> None:
    target = tmp_path / "units" / "gpufleet-mig.service"
    _durable.write_atomically(str(target), "[Service]\n", 0o644)
    assert target.read_text() == "[Service]\n" and stat.S_IMODE(target.stat().st_mode) == 0o644
    durable_order(events, target)
    assert not [name for name in os.listdir(target.parent) if name.startswith(".")]
    assert _durable.remove(str(target)) and not target.exists() and events[-1] == ("fsync", str(target.parent))


def test_node_files_writes_durably(tmp_path: Path, events: list[tuple[str, str]]) -> None:
    target = tmp_path / "gpufleet-mig.env"
    result: dict[str, t.Any] = module_result("node_files", {"files": [{"path": str(target), "content": "GPUFLEET_MIG_LABEL=all-1g\n", "mode": "0644"}]})
    assert result["changed"] and target.read_text() == "GPUFLEET_MIG_LABEL=all-1g\n", result
    durable_order(events, target)
