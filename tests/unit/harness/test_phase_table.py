"""tests/harness/phase.sh: each phase's CPU seconds beside its wall time, and the machine's busy core-seconds.

The figures decide where a slow CI run is cut: a phase that burns a core shows CPU near its wall time, one
that waits shows almost none. The child's CPU is read from the recording shell (env.sh child_cpu), so it
counts a grandchild too, as make's jobs and Molecule's lanes start theirs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[2] / "harness"
BURN = "import time\nend = time.process_time() + 1.5\nwhile time.process_time() < end: pass\n"


def phase(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, GPUFLEET_ROOT=str(root))
    return subprocess.run(["bash", str(root / "tests" / "harness" / "phase.sh"), *args], env=env, capture_output=True, text=True, check=False)


def rows(table: str) -> dict[str, list[str]]:
    """The table's rows by phase name: the columns after the name."""
    parsed = {}
    for line in table.splitlines():
        match = re.match(r"^(.+?)\s{2,}(-?\d.*)$", line)
        if match:
            parsed[match.group(1).strip()] = match.group(2).split()
    return parsed


def test_a_busy_phase_shows_its_cpu_and_a_waiting_one_none(tmp_path):
    shutil.copytree(HARNESS, tmp_path / "tests" / "harness")
    assert phase(tmp_path, "start").returncode == 0
    # The burning python is a grandchild: bash -c starts it and is itself waited for.
    burn = phase(tmp_path, "run", "burn", "bash", "-c", f"python3 -c '{BURN}'; true")
    wait = phase(tmp_path, "run", "wait", "sleep", "1.5")
    assert (burn.returncode, wait.returncode) == (0, 0), burn.stderr + wait.stderr
    assert phase(tmp_path, "record", "timed elsewhere", "1", "2", "ok").returncode == 0
    failed = phase(tmp_path, "run", "failing", "false")
    assert failed.returncode == 1

    table = rows(phase(tmp_path, "table").stderr)
    _start, wall, _minutes, cpu, result = table["burn"]
    assert (int(cpu), result) == (1, "ok") and int(wall) >= int(cpu), table
    assert table["wait"][3:] == ["0", "ok"]
    assert table["timed elsewhere"][3:] == ["-", "ok"]
    assert table["failing"][-1] == "FAILED"
    busy = table["machine CPU (busy core-seconds)"]
    assert int(busy[1]) >= 1 and busy[2].endswith("%") and busy[-2:] == [str(os.cpu_count()), "cores"], busy


def test_a_run_stopped_from_outside_shows_the_phases_it_was_still_running(tmp_path):
    """make test prints the table when CI stops it at its time limit; the phases still running are in it."""
    shutil.copytree(HARNESS, tmp_path / "tests" / "harness")
    assert phase(tmp_path, "start").returncode == 0
    lane = subprocess.Popen(
        ["bash", str(tmp_path / "tests" / "harness" / "phase.sh"), "run", "long lane", "sleep", "30"],
        env=dict(os.environ, GPUFLEET_ROOT=str(tmp_path)),
    )
    try:
        record = tmp_path / "tests" / "output" / "phases.tsv"
        for _attempt in range(100):
            if record.exists() and "long lane" in record.read_text():
                break
            time.sleep(0.05)
        assert phase(tmp_path, "run", "short lane", "true").returncode == 0
        text = phase(tmp_path, "table").stderr
        table = rows(text)
        assert table["long lane"][-1] == "running" and table["long lane"][3] == "-", text
        # A phase that began and ended is one row, with its result.
        assert table["short lane"][-1] == "ok" and text.count("short lane") == 1, text
    finally:
        lane.kill()
        lane.wait()
