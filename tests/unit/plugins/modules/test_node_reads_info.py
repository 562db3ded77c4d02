# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""node_reads_info: files and real commands read by name in one call; what is missing is said, not raised."""

from __future__ import annotations

import sys
import typing as t
from pathlib import Path

from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_runner import module_result


def run(check: bool = False, **args: t.Any) -> dict[str, t.Any]:
    return module_result("node_reads_info", args, check=check)


def test_reads_files_and_commands_by_name(tmp_path: Path) -> None:
    (tmp_path / "version").write_bytes(b"NVRM version: 550.163.01\n\xff\n")
    result = run(check=True,
                 files={"version": str(tmp_path / "version"), "spec": str(tmp_path / "missing.yaml")},
                 commands={"echo": [sys.executable, "-c", "import sys; print(sys.argv[1]); sys.exit(3)", "ok"],
                           "stderr": [sys.executable, "-c", "import sys; sys.stderr.write('broken')"],
                           "absent": ["gpufleet-no-such-program", "info"]})
    assert not result["changed"]
    assert result["files"] == {"version": "NVRM version: 550.163.01\n\ufffd\n", "spec": None}
    assert result["file_errors"] == {}
    assert result["commands"]["echo"] == {"rc": 3, "stdout": "ok\n", "stderr": ""}
    assert result["commands"]["stderr"] == {"rc": 0, "stdout": "", "stderr": "broken"}
    assert result["commands"]["absent"] == {"rc": 127, "stdout": "",
                                            "stderr": "gpufleet-no-such-program is not installed"}


def test_unreadable_files_say_why_and_output_is_bounded(tmp_path: Path) -> None:
    (tmp_path / "big").write_text("x" * 100)
    result = run(files={"dir": str(tmp_path), "big": str(tmp_path / "big")},
                 commands={"many": [sys.executable, "-c", "print('y' * 100)"]}, max_bytes=10)
    assert result["files"] == {"dir": None, "big": "x" * 10}
    assert result["file_errors"]["dir"].startswith(str(tmp_path) + ": ")
    assert result["commands"]["many"]["stdout"] == "y" * 10


def test_a_command_past_its_time_is_stopped() -> None:
    result = run(commands={"slow": [sys.executable, "-c", "import time; print('started', flush=True); time.sleep(30)"]},
                 timeout=1)
    assert result["commands"]["slow"]["rc"] == 124
    assert result["commands"]["slow"]["stdout"] == "started\n"
    assert "did not finish within 1 s" in result["commands"]["slow"]["stderr"]


def test_bad_arguments_name_the_field() -> None:
    assert run(files={"spec": "relative/path"})["msg"].startswith("files.spec:")
    assert run(commands={"engine": "containerd config dump"})["msg"].startswith("commands.engine:")
    assert run(commands={"engine": []})["msg"].startswith("commands.engine:")
    nothing = run()
    assert (nothing["files"], nothing["file_errors"], nothing["commands"]) == ({}, {}, {})
