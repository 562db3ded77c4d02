"""The fault-injection suite's points and its kill trigger (tests/faults/): the data, not a run."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
FAULTS = ROOT / "tests" / "faults"
POINTS = yaml.safe_load((FAULTS / "points.yml").read_text())["points"]
# Layers the simulated stack (benchmarks/_sim_stack.sh) does not declare: their roles change nothing there.
NOT_DECLARED = {"slurm_gres", "dcgm", "imex"}


def site_layers() -> set[str]:
    plays = [play for name in ("site.yml", "facts.yml") for play in yaml.safe_load((ROOT / "playbooks" / name).read_text())]
    return {tag for play in plays for tag in play.get("tags", [])} - {"always"}


def test_every_declared_layer_has_a_point_and_the_record_too() -> None:
    assert {p["layer"] for p in POINTS} == (site_layers() - NOT_DECLARED) | {"record"}


def test_at_least_twenty_points_each_well_formed() -> None:
    assert len(POINTS) >= 20
    assert len({p["name"] for p in POINTS}) == len(POINTS)
    for point in POINTS:
        assert point["action"] in ("controller", "connection", "node"), point
        assert point["at"] in ("end", "dpkg") or re.fullmatch(r"start:\d+(\.\d+)?", point["at"]), point
        assert point["task"].strip() == point["task"] and point["task"], point


def test_make_test_runs_the_power_loss_inside_dpkg() -> None:
    # CI's 90 minutes hold one point: the one whose repair takes the most
    # (dpkg half-done, the lease of a run that is gone, the node rebooted).
    assert [(p["action"], p["at"]) for p in POINTS if p.get("ci")] == [("node", "dpkg")]


@pytest.fixture(name="trigger")
def fixture_trigger(monkeypatch, tmp_path):
    spec = importlib.util.spec_from_file_location("gpufleet_kill_point", FAULTS / "callback_plugins" / "gpufleet_kill_point.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def make(task: str, at: str):
        monkeypatch.setenv("GPUFLEET_KILL_TASK", task)
        monkeypatch.setenv("GPUFLEET_KILL_AT", at)
        monkeypatch.setenv("GPUFLEET_KILL_MARK", str(tmp_path / "reached.json"))
        callback = module.CallbackModule()
        fired = []
        monkeypatch.setattr(callback, "_act", lambda: fired.append(True))
        return callback, fired

    return make


class Task:
    def __init__(self, name: str, uuid: str) -> None:
        self.name, self._uuid = name, uuid

    def get_name(self) -> str:
        return self.name


class Result:
    def __init__(self, task: Task) -> None:
        self._task = task


def test_the_trigger_fires_once_at_the_end_of_the_named_task_only(trigger, tmp_path) -> None:
    callback, fired = trigger("r : Install the driver 5*", "end")
    other, named = Task("r : Install the toolkit", "1"), Task("r : Install the driver 550.163.01", "2")
    callback.v2_playbook_on_task_start(other, False)
    callback.v2_runner_on_ok(Result(other))
    assert not fired and not (tmp_path / "reached.json").exists()
    callback.v2_playbook_on_task_start(named, False)
    callback.v2_runner_on_start("host", named)  # "end" waits for the task to end
    assert not fired
    callback.v2_runner_on_ok(Result(named))
    callback.v2_runner_on_ok(Result(named))
    assert fired == [True] and (tmp_path / "reached.json").exists()


def test_an_exact_name_does_not_match_a_longer_one(trigger) -> None:
    callback, fired = trigger("r : Write", "start:0")
    callback.v2_playbook_on_task_start(Task("r : Write config.toml", "1"), False)
    callback.v2_runner_on_start("host", Task("r : Write config.toml", "1"))
    assert not fired
