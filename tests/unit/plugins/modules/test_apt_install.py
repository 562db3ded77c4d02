# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""apt_install: the real apt-get and dpkg, installing into a scratch root from local repositories.

APT_CONFIG points apt at scratch lists and caches and tells it to run dpkg with --root and --admindir in a
temporary directory; DPKG_ADMINDIR points the module's dpkg-query at the same database.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import typing as t
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_runner import module_result

pytestmark = pytest.mark.skipif(
    not all(shutil.which(tool) for tool in ("apt-get", "apt-ftparchive", "dpkg-deb")) or os.geteuid() != 0,
    reason="needs apt-get, apt-ftparchive and dpkg-deb, and root for dpkg",
)


def build_repo(work: Path, repo: Path, packages: dict[str, list[str]]) -> None:
    """A flat repository; alpha depends on beta at the same version."""
    repo.mkdir(parents=True)
    for name, versions in packages.items():
        for version in versions:
            tree = work / "build" / "{0}-{1}".format(name, version)
            (tree / "DEBIAN").mkdir(parents=True)
            (tree / "usr" / "share" / name).mkdir(parents=True)
            (tree / "usr" / "share" / name / "version").write_text(version + "\n")
            control = "Package: {0}\nVersion: {1}\nArchitecture: all\nMaintainer: t <t@t>\nDescription: t\n".format(name, version)
            if name == "alpha":
                control += "Depends: beta (= {0})\n".format(version)
            (tree / "DEBIAN" / "control").write_text(control)
            if name == "delta":
                # What initramfs-tools' trigger prints when a package's install makes it regenerate, one line a kernel.
                postinst = tree / "DEBIAN" / "postinst"
                postinst.write_text(
                    "#!/bin/sh\necho 'update-initramfs: Generating /boot/initrd.img-6.12.118+deb13-amd64'\n"
                    "echo 'update-initramfs: Generating /boot/initrd.img-6.12.74+deb13-amd64'\n"
                )
                postinst.chmod(0o755)
            subprocess.run(["dpkg-deb", "-b", str(tree), str(repo / "{0}_{1}_all.deb".format(name, version))], check=True, capture_output=True)
    (repo / "Packages").write_bytes(subprocess.run(["apt-ftparchive", "packages", "."], cwd=repo, check=True, capture_output=True).stdout)


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """The distribution's repository (alpha, beta) in sources.list, ours (gamma) in sources.list.d."""
    root, etc, lists = tmp_path / "root", tmp_path / "etc", tmp_path / "lists"
    admin = root / "var" / "lib" / "dpkg"
    for directory in (
        admin / "updates",
        admin / "info",
        etc / "sources.list.d",
        etc / "apt.conf.d",
        etc / "preferences.d",
        lists / "partial",
        tmp_path / "cache" / "archives" / "partial",
        tmp_path / "state",
        tmp_path / "log",
    ):
        directory.mkdir(parents=True)
    (admin / "status").write_text("")
    (admin / "available").write_text("")
    build_repo(tmp_path, tmp_path / "distro", {"alpha": ["1.0-1", "2.0-1"], "beta": ["1.0-1", "2.0-1"], "delta": ["1.0-1"]})
    build_repo(tmp_path, tmp_path / "ours", {"gamma": ["1.0-1"]})
    (etc / "sources.list").write_text("deb [trusted=yes] file:{0} ./\n".format(tmp_path / "distro"))
    (etc / "sources.list.d" / "ours.list").write_text("deb [trusted=yes] file:{0} ./\n".format(tmp_path / "ours"))
    (tmp_path / "apt.conf").write_text(
        'Dir::Etc "{etc}";\nDir::State "{state}";\nDir::State::Lists "{lists}";\nDir::State::status "{admin}/status";\n'
        'Dir::Cache "{cache}";\n'
        # apt's own history and terminal logs too, or every run writes into the host's /var/log/apt.
        'Dir::Log "{log}";\n'
        'DPkg::Options {{ "--root={root}"; "--admindir={admin}"; "--force-script-chrootless"; "--force-not-root"; }};\n'.format(
            etc=etc, state=tmp_path / "state", lists=lists, admin=admin, cache=tmp_path / "cache", root=root, log=tmp_path / "log"
        )
    )
    monkeypatch.setenv("APT_CONFIG", str(tmp_path / "apt.conf"))
    monkeypatch.setenv("DPKG_ADMINDIR", str(admin))
    return {
        "tmp": tmp_path,
        "root": root,
        "admin": admin,
        "lists": lists,
        "ours": etc / "sources.list.d" / "ours.list",
        "stamp": tmp_path / "gpufleet" / "apt-lists.stamp",
    }


def run(node: dict[str, Path], check: bool = False, diff: bool = False, **args: t.Any) -> dict[str, t.Any]:
    return module_result("apt_install", {"lists_stamp": str(node["stamp"]), **args}, check=check, diff=diff)


def version(node: dict[str, Path], name: str) -> str | None:
    path = node["root"] / "usr" / "share" / name / "version"
    return path.read_text().strip() if path.exists() else None


def fetched(node: dict[str, Path]) -> set[str]:
    return {name.split("_")[-3] for name in os.listdir(node["lists"]) if name.endswith("_Packages")}


def test_installs_exact_versions_once_then_nothing(node: dict[str, Path]) -> None:
    first = run(node, name=["alpha=1.0-1", "beta=1.0-1"], lists_valid_time=3600, diff=True)
    assert not first["failed"], first["msg"]
    assert first["changed"] and first["changed_packages"] == ["alpha", "beta"] and first["refreshed"] == "all"
    assert version(node, "alpha") == "1.0-1" and version(node, "beta") == "1.0-1"
    assert first["diff"]["before"] == "" and first["diff"]["after"] == "alpha 1.0-1\nbeta 1.0-1\n"
    # What was installed, as dpkg has it now: the caller needs no call of its own to learn the version.
    assert first["versions"] == {"alpha": "1.0-1", "beta": "1.0-1"}
    again = run(node, name=["alpha=1.0-1", "beta=1.0-1"], lists_valid_time=3600)
    assert again == {
        "failed": False,
        "changed": False,
        "changed_packages": [],
        "refreshed": "none",
        "initramfs_kernels": [],
        "downloaded": [],
        "held_packages": [],
        "released_packages": [],
        "rehearsed": True,
        "repaired": [],
        "versions": {"alpha": "1.0-1", "beta": "1.0-1"},
    }
    assert first["initramfs_kernels"] == []
    # Unversioned: any installed version will do.
    unversioned = run(node, name=["alpha", "gamma"], check=True)
    assert unversioned["versions"] == {"alpha": "1.0-1", "gamma": "1.0-1"}
    assert not run(node, name=["alpha"])["changed"]


def test_names_the_initramfs_the_install_generated(node: dict[str, Path]) -> None:
    result = run(node, name=["delta=1.0-1"], lists_valid_time=3600)
    assert not result["failed"], result["msg"]
    assert result["initramfs_kernels"] == ["6.12.118+deb13-amd64", "6.12.74+deb13-amd64"]
    # A rehearsal generates nothing.
    rehearsal = run(node, check=True, name=["alpha=1.0-1", "beta=1.0-1"])
    assert not rehearsal["failed"], rehearsal["msg"]
    assert rehearsal["changed"] and rehearsal["initramfs_kernels"] == []


def test_upgrade_and_downgrade(node: dict[str, Path]) -> None:
    run(node, name=["alpha=1.0-1", "beta=1.0-1"], lists_valid_time=3600)
    upgraded = run(node, name=["alpha=2.0-1", "beta=2.0-1"], diff=True)
    assert upgraded["changed_packages"] == ["alpha", "beta"] and version(node, "alpha") == "2.0-1"
    assert upgraded["diff"]["before"] == "alpha 1.0-1\nbeta 1.0-1\n"
    refused = run(node, name=["alpha=1.0-1", "beta=1.0-1"])
    assert refused["failed"] and "downgraded" in refused["msg"] and version(node, "alpha") == "2.0-1"
    downgraded = run(node, name=["alpha=1.0-1", "beta=1.0-1"], allow_downgrade=True)
    assert downgraded["changed"] and version(node, "alpha") == "1.0-1"


def test_held_packages_need_permission(node: dict[str, Path]) -> None:
    run(node, name=["alpha=1.0-1", "beta=1.0-1"], lists_valid_time=3600)
    subprocess.run(["dpkg", "--admindir", str(node["admin"]), "--set-selections"], input=b"beta hold\n", check=True)
    refused = run(node, name=["alpha=2.0-1", "beta=2.0-1"])
    assert refused["failed"] and "held" in refused["msg"].lower() and version(node, "beta") == "1.0-1"
    assert run(node, name=["alpha=2.0-1", "beta=2.0-1"], allow_change_held_packages=True)["changed"]
    assert version(node, "beta") == "2.0-1"


def test_check_mode_rehearses_and_installs_nothing(node: dict[str, Path]) -> None:
    run(node, name=["beta=1.0-1"], lists_valid_time=3600)
    predicted = run(node, name=["alpha=2.0-1", "beta=2.0-1"], check=True, diff=True)
    assert predicted["changed"] and predicted["changed_packages"] == ["alpha", "beta"]
    assert predicted["diff"]["after"] == "alpha 2.0-1\nbeta 2.0-1\n" and version(node, "beta") == "1.0-1"
    assert predicted["versions"] == {"alpha": "2.0-1", "beta": "2.0-1"}
    unknown = run(node, name=["alpha=9.9-1"], check=True)
    assert unknown["failed"] and "alpha=9.9-1" in unknown["msg"] and "not found" in unknown["msg"]


def test_lists_all_once_then_only_the_named_source(node: dict[str, Path]) -> None:
    first = run(node, name=["beta=1.0-1"], update_sources=[str(node["ours"])], lists_valid_time=3600)
    assert first["refreshed"] == "all" and fetched(node) == {"distro", "ours"} and node["stamp"].is_file()
    for name in os.listdir(node["lists"]):
        if name.endswith("_Packages"):
            (node["lists"] / name).unlink()
    second = run(node, name=["gamma=1.0-1"], update_sources=[str(node["ours"])], lists_valid_time=3600)
    assert second["refreshed"] == "sources" and version(node, "gamma") == "1.0-1"
    # Only our repository's lists came back; the distribution's were neither fetched nor cleaned up.
    assert fetched(node) == {"ours"}
    hour_ago = time.time() - 3601
    os.utime(node["stamp"], (hour_ago, hour_ago))
    third = run(node, name=["alpha=1.0-1"], update_sources=[str(node["ours"])], lists_valid_time=3600)
    assert third["refreshed"] == "all" and fetched(node) == {"distro", "ours"}


def test_a_failed_fetch_fails_before_the_install(node: dict[str, Path]) -> None:
    run(node, name=["beta=1.0-1"], lists_valid_time=3600)
    (node["tmp"] / "ours" / "Packages").unlink()
    failed = run(node, name=["alpha=1.0-1"], update_sources=[str(node["ours"])], lists_valid_time=3600)
    assert failed["failed"] and str(node["ours"]) in failed["msg"] and "Failed to fetch" in failed["msg"]
    assert version(node, "alpha") is None


def test_bad_arguments_name_the_field(node: dict[str, Path]) -> None:
    assert run(node, name=["alpha 1.0"])["msg"].startswith("name[0]:")
    assert run(node, name=["-o=Foo"])["msg"].startswith("name[0]:")
    assert run(node, name=["alpha:amd64=1.0-1"])["msg"].startswith("name[0]:")
    # A trailing newline would pass an anchored re.match ("$" matches before it).
    assert run(node, name=["alpha=1.0-1\n"])["msg"].startswith("name[0]:")
    assert run(node, name=["alpha"], hold=["alpha\n"])["msg"].startswith("hold[0]:")
    assert "update_sources[0]" in run(node, name=["alpha"], update_sources=["ours.list"])["msg"]
    missing = run(node, name=["alpha"], update_sources=[str(node["tmp"] / "missing.list")])
    assert missing["failed"] and "does not exist" in missing["msg"]
    assert run(node, name=["alpha"], lists_valid_time=-1)["msg"].startswith("lists_valid_time:")


def test_a_package_the_mirror_lost_fails_with_apt_error_and_changes_nothing(node: dict[str, Path]) -> None:
    """The lists name it, the download fails: apt stops before dpkg touches anything."""
    run(node, name=["beta=1.0-1"], lists_valid_time=3600)
    (node["tmp"] / "distro" / "alpha_2.0-1_all.deb").unlink()
    failed = run(node, name=["alpha=2.0-1", "beta=2.0-1"], diff=True)
    assert failed["failed"] and "alpha" in failed["msg"] and "E: " in failed["msg"], failed["msg"]
    assert failed["changed_packages"] == []
    assert version(node, "alpha") is None and version(node, "beta") == "1.0-1"


def selection(node: dict[str, Path], name: str) -> str:
    return subprocess.run(
        ["dpkg-query", "--admindir", str(node["admin"]), "-W", "-f", "${db:Status-Want}", name], check=True, capture_output=True, text=True
    ).stdout


def test_holds_what_it_installed_in_the_same_call_then_nothing(node: dict[str, Path]) -> None:
    first = run(node, name=["alpha=1.0-1", "beta=1.0-1"], hold=["alpha", "beta"], lists_valid_time=3600, diff=True)
    assert not first["failed"], first["msg"]
    assert first["changed"] and first["held_packages"] == ["alpha", "beta"]
    assert selection(node, "alpha") == "hold" and selection(node, "beta") == "hold"
    assert first["diff"]["before"] == "" and first["diff"]["after"] == "alpha 1.0-1 hold\nbeta 1.0-1 hold\n"
    again = run(node, name=["alpha=1.0-1", "beta=1.0-1"], hold=["alpha", "beta"])
    assert not again["changed"] and again["held_packages"] == [] and again["changed_packages"] == []


def test_holds_an_installed_package_without_installing(node: dict[str, Path]) -> None:
    run(node, name=["alpha=1.0-1", "beta=1.0-1"], lists_valid_time=3600)
    rehearsed = run(node, name=["alpha=1.0-1"], hold=["beta"], check=True, diff=True)
    assert rehearsed["changed"] and rehearsed["held_packages"] == ["beta"] and rehearsed["changed_packages"] == []
    assert rehearsed["diff"]["before"] == "alpha 1.0-1\nbeta 1.0-1\n" and rehearsed["diff"]["after"] == "alpha 1.0-1\nbeta 1.0-1 hold\n"
    assert selection(node, "beta") == "install"
    held = run(node, name=["alpha=1.0-1"], hold=["beta"])
    assert held["changed"] and held["held_packages"] == ["beta"] and held["refreshed"] == "none" and selection(node, "beta") == "hold"


def test_an_upgrade_of_held_packages_holds_them_again(node: dict[str, Path]) -> None:
    """apt drops the hold of a package whose version it changes; check mode says it will hold them again."""
    run(node, name=["alpha=1.0-1", "beta=1.0-1"], hold=["alpha", "beta"], lists_valid_time=3600)
    wanted = {"name": ["alpha=2.0-1", "beta=2.0-1"], "hold": ["alpha", "beta"], "allow_change_held_packages": True}
    rehearsed = run(node, check=True, **wanted)
    assert rehearsed["changed_packages"] == ["alpha", "beta"] and rehearsed["held_packages"] == ["alpha", "beta"]
    upgraded = run(node, diff=True, **wanted)
    assert not upgraded["failed"], upgraded["msg"]
    assert upgraded["held_packages"] == ["alpha", "beta"], "apt kept the holds: check mode's prediction is wrong"
    assert version(node, "alpha") == "2.0-1" and selection(node, "alpha") == "hold" and selection(node, "beta") == "hold"
    assert upgraded["diff"]["before"] == "alpha 1.0-1 hold\nbeta 1.0-1 hold\n" and upgraded["diff"]["after"] == "alpha 2.0-1 hold\nbeta 2.0-1 hold\n"


def test_releases_what_is_held_in_the_same_call_then_nothing(node: dict[str, Path]) -> None:
    run(node, name=["alpha=1.0-1", "beta=1.0-1"], hold=["alpha", "beta"], lists_valid_time=3600)
    wanted = {"name": ["alpha=1.0-1", "beta=1.0-1"], "release": ["alpha", "beta", "gamma"]}
    rehearsed = run(node, check=True, diff=True, **wanted)
    assert rehearsed["changed"] and rehearsed["released_packages"] == ["alpha", "beta"] and selection(node, "alpha") == "hold"
    assert rehearsed["diff"]["after"] == "alpha 1.0-1\nbeta 1.0-1\n"
    released = run(node, **wanted)
    assert released["changed"] and released["released_packages"] == ["alpha", "beta"] and released["refreshed"] == "none"
    assert selection(node, "alpha") == "install" and selection(node, "beta") == "install"
    assert not run(node, **wanted)["changed"]
    both = run(node, name=["alpha"], hold=["alpha"], release=["alpha"])
    assert both["failed"] and both["msg"] == "release: alpha also in hold; a package is either held or released"


def test_check_mode_without_rehearsal_predicts_from_dpkg_alone(node: dict[str, Path]) -> None:
    """The repository is only predicted: apt is not asked (it would not find gamma), dpkg's state says what changes."""
    run(node, name=["beta=1.0-1"], hold=["beta"], lists_valid_time=3600)
    (node["ours"]).unlink()
    wanted = {"name": ["gamma=1.0-1", "beta=1.0-1"], "hold": ["gamma", "beta"], "update_sources": [str(node["ours"])]}
    rehearsed = run(node, check=True, diff=True, **wanted)
    assert rehearsed["failed"] and "gamma" in rehearsed["msg"]  # rehearsed, apt does not know gamma
    predicted = run(node, check=True, diff=True, rehearse=False, **wanted)
    assert not predicted["failed"], predicted["msg"]
    assert predicted["changed"] and not predicted["rehearsed"] and predicted["changed_packages"] == ["gamma"]
    assert predicted["held_packages"] == ["gamma"] and predicted["refreshed"] == "none"
    assert predicted["diff"]["before"] == "beta 1.0-1 hold\n" and predicted["diff"]["after"] == "beta 1.0-1 hold\ngamma 1.0-1 hold\n"
    assert version(node, "gamma") is None
    assert not run(node, check=True, rehearse=False, name=["beta=1.0-1"], hold=["beta"])["changed"]


def test_a_hold_of_a_package_neither_installed_nor_named_fails_before_apt(node: dict[str, Path]) -> None:
    failed = run(node, name=["alpha=1.0-1", "beta=1.0-1"], hold=["alpha", "gamma"], lists_valid_time=3600)
    assert failed["failed"] and failed["msg"].startswith("hold: gamma is neither installed nor in name"), failed["msg"]
    assert version(node, "alpha") is None and failed["held_packages"] == []
    assert run(node, name=["alpha"], hold=["beta=1.0-1"])["msg"].startswith("hold[0]:")


def test_hold_version_holds_what_apt_pulled_in_at_that_release(node: dict[str, Path]) -> None:
    """alpha pulls beta in at its own version; hold_version holds beta too, and not delta (another version)."""
    run(node, name=["delta=1.0-1"], lists_valid_time=3600)
    rehearsed = run(node, name=["alpha=2.0-1"], hold=["alpha"], hold_version="2.0", check=True, diff=True)
    assert not rehearsed["failed"], rehearsed["msg"]
    assert rehearsed["changed_packages"] == ["alpha", "beta"] and rehearsed["held_packages"] == ["alpha", "beta"]
    assert rehearsed["diff"]["after"] == "alpha 2.0-1 hold\nbeta 2.0-1 hold\n" and version(node, "beta") is None
    done = run(node, name=["alpha=2.0-1"], hold=["alpha"], hold_version="2.0", diff=True)
    assert done["held_packages"] == ["alpha", "beta"] and done["diff"]["after"] == "alpha 2.0-1 hold\nbeta 2.0-1 hold\n"
    assert [selection(node, name) for name in ("alpha", "beta", "delta")] == ["hold", "hold", "install"]
    # A release no package is at holds nothing.
    assert run(node, name=["alpha=2.0-1"], hold_version="2.0.1")["held_packages"] == []
    assert run(node, name=["alpha"], hold_version="2.0-1")["msg"].startswith("hold_version:")


def test_hold_version_reads_the_release_as_the_driver_role_does() -> None:
    from ansible_collections.gpufleet.nvidia.plugins.modules.apt_install import _upstream
    from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._driver_plan import upstream_version

    for version in ("550.163.01-1", "1:550.163.01-1~deb13u1", "550.163.011-1", "535.261.03-1~bpo12+1", "2.0-1", "v1", "1:2"):
        assert _upstream(version) == upstream_version(version), version


def copied(node: dict[str, Path]) -> None:
    """The distribution's repository as copy: (apt copies each package into its archive cache, as it does from a
    mirror over http) where file: would read it in place; its lists fetched again."""
    (node["tmp"] / "etc" / "sources.list").write_text("deb [trusted=yes] copy:{0} ./\n".format(node["tmp"] / "distro"))


def cached(node: dict[str, Path]) -> set[str]:
    return {name for name in os.listdir(node["tmp"] / "cache" / "archives") if name.endswith(".deb")}


def upgraded_and_held(node: dict[str, Path]) -> None:
    """alpha and beta at 2.0-1, held, after 1.0-1; apt's archive cache emptied (apt-get clean)."""
    copied(node)
    run(node, name=["alpha=1.0-1", "beta=1.0-1"], lists_valid_time=0)
    done = run(node, name=["alpha=2.0-1", "beta=2.0-1"], hold=["alpha", "beta"])
    assert not done["failed"], done["msg"]
    for name in cached(node):
        (node["tmp"] / "cache" / "archives" / name).unlink()


OLD = ["alpha=1.0-1", "beta=1.0-1"]
ROLLBACK = {"download_only": True, "allow_downgrade": True, "allow_change_held_packages": True}


def test_download_only_fetches_the_old_versions_and_changes_no_package(node: dict[str, Path]) -> None:
    """A rollback's first step: the old versions in apt's cache, the installed (held) packages as they were; the
    install that follows needs the mirror no more."""
    upgraded_and_held(node)
    rehearsed = run(node, check=True, name=OLD, **ROLLBACK)
    assert not rehearsed["failed"], rehearsed["msg"]
    assert rehearsed["downloaded"] == ["alpha=1.0-1", "beta=1.0-1"] and cached(node) == set()
    fetched_now = run(node, name=OLD, **ROLLBACK)
    assert not fetched_now["failed"], fetched_now["msg"]
    assert not fetched_now["changed"] and fetched_now["changed_packages"] == [] and fetched_now["held_packages"] == []
    assert fetched_now["downloaded"] == ["alpha=1.0-1", "beta=1.0-1"]
    assert cached(node) == {"alpha_1.0-1_all.deb", "beta_1.0-1_all.deb"}
    assert version(node, "alpha") == "2.0-1" and selection(node, "alpha") == "hold" and selection(node, "beta") == "hold"
    # The mirror loses them now: the install reads them from the cache.
    for name in ("alpha_1.0-1_all.deb", "beta_1.0-1_all.deb"):
        (node["tmp"] / "distro" / name).unlink()
    rolled_back = run(node, name=["alpha=1.0-1", "beta=1.0-1"], allow_downgrade=True, allow_change_held_packages=True)
    assert not rolled_back["failed"], rolled_back["msg"]
    assert version(node, "alpha") == "1.0-1" and version(node, "beta") == "1.0-1"
    # Installed as asked: nothing to fetch.
    assert run(node, name=OLD, **ROLLBACK)["downloaded"] == []


def test_download_only_names_what_could_not_be_fetched_and_changes_nothing(node: dict[str, Path]) -> None:
    upgraded_and_held(node)
    (node["tmp"] / "distro" / "alpha_1.0-1_all.deb").unlink()
    lost = run(node, name=OLD, **ROLLBACK)
    assert lost["failed"] and lost["msg"].startswith("apt-get could not download alpha=1.0-1 beta=1.0-1: "), lost["msg"]
    assert "alpha_1.0-1_all.deb" in lost["msg"] and "E: " in lost["msg"], lost["msg"]
    unknown = run(node, name=["alpha=0.9-1"], **ROLLBACK)
    assert unknown["failed"] and "'0.9-1' for 'alpha' was not found" in unknown["msg"], unknown["msg"]
    assert version(node, "alpha") == "2.0-1" and version(node, "beta") == "2.0-1"
    assert selection(node, "alpha") == "hold" and selection(node, "beta") == "hold"
    assert "alpha_1.0-1_all.deb" not in cached(node)


def test_download_only_holds_nothing(node: dict[str, Path]) -> None:
    refused = run(node, name=["alpha=1.0-1"], download_only=True, hold=["alpha"])
    assert refused["failed"] and refused["msg"].startswith("download_only:"), refused["msg"]
    assert run(node, name=["alpha=1.0-1"], download_only=True, hold_version="1.0")["msg"].startswith("download_only:")


# apt locks its lists, its archives and dpkg's database with fcntl write locks; this holds one as apt-daily or
# cloud-init does on a new node, from another process, for `seconds`.
_HOLD = """
import fcntl, os, sys, time
handle = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o640)
fcntl.lockf(handle, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def hold_lock(path: Path, seconds: float) -> subprocess.Popen:
    holder = subprocess.Popen(["python3", "-c", _HOLD, str(path), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


@pytest.mark.parametrize("lock", ["lists/lock", "cache/archives/lock", "admin/lock-frontend"])
def test_waits_while_another_apt_holds_a_lock_then_installs(node: dict[str, Path], lock: str) -> None:
    where, name = lock.split("/", 1)
    path = (node["tmp"] / where if where != "admin" else node["admin"]) / name
    holder = hold_lock(path, 3)
    started = time.monotonic()
    try:
        result = run(node, name=["beta=1.0-1"], lists_valid_time=0, lock_timeout=60)
    finally:
        holder.wait()
    assert not result.get("failed"), result.get("msg")
    assert version(node, "beta") == "1.0-1" and time.monotonic() - started >= 2.5


def test_gives_up_after_lock_timeout_naming_the_holder(node: dict[str, Path]) -> None:
    holder = hold_lock(node["lists"] / "lock", 30)
    started = time.monotonic()
    try:
        result = run(node, name=["beta=1.0-1"], lists_valid_time=0, lock_timeout=3)
    finally:
        holder.kill()
        holder.wait()
    assert result["failed"] and time.monotonic() - started < 20
    assert str(node["lists"] / "lock") in result["msg"] and "process {0}".format(holder.pid) in result["msg"], result["msg"]
    assert "lock_timeout" in result["msg"] and version(node, "beta") is None


def test_finishes_what_an_interrupted_dpkg_left_then_installs(node: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """A run killed (or a node powered off) inside dpkg leaves its journal: apt-get refuses with "dpkg was
    interrupted". The next install runs `dpkg --configure -a` as apt asks, says so, and goes on."""
    # The module's bare dpkg, at the scratch root as apt's DPkg::Options put it.
    monkeypatch.setenv("DPKG_ROOT", str(node["root"]))
    monkeypatch.setenv("DPKG_FORCE", "script-chrootless,not-root")
    first = run(node, name=["beta=1.0-1"], lists_valid_time=3600)
    assert not first["failed"], first["msg"]
    status = (node["admin"] / "status").read_text()
    stanza = next(s for s in status.split("\n\n") if s.startswith("Package: beta"))
    # dpkg's journal of a run killed between unpacking and configuring beta.
    (node["admin"] / "updates" / "0000").write_text(stanza.replace("install ok installed", "install ok half-configured").strip() + "\n")
    refused = subprocess.run(["apt-get", "install", "-y", "beta=1.0-1"], capture_output=True, text=True, check=False)
    assert "dpkg was interrupted" in refused.stderr, refused.stderr
    result = run(node, name=["alpha=1.0-1", "beta=1.0-1"], lists_valid_time=3600)
    assert not result["failed"], result["msg"]
    assert result["repaired"] == ["dpkg --configure -a"] and result["changed"]
    assert any("dpkg --configure -a" in warning for warning in result.get("warnings", [])), result
    assert version(node, "alpha") == "1.0-1"
    assert not list((node["admin"] / "updates").iterdir())
    again = run(node, name=["alpha=1.0-1", "beta=1.0-1"], lists_valid_time=3600)
    assert not again["changed"] and again["repaired"] == []
