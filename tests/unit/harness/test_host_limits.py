"""tests/harness/host-limits.sh: raises the inotify limits the nodes need, keeps higher ones, and stops at once with the command to run when it cannot."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "harness" / "host-limits.sh"
INSTANCES = "fs/inotify/max_user_instances"
WATCHES = "fs/inotify/max_user_watches"


def run(tmp_path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, GPUFLEET_SYSCTL_DIR=str(tmp_path / "sysctl.d"), GPUFLEET_PROC_SYS=str(tmp_path / "proc"))
    return subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, check=False)


def proc(tmp_path: Path, values: dict[str, str]) -> None:
    for name, value in values.items():
        path = tmp_path / "proc" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value + "\n")


def drop_in(tmp_path: Path) -> list[str]:
    text = (tmp_path / "sysctl.d" / "60-gpufleet-test-ground.conf").read_text()
    return [line for line in text.splitlines() if not line.startswith("#")]


def test_raises_the_kernel_defaults_and_writes_its_drop_in(tmp_path):
    proc(tmp_path, {INSTANCES: "128", WATCHES: "8192"})
    result = run(tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "proc" / INSTANCES).read_text().strip() == "1024"
    assert (tmp_path / "proc" / WATCHES).read_text().strip() == "524288"
    assert drop_in(tmp_path) == ["fs.inotify.max_user_instances = 1024", "fs.inotify.max_user_watches = 524288"]
    assert "raised fs.inotify.max_user_instances fs.inotify.max_user_watches" in result.stderr


def test_keeps_what_the_host_already_allows_and_is_quiet_the_second_time(tmp_path):
    proc(tmp_path, {INSTANCES: "8192", WATCHES: "1048576"})
    first = run(tmp_path)
    assert first.returncode == 0, first.stderr
    assert (tmp_path / "proc" / INSTANCES).read_text().strip() == "8192"
    assert drop_in(tmp_path) == ["fs.inotify.max_user_instances = 8192", "fs.inotify.max_user_watches = 1048576"]
    second = run(tmp_path)
    assert second.returncode == 0 and second.stderr == ""


@pytest.mark.skipif(not Path("/proc/sys/kernel/cap_last_cap").exists(), reason="needs a read-only integer sysctl")
def test_a_limit_it_cannot_raise_stops_the_run_with_the_command_to_run(tmp_path):
    # cap_last_cap is a read-only integer far below the minimum: writing it
    # fails even for root, as it does for /proc/sys in an unprivileged container.
    proc(tmp_path, {WATCHES: "524288"})
    (tmp_path / "proc" / INSTANCES).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "proc" / INSTANCES).symlink_to("/proc/sys/kernel/cap_last_cap")
    result = run(tmp_path)
    assert result.returncode == 1
    assert "the test ground needs at least 1024" in result.stderr
    assert "sysctl -w fs.inotify.max_user_instances=1024" in result.stderr
    assert not (tmp_path / "sysctl.d").exists()
