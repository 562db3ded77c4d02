# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""apt_lists: the real apt-get, in a scratch apt configuration (APT_CONFIG) with two local repositories."""

from __future__ import annotations

import os
import shutil
import time
import typing as t
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_runner import run_module

pytestmark = pytest.mark.skipif(not shutil.which("apt-get"), reason="needs apt-get")


@pytest.fixture
def apt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """The distribution's sources in sources.list, ours in sources.list.d; lists under tmp_path."""
    etc, lists = tmp_path / "etc", tmp_path / "lists"
    for directory in (etc / "sources.list.d", etc / "apt.conf.d", etc / "preferences.d", lists / "partial",
                      tmp_path / "cache" / "archives" / "partial", tmp_path / "state", tmp_path / "distro",
                      tmp_path / "ours"):
        directory.mkdir(parents=True)
    for repo in ("distro", "ours"):
        (tmp_path / repo / "Packages").write_text("")
    (tmp_path / "state" / "status").write_text("")
    (etc / "sources.list").write_text("deb [trusted=yes] file:{0} ./\n".format(tmp_path / "distro"))
    (etc / "sources.list.d" / "ours.list").write_text("deb [trusted=yes] file:{0} ./\n".format(tmp_path / "ours"))
    (tmp_path / "apt.conf").write_text(
        'Dir::Etc "{0}";\nDir::State "{1}";\nDir::State::Lists "{2}";\nDir::State::status "{1}/status";\n'
        'Dir::Cache "{3}";\n'.format(etc, tmp_path / "state", lists, tmp_path / "cache"))
    monkeypatch.setenv("APT_CONFIG", str(tmp_path / "apt.conf"))
    return {"root": tmp_path, "lists": lists, "ours": etc / "sources.list.d" / "ours.list",
            "stamp": tmp_path / "gpufleet" / "apt-lists.stamp"}


def fetched(apt: dict[str, Path]) -> set[str]:
    return {name.split("_")[-3] for name in os.listdir(apt["lists"]) if name.endswith("_Packages")}


def run(apt: dict[str, Path], check: bool = False, **args: t.Any) -> dict[str, t.Any]:
    module_args: dict[str, t.Any] = {"stamp": str(apt["stamp"]), **args}
    if check:
        module_args["_ansible_check_mode"] = True
    outcome = run_module("apt_lists", module_args)
    assert outcome["kind"] in ("exit", "fail"), outcome["traceback"]
    return {"failed": outcome["kind"] == "fail", **outcome["result"]}


def test_first_call_refreshes_every_list_then_only_the_named_source(apt: dict[str, Path]) -> None:
    first = run(apt, sources=[str(apt["ours"])])
    assert first == {"failed": False, "changed": False, "refreshed": "all", "age": None}
    assert fetched(apt) == {"distro", "ours"} and apt["stamp"].is_file()
    assert oct(apt["stamp"].stat().st_mode & 0o777) == "0o644"
    for name in os.listdir(apt["lists"]):
        if name.endswith("_Packages"):
            (apt["lists"] / name).unlink()
    second = run(apt, sources=[str(apt["ours"])])
    assert second["refreshed"] == "sources" and second["age"] is not None and second["age"] < 60
    # Only our repository's lists came back; the distribution's were neither fetched nor cleaned up.
    assert fetched(apt) == {"ours"}
    assert run(apt)["refreshed"] == "none" and fetched(apt) == {"ours"}


def test_old_or_zero_valid_time_refreshes_everything(apt: dict[str, Path]) -> None:
    run(apt)
    hour_ago = time.time() - 3601
    os.utime(apt["stamp"], (hour_ago, hour_ago))
    for name in os.listdir(apt["lists"]):
        if name.endswith("_Packages"):
            (apt["lists"] / name).unlink()
    old = run(apt, sources=[str(apt["ours"])])
    assert old["refreshed"] == "all" and old["age"] >= 3600 and fetched(apt) == {"distro", "ours"}
    assert run(apt, valid_time=0)["refreshed"] == "all"


def test_check_mode_fetches_nothing_and_accepts_a_predicted_source(apt: dict[str, Path]) -> None:
    predicted = run(apt, check=True, sources=[str(apt["root"] / "etc" / "sources.list.d" / "not-yet.list")])
    assert predicted["refreshed"] == "all" and not predicted["failed"]
    assert fetched(apt) == set() and not apt["stamp"].exists()


def test_a_failed_fetch_fails_and_names_the_source(apt: dict[str, Path]) -> None:
    run(apt)
    (apt["root"] / "ours" / "Packages").unlink()
    failed = run(apt, sources=[str(apt["ours"])])
    assert failed["failed"] and str(apt["ours"]) in failed["msg"] and "Failed to fetch" in failed["msg"]
    stamp_time = apt["stamp"].stat().st_mtime
    failed = run(apt, valid_time=0)
    assert failed["failed"] and "every source" in failed["msg"]
    # A failed full refresh does not count as one.
    assert apt["stamp"].stat().st_mtime == stamp_time


def test_bad_arguments_name_the_field(apt: dict[str, Path]) -> None:
    assert "sources[0]" in run(apt, sources=["relative.list"])["msg"]
    missing = run(apt, sources=[str(apt["root"] / "missing.list")])
    assert missing["failed"] and "sources[0]" in missing["msg"] and "does not exist" in missing["msg"]
    assert "valid_time" in run(apt, valid_time=-1)["msg"]
