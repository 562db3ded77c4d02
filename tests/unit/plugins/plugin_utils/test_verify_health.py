# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The verify role's health layer on nvml_info facts of simulated nodes: the judgement as verify reports it,
the driver's daemons from systemctl, the textfile, and the fleet report's health column."""

from __future__ import annotations

import json
import typing as t

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.filter.health import health_metrics
from ansible_collections.gpufleet.nvidia.plugins.filter.verify import verify_check, verify_report
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _report

SHOW = """Id=nvidia-persistenced.service
LoadState=loaded
ActiveState={0}
UnitFileState=enabled

Id=nvidia-fabricmanager.service
LoadState={1}
ActiveState=inactive
UnitFileState={2}
"""


def settings(**kw: t.Any) -> dict[str, t.Any]:
    base = {"enabled": True, "policy": {}, "gpu_count": None, "kernel_log": "/dev/kmsg", "persistenced": True, "fabricmanager": False}
    base.update(kw)
    return base


def services(persistenced: str = "active", fm_load: str = "not-found", fm_file: str = "") -> dict[str, t.Any]:
    return {"rc": 0, "stdout": SHOW.format(persistenced, fm_load, fm_file), "stderr": ""}


def facts(sim_node: t.Any, fixture: str = "dgx-a100-8x40gb", *injections: tuple[str, ...]) -> dict[str, t.Any]:
    node = sim_node(fixture)
    for injection in injections:
        node.simctl("inject", *injection)
    outcome = node.run("nvml_info")
    assert outcome["kind"] == "exit", outcome
    return outcome["result"]["nvml"]


def test_a_healthy_node_passes_and_its_report_holds_nothing_that_moves(sim_node: t.Any) -> None:
    nvml = facts(sim_node)
    check = verify_check({"nvml": nvml, "kernel_log": "6,1,100,-;Linux version 6.12\n", "services": services()}, "health", settings(gpu_count=8))
    assert check["status"] == "pass", check
    assert check["summary"] == "8 GPU(s) healthy; 0 Xid event(s) since boot"
    assert check["observed"] == {"gpus": 8, "lost": [], "kernel_log": "/dev/kmsg", "xid_events": 0, "services": {"nvidia-persistenced": "active"}, "judged": []}
    assert "temperature" not in json.dumps(check)


def test_sick_gpus_fail_with_gpu_and_action_named(sim_node: t.Any) -> None:
    nvml = facts(
        sim_node,
        "dgx-a100-8x40gb",
        ("remap-failure", "--gpu", "1"),
        ("link-degrade", "--gpu", "2"),
        ("gpu-lost", "--gpu", "4"),
        ("remap-pending", "--gpu", "6"),
    )
    check = verify_check({"nvml": nvml, "kernel_log": "", "services": services()}, "health", settings())
    assert check["status"] == "fail"
    by_subject = {}
    for item in check["findings"]:
        by_subject.setdefault(item["subject"], []).append(item)
    assert sorted(by_subject) == ["GPU 1", "GPU 2", "GPU 4", "GPU 6"]
    [failure] = by_subject["GPU 1"]
    uuid1, bus1 = nvml["gpus"][1]["uuid"], nvml["gpus"][1]["pci"]["bus_id"]
    assert failure["severity"] == "error" and uuid1 in failure["message"] and bus1 in failure["message"]
    assert failure["fix"] == "drain the node and send the GPU for repair"
    assert by_subject["GPU 2"][0]["message"].startswith("pcie_width: PCIe link trained at x8, the GPU and slot allow x16")
    assert by_subject["GPU 4"][0]["severity"] == "error" and "lost" in by_subject["GPU 4"][0]["message"]
    # A row pending remap after an uncorrectable error: two warnings, the remap waits for a reset.
    assert [(f["severity"], f["message"].split(":")[0]) for f in by_subject["GPU 6"]] == [("warning", "remap_pending"), ("warning", "remap_uncorrectable")]
    assert check["observed"]["lost"] == [4]
    assert check["summary"] == failure["message"]  # the first error says why
    metrics = health_metrics(nvml, check["observed"]["judged"], "")
    assert 'check="remap_failure",gpu="1",uuid="{0}"}} 2'.format(uuid1) in metrics
    assert 'check="remap_pending",gpu="6",' in metrics and metrics.count("} 1\n") >= 1


def test_an_xid_on_the_kernel_log_names_the_gpu(sim_node: t.Any, tmp_path: t.Any) -> None:
    node = sim_node("hgx-h100-8x80gb")
    kmsg = tmp_path / "kmsg"
    node.simctl("inject", "xid", "--gpu", "3", "--xid", "79", "--kmsg", str(kmsg))
    nvml = node.run("nvml_info")["result"]["nvml"]
    check = verify_check({"nvml": nvml, "kernel_log": kmsg.read_text(), "services": services()}, "health", settings())
    [xid] = [f for f in check["findings"] if f["severity"] == "error"]
    assert xid["subject"] == "GPU 3" and "Xid 79" in xid["message"]
    assert check["observed"]["xid_events"] >= 1


def test_daemons_unreadable_log_and_switches(sim_node: t.Any) -> None:
    nvml = facts(sim_node)
    # persistenced failed; fabricmanager enabled (the driver role asked for it) but dead.
    check = verify_check({"nvml": nvml, "kernel_log": None, "services": services("failed", "loaded", "enabled")}, "health", settings())
    messages = [(f["severity"], f["subject"], f["message"].split(";")[0]) for f in check["findings"]]
    assert ("info", "/dev/kmsg", "kernel log /dev/kmsg not readable: Xid events not checked") in messages
    assert ("error", "node", "service_persistenced: nvidia-persistenced is failed on the node") in messages
    assert ("error", "node", "service_fabricmanager: nvidia-fabricmanager is inactive on the node") in messages
    # No systemd: an info finding, the rest is judged.
    check = verify_check({"nvml": nvml, "kernel_log": "", "services": {"rc": 1, "stdout": ""}}, "health", settings())
    assert check["status"] == "pass" and check["findings"][0]["subject"] == "services"
    assert verify_check({"nvml": nvml}, "health", settings(enabled=False))["status"] == "not_managed"
    assert verify_check({"nvml": nvml, "deferred": "image bake"}, "health", settings())["status"] == "deferred"
    assert verify_check({"nvml": {"status": "driver_not_loaded"}}, "health", settings())["status"] == "not_available"
    wrong = verify_check({"nvml": nvml, "kernel_log": "", "services": services()}, "health", settings(gpu_count=4))
    assert wrong["status"] == "fail" and "8 GPUs visible to NVML, 4 expected" in wrong["summary"]


def test_a_bad_policy_is_named() -> None:
    with pytest.raises(AnsibleFilterError, match=r"verify_health_policy\.pcie_width: 'sometimes' is not a severity"):
        verify_check({"nvml": {"status": "ok", "gpus": []}}, "health", settings(policy={"pcie_width": "sometimes"}))


def test_the_fleet_report_has_a_health_column_with_the_reason(sim_node: t.Any) -> None:
    nvml = facts(sim_node, "dgx-a100-8x40gb", ("remap-failure", "--gpu", "1"))
    check = verify_check({"nvml": nvml, "kernel_log": "", "services": services()}, "health", settings())
    report = json.loads(json.dumps(verify_report([check], "dgx-01", nvml, {})))
    markdown = _report.render_markdown([report])
    header, _rule, row = [line for line in markdown.splitlines() if line.startswith("|")][:3]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    health = cells[header.strip("|").split("|").index(" health ")]
    assert health.startswith("FAIL: remap_failure: a row remap failed") and "GPU 1 (" in health
    html = _report.render_html([report])
    assert 'class="st fail"' in html and "FAIL: remap_failure" in html
    assert any("health" in line and "FAIL" in line for line in _report.render_text([report]))


def test_an_unread_kernel_log_is_never_zero_xid_events(sim_node: t.Any) -> None:
    """The demo node (an unprivileged container) cannot read /dev/kmsg: the summary says Xid events were not
    checked and why, the report holds no count, and the fleet report shows what the summary says."""
    nvml = facts(sim_node)
    check = verify_check({"nvml": nvml, "kernel_log": None, "services": services()}, "health", settings())
    assert check["status"] == "pass", check
    assert check["summary"] == "8 GPU(s) healthy; Xid events not checked (kernel log /dev/kmsg not readable)"
    assert "0 Xid" not in json.dumps(check)
    assert check["observed"]["xid_events"] is None and check["observed"]["kernel_log"] is None
    # A readable log with nothing in it is a count that was read.
    read = verify_check({"nvml": nvml, "kernel_log": "", "services": services()}, "health", settings())
    assert read["summary"] == "8 GPU(s) healthy; 0 Xid event(s) since boot" and read["observed"]["xid_events"] == 0
    report = json.loads(json.dumps(verify_report([check], "demo-node", nvml, {})))
    text = "\n".join(_report.render_text([report]))
    assert "Xid events not checked (kernel log /dev/kmsg not readable)" in text and "0 Xid" not in text


def test_gpus_without_health_fields_are_not_counted_healthy(sim_node: t.Any) -> None:
    """nvml_info without gather_health gives no health fields: those GPUs are not checked, not healthy."""
    nvml = facts(sim_node)
    for gpu in nvml["gpus"][5:]:
        gpu.pop("health", None)
    check = verify_check({"nvml": nvml, "kernel_log": "", "services": services()}, "health", settings())
    assert check["summary"] == "5 GPU(s) healthy, 3 not checked (NVML gave no health fields); 0 Xid event(s) since boot"


FM_RUNNING = {
    "rc": 0,
    "stdout": SHOW.format("active", "loaded", "enabled").replace("ActiveState=inactive", "ActiveState=active"),
    "stderr": "",
}
PROC_MODULES = "nvidia 104857600 2 - Live 0x0000000000000000 (POE)\nmlx5_ib 524288 0 - Live 0x0000000000000000\n"


def test_nvlsm_needs_its_infiniband_modules_on_an_nvlink5_node(sim_node: t.Any) -> None:
    nvml = facts(sim_node, "hgx-b300-8x288gb")
    observed = {"nvml": nvml, "kernel_log": "", "services": FM_RUNNING, "proc_modules": PROC_MODULES}
    check = verify_check(observed, "health", settings(fabricmanager=True))
    assert check["status"] == "fail", check
    node = [(f["severity"], f["subject"], f["message"].split(";")[0]) for f in check["findings"] if f["subject"] == "node"]
    assert node == [
        (
            "error",
            "node",
            "nvlsm_kernel_modules: ib_umad is not loaded: NVLSM cannot reach the NVSwitches, so Fabric Manager cannot register the GPUs on the node",
        )
    ], check["findings"]
    observed["proc_modules"] += "ib_umad 45056 0 - Live 0x0000000000000000\n"
    assert verify_check(observed, "health", settings(fabricmanager=True))["status"] == "pass"
    # /proc/modules not read (an older verify read, a bake): not judged.
    del observed["proc_modules"]
    assert verify_check(observed, "health", settings(fabricmanager=True))["status"] == "pass"
