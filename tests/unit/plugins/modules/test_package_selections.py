# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""package_selections: the real dpkg, on a scratch database (DPKG_ADMINDIR)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import typing as t
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_runner import module_result

pytestmark = pytest.mark.skipif(not shutil.which("dpkg") or os.geteuid() != 0, reason="needs dpkg, and root for dpkg --set-selections")

PACKAGES = {"nvidia-driver": "install", "libcuda1": "hold", "nvidia-kernel-dkms": "install"}


@pytest.fixture
def admindir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for directory in ("updates", "info"):
        (tmp_path / directory).mkdir()
    (tmp_path / "available").write_text("")
    (tmp_path / "status").write_text(
        "".join(
            "Package: {0}\nStatus: {1} ok installed\nPriority: optional\nSection: non-free/libs\nMaintainer: t <t@t>\n"
            "Architecture: amd64\nVersion: 550.163.01-1\nDescription: t\n\n".format(name, want)
            for name, want in PACKAGES.items()
        )
    )
    monkeypatch.setenv("DPKG_ADMINDIR", str(tmp_path))
    return tmp_path


def selections(admindir: Path) -> dict[str, str]:
    found, name = {}, None
    for line in (admindir / "status").read_text().splitlines():
        if line.startswith("Package: "):
            name = line.split()[1]
        elif line.startswith("Status: "):
            found[name] = line.split()[1]
    return found


def run(check: bool = False, diff: bool = False, **args: t.Any) -> dict[str, t.Any]:
    return module_result("package_selections", args, check=check, diff=diff)


def test_hold_sets_only_what_differs_then_nothing(admindir: Path) -> None:
    first = run(name=list(PACKAGES), selection="hold", diff=True)
    assert first["changed"] and first["changed_packages"] == ["nvidia-driver", "nvidia-kernel-dkms"]
    assert first["diff"]["before"] == "nvidia-driver install\nnvidia-kernel-dkms install\n"
    assert first["diff"]["after"] == "nvidia-driver hold\nnvidia-kernel-dkms hold\n"
    assert selections(admindir) == dict.fromkeys(PACKAGES, "hold")
    again = run(name=list(PACKAGES), selection="hold")
    assert not again["changed"] and again["changed_packages"] == []


def test_release_and_check_mode(admindir: Path) -> None:
    predicted = run(name=["libcuda1", "nvidia-driver"], selection="install", check=True)
    assert predicted["changed"] and predicted["changed_packages"] == ["libcuda1"]
    assert selections(admindir) == PACKAGES
    released = run(name=["libcuda1", "nvidia-driver"], selection="install")
    assert released["changed_packages"] == ["libcuda1"] and selections(admindir)["libcuda1"] == "install"


def test_unknown_package_fails_before_any_selection_is_set(admindir: Path) -> None:
    failed = run(name=["nvidia-driver", "nvidia-open"], selection="hold")
    assert failed["failed"] and "nvidia-open" in failed["msg"] and failed["msg"].startswith("name:")
    assert selections(admindir) == PACKAGES


def test_empty_list_and_bad_names(admindir: Path) -> None:
    assert run(name=[], selection="hold") == {"failed": False, "changed": False, "changed_packages": []}
    bad = run(name=["nvidia driver"], selection="hold")
    assert bad["failed"] and "name[0]" in bad["msg"]


def hold_lock(admindir: Path, seconds: float, lock: str = "lock-frontend") -> subprocess.Popen:
    """Another process holding one of dpkg's locks (fcntl, as dpkg and apt take them) for `seconds`, once it says so."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o640)\n"
            "fcntl.lockf(fd, fcntl.LOCK_EX)\n"
            "print('locked', flush=True)\n"
            "time.sleep(float(sys.argv[2]))\n",
            str(admindir / lock),
            str(seconds),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    return holder


@pytest.mark.parametrize("lock", ["lock-frontend", "lock"])
def test_waits_while_a_killed_runs_dpkg_holds_its_lock_then_sets(admindir: Path, lock: str) -> None:
    # A run killed in the middle of an install leaves its dpkg working on the node: the next run waits for it.
    holder = hold_lock(admindir, 3, lock)
    start = time.monotonic()
    held = run(name=["nvidia-driver"], selection="hold")
    waited = time.monotonic() - start
    holder.wait()
    assert not held.get("failed"), json.dumps(held)
    assert waited >= 2, waited
    assert selections(admindir)["nvidia-driver"] == "hold"


def test_gives_up_after_lock_timeout_naming_the_holder(admindir: Path) -> None:
    holder = hold_lock(admindir, 8)
    try:
        failed = run(name=["nvidia-driver"], selection="hold", lock_timeout=2)
    finally:
        holder.kill()
        holder.wait()
    assert failed["failed"], failed
    assert failed["msg"].startswith("dpkg is busy: its lock is held by pid {0} (python".format(holder.pid)), failed["msg"]
    assert "lock_timeout=2 s" in failed["msg"]
    assert selections(admindir) == PACKAGES
