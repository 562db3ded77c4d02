"""tests/harness/awx_artifacts.py: a job passes only on what its runner artifacts say.

The real artifact directories come from awx-ee.sh's jobs (make awx); here they
are written in the layout ansible-runner's `process` leaves (status, rc,
job_events/<counter>-<uuid>.json), to show that each expectation can fail.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

NODE = "gpufleet-awx-node"


@pytest.fixture(name="judge", scope="module")
def fixture_judge(harness_script):
    return harness_script("awx_artifacts.py")


def converge_stats() -> dict:
    return {
        "changed": {NODE: 40},
        "failures": {},
        "dark": {},
        "artifact_data": {
            "gpufleet_preflight": {NODE: {"status": "pass"}},
            "gpufleet_fast_path": {NODE: {"skipped": False}},
            "gpufleet_driver": {NODE: {"version": "550.163.01"}},
            "gpufleet_verify": {
                NODE: {
                    "status": "warn",
                    "summary": {"error": 0, "warning": 3, "info": 2},
                    "checks": {layer: "pass" for layer in ("driver", "container_toolkit", "container_runtime", "cdi", "crictl", "mig", "health")}
                    | {"matrix": "warn", "workload": "warn"},
                }
            },
        },
    }


def write_job(path: Path, status: str = "successful", rc: int = 0, stats: dict | None = None) -> Path:
    (path / "job_events").mkdir(parents=True)
    (path / "status").write_text(status)
    (path / "rc").write_text(str(rc))
    (path / "job_events" / "1-a.json").write_text(json.dumps({"event": "playbook_on_start", "counter": 1}))
    if stats is not None:
        (path / "job_events" / "9-b.json").write_text(json.dumps({"event": "playbook_on_stats", "counter": 9, "event_data": stats}))
    return path


def test_a_converge_that_published_its_results_passes(judge, tmp_path, capsys):
    assert judge.main(["converge", str(write_job(tmp_path / "job", stats=converge_stats())), NODE]) == 0
    assert "FAIL" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("change", "failed_line"),
    [
        (lambda job: job.update(status="failed", rc=2), "FAIL runner status"),
        (lambda job: job["stats"]["failures"].update({NODE: 1}), "FAIL failures"),
        (lambda job: job["stats"]["artifact_data"]["gpufleet_verify"][NODE].update(status="fail"), "FAIL gpufleet_verify status"),
        (lambda job: job["stats"]["artifact_data"]["gpufleet_verify"][NODE]["checks"].update(cdi="fail"), "FAIL gpufleet_verify layers"),
        (lambda job: job["stats"]["artifact_data"].pop("gpufleet_driver"), "FAIL gpufleet_driver version"),
        (lambda job: job.update(stats=None), "FAIL one playbook_on_stats event"),
    ],
)
def test_a_converge_fails_on_what_its_artifacts_say(judge, tmp_path, capsys, change, failed_line):
    job = {"status": "successful", "rc": 0, "stats": converge_stats()}
    change(job)
    assert judge.main(["converge", str(write_job(tmp_path / "job", **job)), NODE]) == 1
    assert failed_line in capsys.readouterr().out


def test_a_rerun_must_take_the_fast_path_and_change_nothing(judge, tmp_path, capsys):
    stats = converge_stats()
    stats["artifact_data"]["gpufleet_verify"][NODE]["unchanged_since"] = "2026-11-28T12:00:00Z"
    assert judge.main(["rerun", str(write_job(tmp_path / "job", stats=stats)), NODE]) == 1
    out = capsys.readouterr().out
    assert "FAIL changed tasks: 40" in out
    assert "FAIL gpufleet_fast_path skipped: false" in out


def test_artifacts_that_never_came_back_are_named(judge, tmp_path):
    with pytest.raises(SystemExit, match="no status file"):
        judge.main(["check", str(tmp_path), NODE])
