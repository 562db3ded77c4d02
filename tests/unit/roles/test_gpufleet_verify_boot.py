# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpufleet-verify-boot, the verify role's boot-time check, installed as the role installs it, on the simulator."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import typing as t
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.tests.unit.plugins import nvml_sim, runtime_install

ROOT = Path(__file__).resolve().parents[3]
COMMAND = ROOT / "roles" / "verify" / "files" / "gpufleet-verify-boot"
DRIVER = "550.127.05"  # the fixtures' driver


@pytest.fixture
def installed(tmp_path: Path) -> Path:
    """sbin/gpufleet-verify-boot and the node runtime under lib/gpufleet/, the layout of /usr/local on a node."""
    return runtime_install.install_command(tmp_path, COMMAND)


def spec_for(node: nvml_sim.SimNode, fmt: str = "yaml", drop: int | None = None) -> str:
    """A CDI spec as nvidia-ctk writes it for the node's whole GPUs (index and uuid names)."""
    devices = [{"name": "all", "containerEdits": {}}]
    for gpu in node.show()["gpus"]:
        if gpu["index"] == drop:
            continue
        edits = {"deviceNodes": [{"path": "/dev/nvidia{0}".format(gpu["index"])}]}
        devices += [{"name": str(gpu["index"]), "containerEdits": edits}, {"name": gpu["uuid"], "containerEdits": edits}]
    spec = {"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": devices, "containerEdits": {}}
    return json.dumps(spec) if fmt == "json" else yaml.safe_dump(spec, sort_keys=False)


def declaration(tmp_path: Path, spec: str, fmt: str = "yaml", **overrides: t.Any) -> Path:
    path = tmp_path / "nvidia.{0}".format(fmt)
    path.write_text(spec)
    config = {
        "report": str(tmp_path / "report.json"),
        "driver": {"version": DRIVER, "branch": "550"},
        "persistence": True,
        "cdi": {"spec": str(path), "strategies": ["index", "uuid"]},
        "mig": {"label": "off", "config": {"version": "v1", "mig-configs": {"off": [{"devices": "all", "mig-enabled": False}]}}},
    }
    config.update(overrides)
    out = tmp_path / "boot.json"
    out.write_text(json.dumps(config))
    return out


def run(command: Path, node: nvml_sim.SimNode, *args: str, block_yaml: bool = False) -> tuple[subprocess.CompletedProcess, dict[str, t.Any]]:
    """Run the installed command; block_yaml makes `import yaml` fail, as on a node without python3-yaml."""
    environment = dict(os.environ)
    environment.update(node.env)
    environment["LD_LIBRARY_PATH"] = str(nvml_sim.build().parent)
    environment.pop("NVML_SIM_EUID", None)
    argv = [sys.executable, str(command), *args]
    if block_yaml:
        argv[1:1] = ["-c", "import runpy, sys; sys.modules['yaml'] = None; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"]
    done = subprocess.run(argv, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False, timeout=120)
    report_path = Path(args[args.index("--config") + 1]).parent / "report.json" if "--config" in args else None
    report = json.loads(report_path.read_text()) if report_path and report_path.exists() else {}
    return done, report


def statuses(report: dict[str, t.Any]) -> dict[str, str]:
    return {c["layer"]: c["status"] for c in report["checks"]}


@pytest.mark.parametrize("fmt, block_yaml", [("json", False), ("json", True), ("yaml", False)])
def test_a_node_as_declared_passes(installed: Path, sim_node: t.Any, tmp_path: Path, fmt: str, block_yaml: bool) -> None:
    """JSON needs only the standard library; YAML is read with PyYAML."""
    node = sim_node("dgx-a100-8x40gb")
    done, report = run(installed, node, "--config", str(declaration(tmp_path, spec_for(node, fmt), fmt)), block_yaml=block_yaml)
    assert done.returncode == 0, done.stdout
    assert report["status"] == "pass"
    assert statuses(report) == {"driver": "pass", "persistence": "pass", "cdi": "pass", "mig": "pass"}
    assert report["driver_version"] == DRIVER and len(report["gpus"]) == 8
    # The boot and the time it was read in, as the verify role's report has them (the Slurm guard ignores an
    # earlier boot's report).
    assert report["boot_id"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", report["time"]), report["time"]
    assert "gpufleet-verify-boot: PASS: " in done.stdout
    assert oct((tmp_path / "report.json").stat().st_mode & 0o777) == "0o644"


def test_each_difference_is_a_finding(installed: Path, sim_node: t.Any, tmp_path: Path) -> None:
    node = sim_node("dgx-a100-mig-mixed")  # MIG on for GPUs 0-3, an enable pending on 4
    node.set("persistence=0", gpu=6)
    config = declaration(tmp_path, spec_for(node, drop=7), driver={"version": "550.163.01", "branch": ""})
    done, report = run(installed, node, "--config", str(config))
    assert done.returncode == 1, done.stdout
    checks = {c["layer"]: c for c in report["checks"]}
    assert checks["driver"]["findings"][0]["message"] == ("loaded driver 550.127.05 differs from the pinned driver_version 550.163.01")
    assert [f["subject"] for f in checks["persistence"]["findings"]] == ["GPU 6"]
    missing = {f["subject"] for f in checks["cdi"]["findings"]}
    uuid7 = node.show()["gpus"][7]["uuid"]
    assert {"7", uuid7} <= missing
    # MIG-enabled GPUs 0-2 have MIG devices the hand-written spec does not name.
    assert "GPU 0 MIG devices" in missing
    assert [f["subject"] for f in checks["mig"]["findings"]] == ["GPU 0", "GPU 1", "GPU 2", "GPU 3", "GPU 4"]
    assert report["status"] == "fail"


def test_no_driver_fails_the_driver_and_skips_the_rest(installed: Path, sim_node: t.Any, tmp_path: Path) -> None:
    node = sim_node("dgx-a100-8x40gb")
    node.set("driver_loaded=0")
    done, report = run(installed, node, "--config", str(declaration(tmp_path, spec_for(node))))
    assert done.returncode == 1
    assert statuses(report) == {"driver": "fail", "cdi": "not_available", "mig": "not_available"}
    assert "NVML is not usable" in report["checks"][0]["findings"][0]["message"]


def test_missing_spec_and_bad_config(installed: Path, sim_node: t.Any, tmp_path: Path) -> None:
    node = sim_node("dgx-a100-8x40gb")
    config = declaration(tmp_path, spec_for(node), mig=None, persistence=False)
    (tmp_path / "nvidia.yaml").unlink()
    done, report = run(installed, node, "--config", str(config))
    assert done.returncode == 1
    assert statuses(report) == {"driver": "pass", "cdi": "fail"}
    assert report["checks"][1]["findings"][0]["message"].startswith("no CDI spec at ")
    bad = tmp_path / "bad.json"
    bad.write_text("[1]")
    done = run(installed, node, "--config", str(bad))[0]
    assert done.returncode == 2 and "cannot read the declaration" in done.stdout


def test_a_yaml_spec_without_pyyaml_is_a_finding_with_the_fix(installed: Path, sim_node: t.Any, tmp_path: Path) -> None:
    node = sim_node("dgx-a100-8x40gb")
    config = declaration(tmp_path, spec_for(node, "yaml"), "yaml", mig=None)
    done, report = run(installed, node, "--config", str(config), block_yaml=True)
    assert done.returncode == 1, done.stdout
    assert statuses(report) == {"driver": "pass", "persistence": "pass", "cdi": "fail"}
    (problem,) = {c["layer"]: c for c in report["checks"]}["cdi"]["findings"]
    assert "is not JSON, and reading it as YAML needs PyYAML (python3-yaml)" in problem["message"]
    assert problem["fix"].startswith("set cdi_format: json") and "install python3-yaml" in problem["fix"]


def test_a_broken_spec_is_a_finding_not_a_traceback(installed: Path, sim_node: t.Any, tmp_path: Path) -> None:
    node = sim_node("dgx-a100-8x40gb")
    config = declaration(tmp_path, "devices: [unclosed\n", "yaml", mig=None)
    done, report = run(installed, node, "--config", str(config))
    assert done.returncode == 1, done.stdout
    (problem,) = {c["layer"]: c for c in report["checks"]}["cdi"]["findings"]
    assert "is not a CDI spec" in problem["message"] and problem["fix"].startswith("regenerate the spec"), problem


def health_declaration(tmp_path: Path, node: nvml_sim.SimNode, **health: t.Any) -> Path:
    """The driver and health checks only, the health layer's judgement with a kernel log file and a textfile."""
    wanted = {
        "policy": {},
        "gpu_count": None,
        "kernel_log": str(tmp_path / "kmsg"),
        "textfile": str(tmp_path / "metrics" / "gpufleet-health.prom"),
        "persistenced": False,
        "fabricmanager": False,
    }
    wanted.update(health)
    return declaration(tmp_path, spec_for(node), cdi=None, mig=None, health=wanted)


def test_a_healthy_node_passes_health_and_writes_the_textfile_once(installed: Path, sim_node: t.Any, tmp_path: Path) -> None:
    node = sim_node("dgx-a100-8x40gb")
    (tmp_path / "kmsg").write_text("6,1,100,-;Linux version 6.12.0\n")
    config = health_declaration(tmp_path, node, gpu_count=8)
    done, report = run(installed, node, "--config", str(config))
    assert done.returncode == 0, done.stdout
    assert statuses(report)["health"] == "pass", report
    textfile = tmp_path / "metrics" / "gpufleet-health.prom"
    gauges = re.findall(r'^gpufleet_gpu_health_status\{[^}]*gpu="(\d+)"[^}]*\} (\d+)$', textfile.read_text(), re.MULTILINE)
    assert {gpu for gpu, _value in gauges} == {str(i) for i in range(8)}
    assert {value for _gpu, value in gauges} == {"0"}
    assert oct(textfile.stat().st_mode & 0o777) == "0o644"
    before = textfile.stat().st_mtime_ns
    done, report = run(installed, node, "--config", str(config))
    assert done.returncode == 0 and textfile.stat().st_mtime_ns == before  # unchanged health: not rewritten
    assert "health" not in report["gpus"][0]  # readings that move stay out of the report
    health = {c["layer"]: c for c in report["checks"]}["health"]
    assert health["summary"] == "8 GPU(s) healthy; 0 Xid event(s) since boot" and health["observed"]["xid_events"] == 0


def test_an_unreadable_kernel_log_is_not_checked_at_boot(installed: Path, sim_node: t.Any, tmp_path: Path) -> None:
    """No kernel log to read (as in an unprivileged container): "not checked", never zero Xid events."""
    node = sim_node("dgx-a100-8x40gb")
    done, report = run(installed, node, "--config", str(health_declaration(tmp_path, node)))
    assert done.returncode == 0, done.stdout
    health = {c["layer"]: c for c in report["checks"]}["health"]
    kmsg = tmp_path / "kmsg"
    assert health["summary"] == "8 GPU(s) healthy; Xid events not checked (kernel log {0} not readable)".format(kmsg), health
    assert health["observed"]["xid_events"] is None
    assert "kernel log {0} not readable: Xid events not checked".format(kmsg) in [f["message"] for f in health["findings"]]


def test_a_node_that_cannot_publish_to_kubernetes_is_still_judged_and_warns(installed: Path, sim_node: t.Any, tmp_path: Path) -> None:
    """The Node is the scheduler's view, not the check: a missing or broken credential is a warning naming it."""
    node = sim_node("dgx-a100-8x40gb")
    (tmp_path / "kmsg").write_text("")
    credential = tmp_path / "node-health.json"
    config = health_declaration(tmp_path, node)
    config.write_text(json.dumps(dict(json.loads(config.read_text()), kubernetes={"credential": str(credential)})))
    done, report = run(installed, node, "--config", str(config))
    assert done.returncode == 0, done.stdout
    published = {c["layer"]: c for c in report["checks"]}["kubernetes"]
    assert published["status"] == "warn" and "cannot read the credential {0}".format(credential) in published["summary"], published
    credential.write_text(json.dumps({"server": "https://127.0.0.1:1", "certificate_authority_data": "bm90IGEgY2VydA==", "token": "t", "node": "n1"}))
    done, report = run(installed, node, "--config", str(config))
    published = {c["layer"]: c for c in report["checks"]}["kubernetes"]
    assert done.returncode == 0 and report["status"] == "pass", done.stdout
    assert published["status"] == "warn" and "not a base64 PEM certificate" in published["summary"], published
    assert published["findings"][0]["fix"].startswith("check that the node reaches the API server")
    assert re.search(r"kubernetes +warn +the Node's GPU health not published", done.stdout), done.stdout


def test_sick_gpus_fail_health_at_boot_naming_gpu_and_action(installed: Path, sim_node: t.Any, tmp_path: Path) -> None:
    node = sim_node("dgx-a100-8x40gb")
    kmsg = str(tmp_path / "kmsg")
    node.simctl("inject", "remap-failure", "--gpu", "1")
    node.simctl("inject", "gpu-lost", "--gpu", "4")
    node.simctl("inject", "xid", "--gpu", "5", "--xid", "79", "--kmsg", kmsg)
    node.simctl("inject", "xid", "--gpu", "6", "--xid", "13", "--kmsg", kmsg)  # the application's: ignored
    gpus = node.show()["gpus"]
    done, report = run(installed, node, "--config", str(health_declaration(tmp_path, node)))
    assert done.returncode == 1, done.stdout
    health = {c["layer"]: c for c in report["checks"]}["health"]
    assert health["status"] == "fail"
    errors = {f["subject"]: f for f in health["findings"] if f["severity"] == "error"}
    assert set(errors) == {"GPU 1", "GPU 4", "GPU 5"}, health["findings"]
    assert "remap failed" in errors["GPU 1"]["message"] and gpus[1]["uuid"] in errors["GPU 1"]["message"]
    assert "send the GPU for repair" in errors["GPU 1"]["fix"]
    assert "lost" in errors["GPU 4"]["message"] and errors["GPU 4"]["fix"]
    assert "Xid 79" in errors["GPU 5"]["message"] and gpus[5]["bus_id"] in errors["GPU 5"]["message"]
    assert report["gpus"][4]["lost"] is True and statuses(report)["driver"] == "pass"
    text = (tmp_path / "metrics" / "gpufleet-health.prom").read_text()
    assert re.search(r'^gpufleet_gpu_health_status\{bus_id="[^"]+",check="remap_failure",gpu="1",', text, re.MULTILINE)
    assert re.search(r'check="remap_failure",gpu="1",uuid="[^"]+"\} 2$', text, re.MULTILINE), text
    assert re.search(r'check="gpu_lost",gpu="4",uuid="[^"]*"\} 2$', text, re.MULTILINE), text


def fabric_findings(report: dict[str, t.Any]) -> dict[str, dict[str, t.Any]]:
    health = {c["layer"]: c for c in report["checks"]}["health"]
    return {f["subject"]: f for f in health["findings"] if f["message"].startswith("fabric: ")}


def fabric_declaration(tmp_path: Path, node: nvml_sim.SimNode, wait: int) -> Path:
    """The health declaration of a node whose driver is not pinned (the GB300 tray runs another branch)."""
    config = health_declaration(tmp_path, node, fabric_wait=wait)
    config.write_text(json.dumps(dict(json.loads(config.read_text()), driver={})))
    return config


def test_the_boot_check_waits_for_the_nvlink_fabric_as_verify_does(installed: Path, sim_node: t.Any, tmp_path: Path) -> None:
    """At boot Fabric Manager may still be registering the GPUs: read once, a GPU in progress only warns; with
    fabric_wait it is read again until it completes (the check passes), or it fails after the wait, naming it."""
    node = sim_node("gb300-nvl72-tray")
    node.simctl("health", "--gpu", "2", "fabric_state=in_progress")

    done, report = run(installed, node, "--config", str(fabric_declaration(tmp_path, node, 0)))
    assert done.returncode == 0, done.stdout
    (warned,) = fabric_findings(report).values()
    assert warned["subject"] == "GPU 2" and warned["severity"] == "warning", warned

    done, report = run(installed, node, "--config", str(fabric_declaration(tmp_path, node, 2)))
    assert done.returncode == 1, done.stdout
    failed = fabric_findings(report)["GPU 2"]
    assert failed["severity"] == "error" and "still in_progress after 2 s" in failed["message"], failed
    assert "nvidia-fabricmanager" in failed["message"] and failed["fix"]

    # Fabric Manager finishes the registration one second into a 60-second wait: the check passes at once.
    config = fabric_declaration(tmp_path, node, 60)
    environment = dict(os.environ, **node.env, LD_LIBRARY_PATH=str(nvml_sim.build().parent))
    environment.pop("NVML_SIM_EUID", None)
    started = time.monotonic()
    with subprocess.Popen([sys.executable, str(installed), "--config", str(config)], env=environment, stdout=subprocess.PIPE, text=True) as proc:
        time.sleep(1)
        node.simctl("health", "--gpu", "2", "fabric_state=completed")
        out, _err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    assert time.monotonic() - started < 30
    report = json.loads((tmp_path / "report.json").read_text())
    assert statuses(report)["health"] == "pass" and not fabric_findings(report), report
