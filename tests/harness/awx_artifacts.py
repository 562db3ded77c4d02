# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Judge a job of awx-ee.sh by its ansible-runner artifact directory, as AWX does.

    awx_artifacts.py check|converge|rerun ARTIFACT_DIR NODE

AWX takes a job's result from the runner's status and rc, its host counts
from the `playbook_on_stats` event, and the job's artifacts (what set_stats
published, handed to the next job of a workflow) from that event's
`artifact_data`. Each kind of job has its expectations below; every failed
one is printed, and the exit status is 1 if any failed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def read_job(artifact_dir: Path) -> dict:
    status_file = artifact_dir / "status"
    if not status_file.is_file():
        raise SystemExit("{0}: no status file: the job's artifacts never came back (see the job's .stdout)".format(artifact_dir))
    stats = [
        event
        for event in (json.loads(path.read_text()) for path in sorted((artifact_dir / "job_events").glob("*.json")))
        if event.get("event") == "playbook_on_stats"
    ]
    return {
        "status": status_file.read_text().strip(),
        "rc": int((artifact_dir / "rc").read_text().strip()),
        "stats": stats[0]["event_data"] if len(stats) == 1 else None,
    }


# The layers the declaration of awx-ee.sh's node (benchmarks/_sim_stack.sh)
# installs and verify checks; each must pass.
LAYERS = ("driver", "container_toolkit", "container_runtime", "cdi", "crictl", "mig", "health")


def verified(stat) -> list[tuple[str, object, object]]:
    """The node verified: no error, every layer passed.

    The report is `warn`, not `pass`, for warnings of the declaration itself
    (no verify_workload_image, so the workload check does not run; driver
    branch R550 and containerd 1.7 past their end of life, which grows with
    the calendar), so warnings are not counted.
    """
    checks = stat("gpufleet_verify", "checks") or {}
    return [
        ("gpufleet_verify status", "warn", stat("gpufleet_verify", "status")),
        ("gpufleet_verify errors", 0, stat("gpufleet_verify", "summary", "error")),
        ("gpufleet_verify layers", dict.fromkeys(LAYERS, "pass"), {layer: checks.get(layer) for layer in LAYERS}),
    ]


def expectations(kind: str, job: dict, node: str) -> list[tuple[str, object, object]]:
    """(what, expected, found) for one kind of job."""
    stats = job["stats"] or {}
    data = stats.get("artifact_data", {})

    def count(name: str) -> int:
        return stats.get(name, {}).get(node, 0)

    def stat(key: str, *path: str) -> object:
        value = data.get(key, {}).get(node)
        for step in path:
            value = value.get(step) if isinstance(value, dict) else None
        return value

    found = [
        ("runner status", "successful", job["status"]),
        ("runner rc", 0, job["rc"]),
        ("one playbook_on_stats event", True, job["stats"] is not None),
        ("failures", 0, count("failures")),
        ("unreachable", 0, count("dark")),
        ("gpufleet_preflight status", "pass", stat("gpufleet_preflight", "status")),
    ]
    if kind == "check":
        # Nothing is installed yet: check mode reports what would change.
        found += [
            ("changed tasks (would change)", True, count("changed") > 0),
            ("gpufleet_fast_path skipped", False, stat("gpufleet_fast_path", "skipped")),
        ]
    elif kind == "converge":
        found += [
            ("changed tasks", True, count("changed") > 0),
            ("gpufleet_fast_path skipped", False, stat("gpufleet_fast_path", "skipped")),
            ("gpufleet_driver version", "550.163.01", stat("gpufleet_driver", "version")),
        ] + verified(stat)
    elif kind == "rerun":
        # The fast path: the node matches its last verified converge, and its
        # gpufleet_verify entry is that converge's report.
        found = [item for item in found if item[0] != "gpufleet_preflight status"]
        found += [
            ("changed tasks", 0, count("changed")),
            ("gpufleet_fast_path skipped", True, stat("gpufleet_fast_path", "skipped")),
            ("gpufleet_verify unchanged_since set", True, bool(stat("gpufleet_verify", "unchanged_since"))),
        ] + verified(stat)
    else:
        raise SystemExit("unknown job kind {0!r}: expected check, converge or rerun".format(kind))
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        raise SystemExit("usage: awx_artifacts.py check|converge|rerun ARTIFACT_DIR NODE")
    kind, artifact_dir, node = argv
    job = read_job(Path(artifact_dir))
    failed = 0
    for what, expected, found in expectations(kind, job, node):
        ok = expected == found
        failed += not ok
        print("{0} {1}: {2}{3}".format("ok  " if ok else "FAIL", what, json.dumps(found), "" if ok else " (expected {0})".format(json.dumps(expected))))
    if job["stats"] is not None:
        data = job["stats"].get("artifact_data", {})
        print("set_stats keys: {0}".format(", ".join(sorted(data))))
        if failed:
            # What the job published about the node says why.
            print(json.dumps({key: value.get(node) for key, value in data.items()}, indent=1, sort_keys=True)[:6000])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
