# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""node_fingerprint: a record, then a comparison that matches until something drifts, and names what did."""

from __future__ import annotations

import json
import os
import stat
import typing as t
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.plugins.modules import node_fingerprint as fp
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_runner import run_module

# What `dpkg-query -W -f '${binary:Package}\t${Version}\t${db:Status-Abbrev}\n'` prints (the driver role's query).
DPKG = (
    "nvidia-driver:amd64\t550.163.01-1\thi \n"
    "bash:amd64\t5.2.37-2\tii \n"
    "libnvidia-ml1:amd64\t550.163.01-1\tii \n"
    "libnvidia-ml1:i386\t550.163.01-1\thi \n"
    "nvidia-container-toolkit:amd64\t1.17.8-1\tii \n"
)


class Failed(Exception):
    pass


class FakeModule:
    """What NodeFingerprint uses of AnsibleModule, without a process around it."""

    def __init__(self, params: dict[str, t.Any], check_mode: bool = False, root: Path | None = None) -> None:
        self.params = params
        self.check_mode = check_mode
        self.root = root
        self.systemctl: list[list[str]] = []
        self.warnings: list[str] = []

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def fail_json(self, msg: str, **extra: t.Any) -> None:
        raise Failed(msg, extra)

    @staticmethod
    def get_bin_path(name: str) -> str | None:
        return None

    def run_command(self, args: list[str], environ_update: dict[str, str] | None = None) -> tuple[int, str, str]:
        if args[0] == "systemctl":
            self.systemctl.append(args)
            return 0, "", ""
        assert self.root is not None and args[0] == "dpkg-query", args
        return 0, (self.root / "dpkg-query.out").read_text(), ""


@pytest.fixture
def node(tmp_path: Path) -> Path:
    etc = tmp_path / "etc"
    (etc / "containerd" / "conf.d").mkdir(parents=True)
    (etc / "containerd" / "config.toml").write_text('version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n')
    (etc / "containerd" / "conf.d" / "99-nvidia.toml").write_text("[plugins]\n")
    (etc / "crictl.yaml").write_text("runtime-endpoint: unix:///run/containerd/containerd.sock\n")
    (etc / "cache" / "__pycache__").mkdir(parents=True)
    (tmp_path / "var" / "lib" / "dpkg").mkdir(parents=True)
    (tmp_path / "var" / "lib" / "dpkg" / "status").write_text("")  # the reader's sign of a dpkg system
    (tmp_path / "dpkg-query.out").write_text(DPKG)
    return tmp_path


def watch(root: Path) -> dict[str, t.Any]:
    return {
        "paths": [str(root / "etc" / "containerd"), str(root / "etc" / "crictl.yaml"), str(root / "etc" / "cache"), str(root / "etc" / "not-there")],
        "packages": ["nvidia-*", "libnvidia-*"],
        "units": [],
        "nvml": False,
    }


def manager(
    root: Path,
    state: str = "compared",
    declaration: dict[str, str] | None = None,
    check_mode: bool = False,
    report: str | None = None,
    lease: dict[str, t.Any] | None = None,
    wait: int = 0,
    take_over: str = "",
) -> fp.NodeFingerprint:
    params = {
        "state": state,
        "lease": lease,
        "lease_wait": wait,
        "lease_take_over": take_over,
        "lease_path": str(root / "lib" / "run-lease.json"),
        "lock_path": str(root / "run" / "gpufleet.lock"),
        "stopped_path": str(root / "lib" / "stopped-services.json"),
        "path": str(root / "lib" / "fingerprint.json"),
        "prefixes": ["driver_"],
        "report": report,
        "declaration": declaration if declaration is not None else {"driver_version": "aa", "(collection)": "c1"},
        "watch": watch(root) if state == "recorded" else None,
    }
    return fp.NodeFingerprint(FakeModule(params, check_mode, root), root=str(root), unit_dirs=())


def test_no_record_does_not_match(node: Path) -> None:
    result = manager(node).run()
    assert not result["matched"] and not result["changed"]
    assert result["reasons"] == [
        "no fingerprint at {0}: no converge has passed verify here yet (or its record was unreadable)".format(node / "lib" / "fingerprint.json")
    ]


def test_record_then_compare_matches_and_the_record_is_private(node: Path) -> None:
    recorded = manager(node, "recorded").run()
    assert recorded["changed"] and recorded["recorded_at"]
    record_path = node / "lib" / "fingerprint.json"
    assert stat.S_IMODE(os.stat(record_path).st_mode) == 0o600
    record = json.loads(record_path.read_text())
    assert record["state"]["package:nvidia-driver"] == "550.163.01-1 held"
    assert record["state"]["package:libnvidia-ml1"] == "550.163.01-1, 550.163.01-1 held"  # both architectures
    assert "package:bash" not in record["state"]  # only what the patterns name
    assert record["state"]["path:" + str(node / "etc" / "not-there")] == "absent"
    assert not any("__pycache__" in key for key in record["state"])
    compared = manager(node).run()
    assert compared["matched"] and compared["reasons"] == [] and not compared["changed"]
    assert compared["recorded_at"] == recorded["recorded_at"]
    again = manager(node, "recorded").run()
    assert not again["changed"] and again["recorded_at"] == recorded["recorded_at"]


def test_each_kind_of_drift_is_named(node: Path) -> None:
    manager(node, "recorded").run()
    (node / "etc" / "crictl.yaml").write_text("runtime-endpoint: unix:///run/crio/crio.sock\n")
    os.chmod(node / "etc" / "containerd" / "config.toml", 0o600)
    (node / "etc" / "containerd" / "conf.d" / "10-other.toml").write_text("")
    (node / "dpkg-query.out").write_text(DPKG.replace("550.163.01-1\thi", "550.163.01-1\tii", 1))
    result = manager(node).run()
    assert not result["matched"]
    assert result["reasons"] == [
        "node changed: nvidia-driver (550.163.01-1 held -> 550.163.01-1), {0} (new), {1}, {2}".format(
            node / "etc" / "containerd" / "conf.d" / "10-other.toml", node / "etc" / "containerd" / "config.toml", node / "etc" / "crictl.yaml"
        )
    ]


def test_the_last_verify_report_must_have_passed_and_is_returned(node: Path) -> None:
    """A --tags verify run that failed after the record: the node no longer matches, whatever the fingerprint says."""
    report_path = node / "lib" / "verify.json"
    manager(node, "recorded").run()
    missing = manager(node, report=str(report_path)).run()
    assert not missing["matched"] and missing["report"] is None
    assert missing["reasons"] == ["verify report {0} is missing".format(report_path)]
    passed = {"host": "n", "status": "warn", "summary": {"error": 0, "warning": 1, "info": 0}, "checks": []}
    report_path.write_text(json.dumps(passed))
    matched = manager(node, report=str(report_path)).run()
    assert matched["matched"] and matched["report"] == passed and matched["reasons"] == []
    report_path.write_text(json.dumps(dict(passed, status="fail")))
    failed = manager(node, report=str(report_path)).run()
    assert not failed["matched"] and failed["report"] is None
    assert failed["reasons"] == ["verify report {0} says fail: the last verify did not pass".format(report_path)]
    report_path.write_text("{")
    assert manager(node, report=str(report_path)).run()["reasons"][0].startswith("verify report {0} is unreadable".format(report_path))
    # Without the option the report is not read (a tagged run's caller, or a node without the verify role).
    assert manager(node).run()["matched"]


def test_a_changed_declaration_is_named_by_variable(node: Path) -> None:
    manager(node, "recorded").run()
    result = manager(node, declaration={"driver_version": "bb", "(collection)": "c1", "driver_branch": "cc"}).run()
    assert result["reasons"] == ["declaration changed: driver_branch (new), driver_version"]
    assert not result["matched"]


def test_check_mode_records_nothing(node: Path) -> None:
    result = manager(node, "recorded", check_mode=True).run()
    assert result["changed"]
    assert not (node / "lib" / "fingerprint.json").exists()


def test_a_torn_record_counts_as_none(node: Path) -> None:
    manager(node, "recorded").run()
    (node / "lib" / "fingerprint.json").write_text('{"format": 1, "decl')
    assert not manager(node).run()["matched"]


def test_many_changes_are_counted_not_listed(node: Path) -> None:
    manager(node, "recorded").run()
    for index in range(12):
        (node / "etc" / "containerd" / "conf.d" / "{0:02d}.toml".format(index)).write_text("")
    (reason,) = manager(node).run()["reasons"]
    assert reason.endswith("07.toml (new) and 4 more")  # 12 new files, 8 listed


def test_systemctl_show_blocks() -> None:
    text = (
        "Id=containerd.service\nLoadState=loaded\nActiveState=active\nUnitFileState=enabled\n\n"
        "Id=crio.service\nLoadState=not-found\nActiveState=inactive\nUnitFileState=\n"
    )
    assert fp.parse_systemctl_show(text) == {"unit:containerd.service": "loaded active enabled", "unit:crio.service": "not-found inactive -"}


def test_oneshot_boot_units_read_the_same_before_and_after_a_boot() -> None:
    # gpufleet-mig.service: inactive after the converge applied MIG itself, active (RemainAfterExit) after a boot.
    def show(active: str) -> str:
        return (
            "Id=gpufleet-mig.service\nType=oneshot\nLoadState=loaded\nActiveState={0}\nUnitFileState=enabled\n\n"
            "Id=containerd.service\nType=notify\nLoadState=loaded\nActiveState={0}\nUnitFileState=enabled\n"
        ).format(active)

    after_converge, after_boot = fp.parse_systemctl_show(show("inactive")), fp.parse_systemctl_show(show("active"))
    assert after_converge["unit:gpufleet-mig.service"] == after_boot["unit:gpufleet-mig.service"]
    # A failed boot unit still tells, and a long-running service's state still counts.
    assert fp.parse_systemctl_show(show("failed"))["unit:gpufleet-mig.service"] == "loaded failed enabled"
    assert after_converge["unit:containerd.service"] != after_boot["unit:containerd.service"]


def test_unit_patterns_expand_over_unit_files(tmp_path: Path) -> None:
    for name in ("gpufleet-mig.service", "gpufleet-verify-boot.service", "ssh.service"):
        (tmp_path / name).write_text("")
    found = fp.NodeFingerprint(FakeModule({}), unit_dirs=(str(tmp_path),)).unit_names(["gpufleet-*", "containerd.service"])
    assert found == ["containerd.service", "gpufleet-mig.service", "gpufleet-verify-boot.service"]


def test_nvml_view_follows_mig_and_driver(sim_node: t.Callable[..., t.Any], sim_library: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sim = sim_node("dgx-a100-8x40gb")
    for key, value in sim.env.items():
        monkeypatch.setenv(key, value)
    first = json.loads(fp.read_nvml(str(sim_library)))
    assert len(first["gpus"]) == 8 and first["driver"]
    assert first == json.loads(fp.read_nvml(str(sim_library)))
    sim.set("mig_current=1", "mig_pending=1", gpu=0)
    second = json.loads(fp.read_nvml(str(sim_library)))
    assert second["gpus"][0]["mig"] == {"current": True, "pending": True}
    assert second["gpus"][0]["mig_devices"] == []
    assert second["gpus"][1:] == first["gpus"][1:]
    sim.fault("nvmlInit_v2", "DRIVER_NOT_LOADED")
    assert json.loads(fp.read_nvml(str(sim_library))) == {"error": "NVML_ERROR_DRIVER_NOT_LOADED"}


def test_main_needs_the_action_plugin() -> None:
    outcome = run_module("node_fingerprint", {"prefixes": ["driver_"], "_ansible_check_mode": True})
    assert outcome["kind"] == "fail"
    assert "call gpufleet.nvidia.node_fingerprint by its full name" in outcome["result"]["msg"]


# --- one run at a time ---------------------------------------------------------------------------------------------
RUN_A = {"run_id": "ctl-a:101:5000", "controller": "ctl-a", "user": "ops", "pid": 101, "pid_started": "5000", "awx_job": ""}
RUN_B = {"run_id": "awx-7:7:900", "controller": "awx-7", "user": "awx", "pid": 7, "pid_started": "900", "awx_job": "4711"}


def lease_file(root: Path) -> dict[str, t.Any] | None:
    path = root / "lib" / "run-lease.json"
    return json.loads(path.read_text()) if path.exists() else None


def test_a_node_that_differs_is_taken_for_the_run_and_given_back_by_the_record(node: Path) -> None:
    first = manager(node, lease=RUN_A).run()
    assert not first["matched"] and first["lease"] == {"taken_over": None, "waited_for": None, "waited": 0}
    held = lease_file(node)
    assert held is not None and held["run_id"] == RUN_A["run_id"] and held["controller"] == "ctl-a" and held["acquired"]
    assert stat.S_IMODE(os.stat(node / "lib" / "run-lease.json").st_mode) == 0o600
    # The same run's later calls find the lease theirs.
    assert manager(node, "leased", lease=RUN_A).run()["lease"] == {"taken_over": None, "waited_for": None, "waited": 0}
    recorded = manager(node, "recorded", lease=RUN_A).run()
    assert recorded["lease_released"] and lease_file(node) is None


def test_a_second_run_fails_naming_the_first(node: Path) -> None:
    manager(node, lease=RUN_A).run()
    with pytest.raises(Failed) as failed:
        manager(node, lease=RUN_B, wait=1).run()
    message, extra = failed.value.args
    assert message == "another run holds this node" and extra["lease_holder"]["run_id"] == RUN_A["run_id"]
    assert extra["lease_holder"]["user"] == "ops" and lease_file(node)["run_id"] == RUN_A["run_id"]
    # Another run's release leaves the lease alone.
    assert not manager(node, "released", lease=RUN_B).run()["lease_released"] and lease_file(node) is not None


def test_a_dead_run_is_taken_over_by_name(node: Path) -> None:
    manager(node, lease=RUN_A).run()
    taken = manager(node, "leased", lease=RUN_B, take_over=RUN_A["run_id"]).run()
    assert taken["lease"]["taken_over"]["run_id"] == RUN_A["run_id"] and lease_file(node)["run_id"] == RUN_B["run_id"]


def test_a_matching_node_and_a_check_run_take_no_lease(node: Path) -> None:
    manager(node, "recorded").run()
    matched = manager(node, lease=RUN_A).run()
    assert matched["matched"] and "lease" not in matched and lease_file(node) is None
    (node / "etc" / "crictl.yaml").write_text("changed\n")
    checked = manager(node, lease=RUN_A, check_mode=True).run()
    assert not checked["matched"] and "lease" not in checked and lease_file(node) is None


def test_services_a_dead_run_left_stopped_are_started_by_the_next(node: Path) -> None:
    manager(node, "recorded").run()
    (node / "lib" / "stopped-services.json").write_text(json.dumps({"services": ["kubelet", "nvidia-dcgm"], "why": "MIG apply"}))
    module = FakeModule({}, root=node)
    found = fp.NodeFingerprint(module, root=str(node), unit_dirs=())
    found.params = manager(node, lease=RUN_A).params
    result = found.run()
    assert not result["matched"] and "a run that died left kubelet, nvidia-dcgm stopped" in result["reasons"]
    # Started in the reverse order of their stop; the journal is gone once they run.
    assert module.systemctl == [["systemctl", "start", "--", "nvidia-dcgm"], ["systemctl", "start", "--", "kubelet"]]
    assert result["restored"] == ["nvidia-dcgm", "kubelet"] and result["changed"]
    assert not (node / "lib" / "stopped-services.json").exists()


def test_a_busy_node_lock_is_waited_for_then_named(node: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import fcntl

    from ansible_collections.gpufleet.nvidia.plugins.module_utils import _run_lease

    monkeypatch.setattr(_run_lease, "_LOCK_GRACE", 0.5)

    (node / "run").mkdir()
    with open(node / "run" / "gpufleet.lock", "w") as boot_unit:
        fcntl.flock(boot_unit, fcntl.LOCK_EX)
        with pytest.raises(Failed) as failed:
            manager(node, lease=RUN_A, wait=1).run()
    assert "boot unit" in failed.value.args[0] and lease_file(node) is None
    assert manager(node, lease=RUN_A).run()["lease"] == {"taken_over": None, "waited_for": None, "waited": 0}


_RACE = """
import json, sys
from ansible_collections.gpufleet.nvidia.plugins.module_utils._run_lease import LeaseBusy, RunLease
lease = RunLease(sys.argv[1], sys.argv[2])
try:
    lease.acquire({"run_id": sys.argv[3]}, 0)
    print("taken")
except LeaseBusy as busy:
    print("busy", busy.holder and busy.holder["run_id"])
"""


def test_two_runs_at_once_one_takes_the_node(tmp_path: Path) -> None:
    import subprocess
    import sys

    argv = [sys.executable, "-c", _RACE, str(tmp_path / "lease.json"), str(tmp_path / "lock")]
    # The directory that holds ansible_collections/, as this test imports the collection.
    env = dict(os.environ, PYTHONPATH=str(Path(fp.__file__).parents[5]))
    for _attempt in range(5):
        (tmp_path / "lease.json").unlink(missing_ok=True)
        runs = [subprocess.Popen(argv + ["run-{0}".format(n)], stdout=subprocess.PIPE, text=True, env=env) for n in range(4)]
        answers = [run.communicate()[0].strip() for run in runs]
        assert answers.count("taken") == 1, answers
        winner = json.loads((tmp_path / "lease.json").read_text())["run_id"]
        assert all(answer == "busy " + winner for answer in answers if answer != "taken"), answers
