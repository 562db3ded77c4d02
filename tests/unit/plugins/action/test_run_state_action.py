# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The run's state (plugin_utils/_run_state), through real plays: nvml_info's shared read is made once per run,
run_state forgets it, a fresh read replaces it, and a fact another run left is never taken for this run's."""

from __future__ import annotations

import json
import typing as t
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _run_state
from ansible_collections.gpufleet.nvidia.tests.unit.playbook_run import local_play

# No NVML here: the module reads "library_not_found" (not an error), which is a read like any other.
NO_LIBRARY = "/nonexistent/libnvidia-ml.so.1"


def play(tmp_path: Path, tasks: list[dict[str, t.Any]], *options: str, rc: int = 0) -> tuple[dict[str, t.Any], str]:
    """Run `tasks` (each registers under its `register`) and return every registered result by name, and the output."""
    names = [task["register"] for task in tasks if "register" in task]
    book = tmp_path / "play.yml"
    out = tmp_path / "out.json"
    dump = {
        "ansible.builtin.copy": {"content": "{{ {%s} | to_json }}" % ", ".join("'{0}': {0} | default(none)".format(n) for n in names), "dest": str(out)},
        "check_mode": False,
    }
    book.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": tasks + [dump]}]))
    output = local_play(book, *options, rc=rc)
    return (json.loads(out.read_text()) if out.exists() else {}), output


def read(register: str, run_read: str = "shared", **more: t.Any) -> dict[str, t.Any]:
    return {"gpufleet.nvidia.nvml_info": dict({"library": NO_LIBRARY, "run_read": run_read}, **more), "register": register}


def forget(register: str) -> dict[str, t.Any]:
    return {"gpufleet.nvidia.run_state": {"forget": ["nvml"]}, "register": register}


def test_the_run_reads_once_until_a_role_forgets_the_read(tmp_path: Path) -> None:
    found, output = play(tmp_path, [read("first"), read("second"), read("own", "own"), forget("forgot"), read("third"), read("fourth")])
    assert found["first"]["run_read"] == "read" and found["first"]["nvml"]["status"] == "library_not_found"
    assert found["second"]["run_read"] == "held" and found["second"]["nvml"] == found["first"]["nvml"]
    assert "run_read" not in found["own"]  # an own read keeps nothing and takes nothing
    assert found["forgot"]["forgotten"] == ["nvml"] and not found["forgot"]["changed"]
    assert found["third"]["run_read"] == "read" and found["fourth"]["run_read"] == "held"
    assert "DEPRECATION" not in output and "[WARNING]" not in output


def test_a_fresh_read_replaces_the_runs_and_check_mode_shares_too(tmp_path: Path) -> None:
    found, _output = play(tmp_path, [read("first"), read("fresh", "fresh"), read("after")], "--check")
    assert (found["first"]["run_read"], found["fresh"]["run_read"], found["after"]["run_read"]) == ("read", "read", "held")


def test_a_fact_another_run_left_is_not_this_runs(tmp_path: Path) -> None:
    """A fact cache (AWX's fact storage) keeps host facts between runs: the read names its run, and another's is stale."""
    stale = {_run_state.FACT: {"run": "controller:1:1", "nvml": {"status": "ok", "gpus": ["stale"]}, "runtime": None}}
    left = {"ansible.builtin.set_fact": dict(stale, cacheable=True), "register": "left"}
    found, _output = play(tmp_path, [left, read("first")])
    assert found["first"]["run_read"] == "read" and found["first"]["nvml"]["status"] == "library_not_found"


@pytest.mark.parametrize(
    "task,message",
    [
        (read("bad", gather_health=False), "nvml_info: run_read=shared is the run's read with the module's defaults; it takes no gather_health"),
        (read("bad", "sometimes"), "nvml_info: run_read must be one of own, shared, fresh, not 'sometimes'"),
        ({"gpufleet.nvidia.run_state": {"forget": ["gpus"]}, "register": "bad"}, "run_state: forget must list one or more of nvml, runtime"),
    ],
)
def test_bad_options_name_the_option(tmp_path: Path, task: dict[str, t.Any], message: str) -> None:
    _found, output = play(tmp_path, [task], rc=2)
    assert message in output


def test_the_state_names_its_run() -> None:
    facts = _run_state.facts_with({}, nvml={"status": "ok"})
    assert facts[_run_state.FACT]["run"] == _run_state.this_run()["run_id"]
    assert _run_state.held({"ansible_facts": facts}, "nvml") == {"status": "ok"}
    assert _run_state.held({"ansible_facts": {_run_state.FACT: dict(facts[_run_state.FACT], run="elsewhere:1:1")}}, "nvml") is None
    with pytest.raises(ValueError, match="run state has no gpus"):
        _run_state.facts_with({}, gpus=[])
