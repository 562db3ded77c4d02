# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""module_utils/_verify: one judgement for the verify role and gpufleet-verify-boot.

The same observation judged after a run (RUN) and at boot (BOOT) must give
the same status, subjects, messages and severities; only a fix's words may
differ. And the boot command must take its judgements from the package, not
keep its own.
"""

from __future__ import annotations

import ast
import json
import typing as t
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils._kernel_log import parse_kernel_log
from ansible_collections.gpufleet.nvidia.plugins.module_utils._verify import cdi, driver, mig
from ansible_collections.gpufleet.nvidia.plugins.module_utils._verify import health as gpu_health
from ansible_collections.gpufleet.nvidia.plugins.module_utils._verify.remedies import BOOT, RUN
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.test_health import DMESG_XID_79, gpu, nvml

ROOT = Path(__file__).resolve().parents[4]
BOOT_COMMAND = ROOT / "roles" / "verify" / "files" / "gpufleet-verify-boot"
UUIDS = ("GPU-11111111-2222-3333-4444-555555555555", "GPU-66666666-7777-8888-9999-000000000000")


def judgement(check: dict[str, t.Any]) -> tuple[t.Any, ...]:
    """What must not depend on where the check ran."""
    return check["status"], check["summary"], [(f["severity"], f["subject"], f["message"]) for f in check["findings"]]


def two_gpus() -> dict[str, t.Any]:
    facts = nvml(gpu(0, "00000000:07:00.0"), gpu(1, "00000000:91:00.0"))
    for index, uuid in enumerate(UUIDS):
        facts["gpus"][index]["uuid"] = uuid
    return facts


def spec_text(names: t.Sequence[str]) -> str:
    devices = [{"name": name, "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0"}]}} for name in names]
    return json.dumps({"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": devices})


@pytest.mark.parametrize(
    "names",
    [
        ["0", "1", UUIDS[0], UUIDS[1], "all"],  # in step with NVML
        ["0", UUIDS[0], "all"],  # GPU 1 missing: stale
        ["0", "1", "2", UUIDS[0], UUIDS[1]],  # a GPU NVML does not report, and no `all`
    ],
)
def test_cdi_is_judged_alike_after_a_run_and_at_boot(names: list[str]) -> None:
    text = spec_text(names)
    run = cdi.check_spec(text, two_gpus(), cdi.DEFAULT_STRATEGIES, "/etc/cdi/nvidia.json", RUN)
    boot = cdi.check_spec(text, two_gpus(), cdi.DEFAULT_STRATEGIES, "/etc/cdi/nvidia.json", BOOT)
    assert judgement(run) == judgement(boot)
    errors = [f for f in run["findings"] if f["severity"] == "error"]
    assert [f["fix"] for f in errors] == [RUN.cdi] * len(errors) and [f["fix"] for f in boot["findings"] if f["severity"] == "error"] == [BOOT.cdi] * len(
        errors
    )


def test_a_missing_or_broken_spec_is_a_finding() -> None:
    assert cdi.check_spec(None, two_gpus(), ("uuid",), "/etc/cdi/nvidia.yaml", BOOT)["summary"] == "no CDI spec at /etc/cdi/nvidia.yaml"
    broken = cdi.check_spec("devices: [unclosed\n", two_gpus(), ("uuid",), "/etc/cdi/nvidia.yaml", RUN)
    assert broken["status"] == "fail" and "is not a CDI spec" in broken["summary"]


@pytest.mark.parametrize(
    ("loaded", "pinned", "branch", "subjects"),
    [
        ("550.127.05", "550.127.05", "550", []),
        ("550.90.07", "550.127.05", "", ["driver_version"]),
        ("535.183.01", "", "550", ["driver_branch"]),
        ("550.90.07", "", "550", []),
    ],
)
def test_the_driver_is_judged_alike(loaded: str, pinned: str, branch: str, subjects: list[str]) -> None:
    run, boot = (driver.version_findings(loaded, pinned, branch, where) for where in (RUN, BOOT))
    assert [f["subject"] for f in run] == subjects
    assert [(f["subject"], f["message"]) for f in run] == [(f["subject"], f["message"]) for f in boot]
    assert all(f["fix"] == RUN.driver for f in run) and all(f["fix"] == BOOT.driver for f in boot)


def test_a_mig_gpu_waiting_for_its_reset_only_warns_at_boot_too() -> None:
    differences = ["GPU 0: expected MIG enabled, found MIG disabled (pending enabled)", "GPU 1: expected 7 x 1g.10gb, found 1 x 7g.80gb"]
    plans = [{"index": 0, "reset_required": True, "changed": False}, {"index": 1, "changed": True, "mode_change": None}]
    run, boot = (mig.findings("all-1g.10gb", differences, plans, where) for where in (RUN, BOOT))
    assert [(f["severity"], f["subject"], f["message"]) for f in run] == [(f["severity"], f["subject"], f["message"]) for f in boot]
    assert [f["severity"] for f in run] == ["warning", "error"]
    assert run[1]["fix"].endswith(RUN.mig) and boot[1]["fix"].endswith(BOOT.mig)
    assert run[0]["fix"] == boot[0]["fix"]  # the reset is the same everywhere


def test_health_is_judged_alike_and_says_what_it_could_not_read() -> None:
    facts = two_gpus()
    events = parse_kernel_log(DMESG_XID_79)
    settings = {"kernel_log": "/dev/kmsg", "gpu_count": 2}
    run = gpu_health.check_health(settings, facts, events, {"nvidia-persistenced": "active"}, None, RUN)[0]
    boot = gpu_health.check_health(settings, facts, events, {"nvidia-persistenced": "active"}, None, BOOT)[0]
    assert judgement(run) == judgement(boot)
    assert run["status"] == "fail" and any(f["subject"] == "GPU 1" and "79" in f["message"] for f in run["findings"]), run
    unread = gpu_health.check_health(settings, facts, None, None, None, BOOT)[0]
    infos = {f["subject"]: f["fix"] for f in unread["findings"] if f["severity"] == "info"}
    assert infos == {"/dev/kmsg": BOOT.kernel_log, "services": BOOT.services}
    assert unread["observed"]["xid_events"] is None  # not read is never "no event"


def test_the_health_layer_reads_what_the_role_read() -> None:
    """check_layer, the verify role's entry: node_reads_info's `systemctl show` result and kernel-log read."""
    observed = {
        "nvml": two_gpus(),
        "kernel_log": {"events": parse_kernel_log(DMESG_XID_79)},
        "services": {"rc": 0, "stdout": "Id=nvidia-persistenced.service\nLoadState=loaded\nActiveState=failed\n"},
    }
    check = gpu_health.check_layer({"enabled": True, "persistenced": True, "kernel_log": "/dev/kmsg"}, observed, RUN)
    assert check["observed"]["services"] == {"nvidia-persistenced": "failed"} and check["observed"]["xid_events"] == 1
    assert check["status"] == "fail"
    assert gpu_health.check_layer({"enabled": False}, observed, RUN)["status"] == "not_managed"
    assert gpu_health.check_layer({"enabled": True}, {"nvml": {"status": "driver_not_loaded"}}, RUN)["status"] == "not_available"
    with pytest.raises(ValueError, match="xid_ignore"):
        gpu_health.check_layer({"enabled": True, "policy": {"xid_ignore": "13"}}, observed, RUN)


def test_the_boot_command_keeps_no_judgement_of_its_own() -> None:
    """It imports the package's judgements and defines none of the names they carry."""
    tree = ast.parse(BOOT_COMMAND.read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert {"gpufleet_runtime._verify", "gpufleet_runtime._verify.remedies", "gpufleet_runtime._verify.result"} <= imported
    assert "gpufleet_runtime._cdi_names" not in imported  # the CDI names are judged in _verify/cdi.py
    defined = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    assert not defined & {"judged", "finding", "parse_spec", "version_findings", "difference_finding", "check_spec", "check_layer"}
