# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""_knowledge.packages: the package tables and the one dpkg/rpm query format, read as dpkg and rpm read them."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import packages


def test_every_table_has_rows_with_a_source_and_a_check_date() -> None:
    names = [name for name in vars(packages) if re.match(r"^[A-Z][A-Z0-9_]*$", name)]
    assert names
    for name in names:
        table = getattr(packages, name)
        rows = table if isinstance(table, tuple) else (table,)
        for row in rows:
            assert row.get("source"), name
            assert re.match(r"^\d{4}-\d{2}-\d{2}$", row.get("checked", "")), name


def test_toolkit_sets_in_install_order() -> None:
    assert packages.toolkit_packages("full") == (
        "nvidia-container-toolkit-base",
        "libnvidia-container1",
        "libnvidia-container-tools",
        "nvidia-container-toolkit",
    )
    assert packages.toolkit_packages("base") == ("nvidia-container-toolkit-base",)
    assert packages.toolkit_packages("nope") == ()
    # Every package of the base set is in the full set: a switch to full only adds packages.
    assert set(packages.toolkit_packages("base")) <= set(packages.toolkit_packages("full"))


def test_version_packages_are_the_matrix_installed_view() -> None:
    # The table plugins/module_utils/_matrix.py kept as PACKAGE_NAMES before it read this one.
    assert packages.version_packages() == {
        "container_toolkit": ("nvidia-container-toolkit-base", "nvidia-container-toolkit"),
        "fabricmanager": ("nvidia-fabricmanager*", "nvidia-fabric-manager*", "cuda-drivers-fabricmanager*"),
        "containerd": ("containerd", "containerd.io"),
        "docker": ("docker-ce", "docker.io", "moby-engine", "docker"),
        "crio": ("cri-o",),
        "crictl": ("cri-tools",),
        # Added since: forward compatibility is judged from an installed cuda-compat package.
        "cuda_compat": ("cuda-compat*",),
    }


DPKG_OUTPUT = (
    "nvidia-container-toolkit-base\t1.17.8-1\thi \n"
    "libnvidia-container1:amd64\t1.17.8-1\tii \n"
    "libnvidia-container-tools\t1.17.7-1\tri \n"
    "nvidia-container-toolkit\t\tun \n"
    "docker-ce\t5:28.3.0-1~debian.12~bookworm\tiiR\n"
    "containerd\t1.7.24~ds1-6\tiF \n"
    "cri-tools\t1.33.0-1.1\trc \n"
    "dpkg-query: no packages found matching nope\n"
    "broken\tline\n"
)


def test_dpkg_rows_spell_the_status_as_dpkg_does() -> None:
    rows = {row["name"]: row for row in packages.dpkg_query_rows(DPKG_OUTPUT)}
    assert list(rows) == [
        "nvidia-container-toolkit-base",
        "libnvidia-container1",
        "libnvidia-container-tools",
        "nvidia-container-toolkit",
        "docker-ce",
        "containerd",
        "cri-tools",
    ]
    assert rows["nvidia-container-toolkit-base"] == {
        "name": "nvidia-container-toolkit-base",
        "version": "1.17.8-1",
        "selection": "hold",
        "status": "installed",
        "error": None,
    }
    assert rows["libnvidia-container1"]["selection"] == "install"  # architecture qualifier dropped
    assert rows["libnvidia-container-tools"]["selection"] == "deinstall"
    assert (rows["nvidia-container-toolkit"]["status"], rows["nvidia-container-toolkit"]["version"]) == ("not-installed", "")
    assert rows["docker-ce"]["version"] == "5:28.3.0-1~debian.12~bookworm"
    assert rows["docker-ce"]["error"] == "reinst-required"
    assert rows["containerd"]["status"] == "half-configured"
    assert (rows["cri-tools"]["selection"], rows["cri-tools"]["status"]) == ("deinstall", "config-files")


def test_dpkg_rows_without_the_error_flag_space() -> None:
    # A stripped last line ("ii" without its blank flag) still reads as clear.
    assert packages.dpkg_query_rows("a\t1\tii")[0]["error"] is None


def test_rpm_rows_carry_a_nonzero_epoch_as_dpkg_does() -> None:
    rows = packages.rpm_query_rows("nvidia-container-toolkit-base\t0:1.17.8-1\ndocker-ce\t3:28.3.0-1.el9\npackage nope is not installed\n")
    assert rows == [
        {"name": "nvidia-container-toolkit-base", "version": "1.17.8-1", "selection": "install", "status": "installed", "error": None},
        {"name": "docker-ce", "version": "3:28.3.0-1.el9", "selection": "install", "status": "installed", "error": None},
    ]


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="needs dpkg-query")
def test_dpkg_rows_agree_with_dpkg_query_words() -> None:
    """Every package of this machine, read with the format, against the words dpkg-query prints itself."""
    fmt = packages.DPKG_QUERY_FORMAT["value"]
    ours = subprocess.run(["dpkg-query", "-W", "-f", fmt], check=True, stdout=subprocess.PIPE, text=True).stdout
    words = subprocess.run(
        ["dpkg-query", "-W", "-f", "${binary:Package}\t${Package}\t${Version}\t${db:Status-Want}\t${db:Status-Status}\t${db:Status-Eflag}\n"],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    ).stdout
    expected = []
    for line in words.splitlines():
        _qualified, name, version, want, status, eflag = line.split("\t")
        expected.append({"name": name, "version": version, "selection": want, "status": status, "error": None if eflag == "ok" else eflag})
    rows = packages.dpkg_query_rows(ours)
    assert len(rows) > 50
    assert rows == expected


SPEC = """Name: {name}
Version: 1.2.3
Release: 4.el9
{epoch}Summary: test package
License: GPL-3.0-or-later
BuildArch: noarch
%description
test package
%files
"""


@pytest.mark.skipif(shutil.which("rpm") is None or shutil.which("rpmbuild") is None, reason="needs rpm and rpmbuild")
def test_rpm_rows_agree_with_rpm(tmp_path: Path) -> None:
    """Two packages, with and without an epoch, in a scratch database, queried with the format."""
    for name, epoch in (("gpufleet-no-epoch", ""), ("gpufleet-epoch", "Epoch: 3\n")):
        spec = tmp_path / (name + ".spec")
        spec.write_text(SPEC.format(name=name, epoch=epoch))
        subprocess.run(
            ["rpmbuild", "-bb", "--define", "_topdir {0}".format(tmp_path / "top"), str(spec)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
    db = tmp_path / "db"
    subprocess.run(["rpm", "--dbpath", str(db), "--initdb"], check=True)
    subprocess.run(
        ["rpm", "--dbpath", str(db), "-i", "--justdb", "--nodeps", "--ignorearch", "--ignoreos"]
        + [str(path) for path in sorted((tmp_path / "top" / "RPMS" / "noarch").glob("*.rpm"))],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    done = subprocess.run(["rpm", "--dbpath", str(db), "-qa", "--qf", packages.RPM_QUERY_FORMAT["value"]], check=True, stdout=subprocess.PIPE, text=True)
    rows = sorted(packages.rpm_query_rows(done.stdout), key=lambda row: row["name"])
    assert [(row["name"], row["version"]) for row in rows] == [("gpufleet-epoch", "3:1.2.3-4.el9"), ("gpufleet-no-epoch", "1.2.3-4.el9")]
