# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""node_files: a role's own files in one call - changed then not, check mode, diff, order and mismatches."""

from __future__ import annotations

import grp
import os
import pwd
import stat
import typing as t
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_runner import module_result

ME = {"owner": pwd.getpwuid(os.getuid()).pw_name, "group": grp.getgrgid(os.getgid()).gr_name}


def declared(root: Path) -> list[dict[str, t.Any]]:
    """A boot unit as the mig and verify roles install one."""
    return [
        {"path": str(root / "lib"), "state": "directory", **ME},
        {"path": str(root / "lib" / "code.py"), "content": "print('hello')\n", "mode": "0644", **ME},
        {"path": str(root / "sbin-command"), "content": "#!/bin/sh\nexit 0\n", "mode": "0755", **ME},
        {"path": str(root / "unit.service"), "content": "[Unit]\nDescription=x\n", **ME},
        {"path": str(root / "unit-link"), "state": "link", "src": str(root / "unit.service")},
    ]


def run(files: list[dict[str, t.Any]], check: bool = False, diff: bool = False) -> dict[str, t.Any]:
    return module_result("node_files", {"files": files}, check=check, diff=diff)


def mode(path: Path) -> str:
    return "{0:04o}".format(stat.S_IMODE(os.lstat(path).st_mode))


def test_first_run_creates_in_order_second_run_changes_nothing(tmp_path: Path) -> None:
    first = run(declared(tmp_path))
    assert first["changed"] and first["changed_paths"] == [entry["path"] for entry in declared(tmp_path)]
    assert (tmp_path / "lib" / "code.py").read_text() == "print('hello')\n"
    assert mode(tmp_path / "lib") == "0755" and mode(tmp_path / "lib" / "code.py") == "0644"
    assert mode(tmp_path / "sbin-command") == "0755" and mode(tmp_path / "unit.service") == "0644"
    assert os.readlink(tmp_path / "unit-link") == str(tmp_path / "unit.service")
    assert not list(tmp_path.glob(".gpufleet-*")) and not list((tmp_path / "lib").glob(".gpufleet-*"))
    second = run(declared(tmp_path))
    assert not second["changed"] and second["changed_paths"] == []


def test_check_mode_predicts_every_change_and_writes_nothing(tmp_path: Path) -> None:
    predicted = run(declared(tmp_path), check=True, diff=True)
    assert predicted["changed_paths"] == [entry["path"] for entry in declared(tmp_path)]
    assert list(tmp_path.iterdir()) == []
    run(declared(tmp_path))
    (tmp_path / "unit.service").write_text("edited\n")
    (tmp_path / "sbin-command").chmod(0o700)
    predicted = run(declared(tmp_path), check=True)
    assert predicted["changed_paths"] == [str(tmp_path / "sbin-command"), str(tmp_path / "unit.service")]
    assert (tmp_path / "unit.service").read_text() == "edited\n" and mode(tmp_path / "sbin-command") == "0700"


def test_diff_shows_content_and_mode_changes(tmp_path: Path) -> None:
    run(declared(tmp_path))
    (tmp_path / "unit.service").write_text("edited\n")
    (tmp_path / "sbin-command").chmod(0o700)
    result = run(declared(tmp_path), diff=True)
    content = [d for d in result["diff"] if d.get("before_header") == str(tmp_path / "unit.service")]
    assert content == [{"before_header": str(tmp_path / "unit.service"), "after_header": str(tmp_path / "unit.service"),
                        "before": "edited\n", "after": "[Unit]\nDescription=x\n"}]
    modes = [d for d in result["diff"] if d.get("before", {}) and isinstance(d["before"], dict)
             and d["before"].get("path") == str(tmp_path / "sbin-command")]
    assert modes[0]["before"]["mode"] == "0700" and modes[0]["after"]["mode"] == "0755"
    assert (tmp_path / "unit.service").read_text() == "[Unit]\nDescription=x\n"


def test_a_replaced_file_keeps_no_temporary_and_a_wrong_link_is_repointed(tmp_path: Path) -> None:
    run(declared(tmp_path))
    (tmp_path / "unit-link").unlink()
    (tmp_path / "unit-link").symlink_to("/elsewhere")
    result = run(declared(tmp_path))
    assert result["changed_paths"] == [str(tmp_path / "unit-link")]
    assert os.readlink(tmp_path / "unit-link") == str(tmp_path / "unit.service")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lib", "sbin-command", "unit-link", "unit.service"]


def test_absent_removes_files_links_and_directories_and_then_changes_nothing(tmp_path: Path) -> None:
    run(declared(tmp_path))
    gone = [{"path": entry["path"], "state": "absent"} for entry in reversed(declared(tmp_path))]
    predicted = run(gone, check=True)
    assert len(predicted["changed_paths"]) == 5 and (tmp_path / "lib" / "code.py").exists()
    removed = run(gone)
    assert removed["changed"] and list(tmp_path.iterdir()) == []
    assert not run(gone)["changed"]


@pytest.mark.parametrize(("entry", "message"), [
    ({"path": "relative/file", "content": "x"}, "files[0].path: 'relative/file' is not absolute"),
    ({"path": "/tmp/x", "state": "file"}, "files[0].content: required with state=file"),
    ({"path": "/tmp/x", "state": "link"}, "files[0].src: required with state=link"),
])
def test_bad_entries_name_the_field(entry: dict[str, t.Any], message: str) -> None:
    result = run([entry])
    assert result["failed"] and message in result["msg"]


def test_a_path_of_another_kind_is_an_error_not_replaced(tmp_path: Path) -> None:
    (tmp_path / "unit.service").mkdir()
    result = run(declared(tmp_path))
    assert result["failed"] and "is a directory, declared a file" in result["msg"]
    assert (tmp_path / "unit.service").is_dir()
    assert result["changed_paths"] == [str(tmp_path / "lib"), str(tmp_path / "lib" / "code.py"),
                                       str(tmp_path / "sbin-command")]


def test_a_file_whose_directory_is_missing_says_to_declare_it(tmp_path: Path) -> None:
    result = run([{"path": str(tmp_path / "nowhere" / "file"), "content": "x", **ME}])
    assert result["failed"] and "declare it first" in result["msg"]
