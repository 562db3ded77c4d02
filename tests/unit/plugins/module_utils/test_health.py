# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The health judgement: kernel-log parsing, the policy, every check's pass,
warn and critical path, and the textfile."""

from __future__ import annotations

import copy
import typing as t

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils._kernel_log import parse_kernel_log
from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import health as kb
from ansible_collections.gpufleet.nvidia.plugins.module_utils._verify import health as _health

# Real lines. Each is cited where it comes from.
# leptonai/gpud@3abba8476b77:components/accelerator/nvidia/sxid/README.md (a dmesg capture)
DMESG_XID_79 = "[6781741.548779] NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
DMESG_FALLEN = "[6781741.548783] NVRM: GPU 0000:91:00.0: GPU has fallen off the bus."
DMESG_UUID = "[6781741.548768] NVRM: GPU at PCI:0000:91:00: GPU-b6c3b2be-c55b-d076-fa0e-d464e4c7e08b"
# https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1151 (journalctl -k)
_CATALOG_URL = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
JOURNAL_XID_79 = "May 18 19:02:39 kernel: NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus."
# https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/user-visible-statistics.html (MIG attribution)
MIG_XID_94 = "NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9). RST: No, D-RST: No"
# https://pastebin.com/xJaypMZt (an older driver: no "PCI:", "GPU at ... has fallen off the bus")
LEGACY_FALLEN = "Jan 18 11:38:05 localhost kernel: [ 269.516977] NVRM: GPU at 0000:01:00.0 has fallen off the bus."
LEGACY_XID = "Jan 18 11:38:05 localhost kernel: [ 269.517039] NVRM: Xid (0000:01:00): 3, C 00000005 SC 00000007 M 00001ffc Data ffffffff"
# A /dev/kmsg record as the kernel writes it (Documentation/ABI/testing/dev-kmsg), with a dictionary line.
KMSG_XID_63 = (
    "4,1203,73520871,-;NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for "
    "remapping, reset gpu to activate.\n SUBSYSTEM=pci\n DEVICE=+pci:0000:10:1c.0"
)


def gpu(index: int = 0, bus_id: str = "00000000:07:00.0", **health: t.Any) -> dict[str, t.Any]:
    """A healthy H100 as nvml_info reports it (contract section 1), with overrides per health key."""
    healthy = {
        "ecc": {"mode_current": True, "mode_pending": True, "volatile": {"corrected": 0, "uncorrected": 0}, "aggregate": {"corrected": 0, "uncorrected": 0}},
        "retired_pages": {"single_bit_ecc": None, "double_bit_ecc": None, "pending": None},
        "remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False},
        "recovery_action": 0,
        "pcie": {"gen_current": 5, "gen_max": 5, "width_current": 16, "width_max": 16, "replay_counter": 0},
        "nvlink": [{"link": link, "active": True} for link in range(18)],
        "fabric": {"state": "completed", "status": "success", "clique_id": 1, "cluster_uuid": "c-1"},
        "temperature": {"current_c": 35, "slowdown_c": 90, "shutdown_c": 95},
        "clock_event_reasons": {"mask": 1, "active": ["gpu_idle"]},
        "power": {"draw_w": 70.5, "limit_w": 700.0},
    }
    for key, value in health.items():
        if isinstance(value, dict) and isinstance(healthy.get(key), dict):
            healthy[key] = dict(healthy[key], **value)
        else:
            healthy[key] = value
    return {"index": index, "uuid": "GPU-{0:08d}-aaaa-bbbb-cccc-dddddddddddd".format(index), "lost": False, "pci": {"bus_id": bus_id}, "health": healthy}


def nvml(*gpus: dict[str, t.Any]) -> dict[str, t.Any]:
    return {"status": "ok", "gpus": list(gpus)}


POLICY = _health.HealthPolicy.from_vars({})


def findings(
    facts: dict[str, t.Any],
    log: str = "",
    services: dict[str, t.Any] | None = None,
    policy: dict[str, t.Any] | None = None,
    kernel_modules: list[str] | None = None,
) -> list[dict[str, t.Any]]:
    return _health.judge(facts, parse_kernel_log(log), services or {}, _health.HealthPolicy.from_vars(policy or {}), kernel_modules)


def checks(found: list[dict[str, t.Any]]) -> list[tuple[str, str, str]]:
    return [(f["check"], f["severity"], f["action"]) for f in found]


# ---------------------------------------------------------------- kernel log


@pytest.mark.parametrize(
    "line,xid,bus_id,fallen",
    [
        (DMESG_XID_79, 79, "00000000:91:00.0", True),
        (DMESG_FALLEN, None, "00000000:91:00.0", True),
        (JOURNAL_XID_79, 79, "00000000:2B:00.0", True),
        (MIG_XID_94, 94, "00000000:01:00.0", False),
        (LEGACY_FALLEN, None, "00000000:01:00.0", True),
        (LEGACY_XID, 3, "00000000:01:00.0", False),
        (KMSG_XID_63, 63, "00000000:10:1C.0", False),
    ],
    ids=["dmesg-xid", "dmesg-fallen", "journal-xid-no-process", "mig", "legacy-fallen", "legacy-xid", "kmsg"],
)
def test_each_line_format_gives_its_event(line: str, xid: int | None, bus_id: str, fallen: bool) -> None:
    events = parse_kernel_log(line)
    assert len(events) == 1
    assert events[0]["xid"] == xid
    assert events[0]["bus_id"] == bus_id
    assert events[0]["fallen_off_bus"] is fallen
    assert events[0]["message"].startswith("NVRM: ")
    assert events[0]["message"] == line.split("\n")[0][line.index("NVRM:") :]


def test_lines_that_are_no_event_give_none() -> None:
    text = "\n".join(
        [
            DMESG_UUID,
            "NVRM: GPU Board Serial Number: 1653723052734",
            " SUBSYSTEM=pci",
            "6,1,1,-;nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up",
            "Xid 79 in a user's shell history, no NVRM",
            "",
        ]
    )
    assert parse_kernel_log(text) == []
    assert parse_kernel_log(None) == []
    with pytest.raises(ValueError, match="must be text"):
        parse_kernel_log(["a list"])


def test_the_log_order_is_kept_and_every_record_counts() -> None:
    text = "\n".join([KMSG_XID_63, DMESG_XID_79, DMESG_FALLEN, KMSG_XID_63])
    assert [(e["xid"], e["bus_id"]) for e in parse_kernel_log(text)] == [
        (63, "00000000:10:1C.0"),
        (79, "00000000:91:00.0"),
        (None, "00000000:91:00.0"),
        (63, "00000000:10:1C.0"),
    ]


def test_the_knowledge_examples_parse_as_their_format_says() -> None:
    for row in kb.KERNEL_LOG_FORMATS:
        if row["name"] == "kmsg_record":
            continue
        events = parse_kernel_log(row["example"])
        assert len(events) == 1, row["name"]
        assert (events[0]["xid"] is None) == row["name"].startswith("fallen_off_bus"), row["name"]


# ---------------------------------------------------------------- policy


def test_defaults_come_from_the_device_plugin_and_gke_lists() -> None:
    # The device plugin's list is 13, 31, 43, 45, 68, 109: 109 is left out (NVIDIA's catalog says RESET_GPU).
    assert POLICY["xid_ignore"] == [13, 31, 43, 45, 68]
    assert POLICY["xid_critical"] == [48, 63, 64, 79, 119, 120, 123, 140]
    assert (POLICY.xid_severity(13), POLICY.xid_severity(79), POLICY.xid_severity(94)) == ("ignore", "critical", "warn")
    assert POLICY["recovery_action_map"] == {0: "none", 1: "reset_gpu", 2: "reboot", 3: "drain_and_repair", 4: "drain_and_repair", 5: "reboot"}


@pytest.mark.parametrize(
    "variables,message",
    [
        ({"pcie_width": "fatal"}, "verify_health_pcie_width: 'fatal' is not a severity: set ignore, warn or critical"),
        ({"gpu_count_expected": "eight"}, "verify_health_gpu_count_expected: 'eight' must be the number of GPUs"),
        ({"gpu_count_expected": True}, "verify_health_gpu_count_expected: 'True' must be the number"),
        ({"xid_critical": "79"}, "verify_health_xid_critical: expected a list of Xid numbers"),
        ({"xid_ignore": [13, "x"]}, "verify_health_xid_ignore: ['x'] are not Xid numbers"),
        ({"xid_ignore": [79]}, "verify_health_xid_ignore and verify_health_xid_critical both list Xid 79"),
        ({"temperature_margin_c": -1}, "verify_health_temperature_margin_c: '-1' must be a whole number"),
        ({"gpu_lost_action": "pray"}, "verify_health_gpu_lost_action: 'pray' is not an action"),
        ({"clock_events_reasons": ["gpu_idle", "hot"]}, "verify_health_clock_events_reasons: ['hot']"),
        ({"recovery_action_map": {1: "panic"}}, "verify_health_recovery_action_map: expected a mapping"),
        ({"pcie_witdh": "warn"}, "verify_health_pcie_witdh: unknown health variable; known: verify_health_clock_"),
    ],
)
def test_bad_policy_names_the_variable_and_the_fix(variables: dict[str, t.Any], message: str) -> None:
    with pytest.raises(ValueError) as raised:
        _health.HealthPolicy.from_vars(variables, prefix="verify_health_")
    assert message in str(raised.value)
    assert any(message in error for error in _health.policy_errors(variables, "verify_health_"))


def test_every_problem_is_reported_at_once_and_good_values_pass() -> None:
    errors = _health.policy_errors({"pcie_width": "x", "pcie_gen": "y"})
    assert [e.split(":")[0] for e in errors] == ["verify_health_policy.pcie_gen", "verify_health_policy.pcie_width"]
    assert (
        _health.policy_errors(
            {"xid_ignore": [13, "31"], "xid_critical": [79], "gpu_count_expected": 8, "pcie_gen": "warn", "recovery_action_map": {"1": "reboot"}}
        )
        == []
    )
    policy = _health.HealthPolicy.from_vars({"xid_ignore": [13, "31"], "recovery_action_map": {"1": "reboot"}})
    assert policy["xid_ignore"] == [13, 31]
    assert policy["recovery_action_map"] == {1: "reboot"}
    assert _health.policy_errors("pcie_width=warn") == ["verify_health_policy.*: expected the health variables as a mapping, got str"]


# ---------------------------------------------------------------- judgement


def test_a_healthy_node_has_no_finding() -> None:
    facts = nvml(gpu(0), gpu(1, "00000000:0F:00.0"))
    services = {"nvidia-persistenced": "active", "nvidia-fabricmanager": "active"}
    assert findings(facts, "\n".join([DMESG_UUID, "NVRM: loading NVIDIA UNIX"]), services, {"gpu_count_expected": 2}) == []
    assert _health.health_status([]) == "pass"


# (check, health override, default severity, action, policy that moves it to the other non-ignore severity)
CASES = [
    ("ecc_uncorrected_volatile", {"ecc": {"volatile": {"corrected": 0, "uncorrected": 2}}}, "critical", "reset_gpu", "warn"),
    ("ecc_uncorrected_aggregate", {"ecc": {"aggregate": {"corrected": 0, "uncorrected": 1}}}, "warn", "none", "critical"),
    ("ecc_corrected_volatile", {"ecc": {"volatile": {"corrected": 1001, "uncorrected": 0}}}, "warn", "none", "critical"),
    ("retired_pages_pending", {"retired_pages": {"single_bit_ecc": 1, "double_bit_ecc": 0, "pending": True}}, "warn", "reset_gpu", "critical"),
    ("retired_pages", {"retired_pages": {"single_bit_ecc": 40, "double_bit_ecc": 20, "pending": False}}, "warn", "drain_and_repair", "critical"),
    ("remap_pending", {"remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": True, "failure": False}}, "warn", "reset_gpu", "critical"),
    ("remap_failure", {"remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": True}}, "critical", "drain_and_repair", "warn"),
    ("remap_uncorrectable", {"remapped_rows": {"uncorrectable": 3}}, "warn", "none", "critical"),
    ("recovery_action", {"recovery_action": 2}, "critical", "reboot", "warn"),
    ("pcie_width", {"pcie": {"width_current": 8}}, "critical", "reseat", "warn"),
    ("pcie_replay", {"pcie": {"replay_counter": 5000}}, "warn", "reseat", "critical"),
    ("nvlink_down", {"nvlink": [{"link": 0, "active": True}, {"link": 2, "active": False}, {"link": 5, "active": False}]}, "critical", "reset_gpu", "warn"),
    ("fabric", {"fabric": {"state": "completed", "status": "NVML_ERROR_UNKNOWN"}}, "critical", "restart_service", "warn"),
    ("temperature", {"temperature": {"current_c": 86}}, "warn", "none", "critical"),
    ("clock_events", {"clock_event_reasons": {"mask": 0x48, "active": ["sw_thermal_slowdown", "hw_slowdown"]}}, "warn", "none", "critical"),
    ("power", {"power": {"draw_w": 720.0, "limit_w": 700.0}}, "warn", "none", "critical"),
]


@pytest.mark.parametrize("check,override,severity,action,other", CASES, ids=[case[0] for case in CASES])
def test_each_check_fires_with_its_default_and_follows_the_policy(check: str, override: dict[str, t.Any], severity: str, action: str, other: str) -> None:
    facts = nvml(gpu(0), gpu(1, "00000000:0F:00.0", **override))
    found = findings(facts)
    assert checks(found) == [(check, severity, action)]
    assert found[0]["gpu"] == {"index": 1, "uuid": "GPU-00000001-aaaa-bbbb-cccc-dddddddddddd", "bus_id": "00000000:0F:00.0"}
    message = found[0]["message"]
    assert message.startswith(check + ": " + found[0]["seen"] + " on GPU 1 (GPU-00000001-")
    assert "PCI 00000000:0F:00.0" in message
    assert checks(findings(facts, policy={check: other})) == [(check, other, action)]
    assert findings(facts, policy={check: "ignore"}) == []


def test_the_messages_say_what_was_seen_and_what_to_do() -> None:
    found = findings(nvml(gpu(3, "00000000:91:00.0", remapped_rows={"failure": True})))
    assert found[0]["message"] == (
        "remap_failure: a row remap failed: the memory cannot repair itself any more on GPU 3 "
        "(GPU-00000003-aaaa-bbbb-cccc-dddddddddddd, PCI 00000000:91:00.0); drain the node and send the GPU for "
        "repair"
    )


def test_limits_are_inclusive_where_the_policy_says_so() -> None:
    at_limit = {"retired_pages": {"single_bit_ecc": 59, "double_bit_ecc": 0, "pending": False}}
    assert findings(nvml(gpu(0, **at_limit))) == []
    assert findings(nvml(gpu(0, ecc={"volatile": {"corrected": 1000, "uncorrected": 0}}))) == []
    assert findings(nvml(gpu(0, pcie={"replay_counter": 1000}))) == []
    assert checks(findings(nvml(gpu(0, **at_limit)), policy={"retired_pages_max": 59})) == [("retired_pages", "warn", "drain_and_repair")]


def test_pcie_gen_below_max_is_ignored_by_default() -> None:
    idle = nvml(gpu(0, pcie={"gen_current": 1}))
    assert findings(idle) == []
    assert checks(findings(idle, policy={"pcie_gen": "warn"})) == [("pcie_gen", "warn", "none")]


def test_temperature_near_shutdown_is_critical() -> None:
    found = findings(nvml(gpu(0, temperature={"current_c": 91})))
    assert checks(found) == [("temperature", "critical", "reseat")]
    assert "within 5 °C of the shutdown threshold 95 °C" in found[0]["seen"]
    assert findings(nvml(gpu(0, temperature={"current_c": 84}))) == []
    assert checks(findings(nvml(gpu(0, temperature={"current_c": 84})), policy={"temperature_margin_c": 6})) == [("temperature", "warn", "none")]


def test_fabric_still_registering_warns_and_no_fabric_passes() -> None:
    assert checks(findings(nvml(gpu(0, fabric={"state": "in_progress", "status": None})))) == [("fabric", "warn", "restart_service")]
    assert findings(nvml(gpu(0, fabric={"state": "not_supported", "status": None}))) == []
    assert findings(nvml(gpu(0, fabric=None, nvlink=[]))) == []
    # Read once (waited_s null or 0): a boot that may yet settle.
    assert checks(findings(nvml(gpu(0, fabric={"state": "not_started", "status": None, "waited_s": 0})))) == [("fabric", "warn", "restart_service")]


def test_fabric_still_registering_after_the_wait_is_critical_and_names_what_it_needs() -> None:
    found = findings(nvml(gpu(0, fabric={"state": "in_progress", "status": None, "waited_s": 60})))
    assert checks(found) == [("fabric", "critical", "restart_service")]
    assert found[0]["seen"] == "GPU fabric registration is still in_progress after 60 s"
    assert "nvidia-fabricmanager" in found[0]["message"] and "ib_umad and mlx5_ib" in found[0]["message"]
    assert "GPU 0 " in found[0]["message"]
    # The policy's fabric severity rules it, as for a failed registration.
    assert checks(findings(nvml(gpu(0, fabric={"state": "in_progress", "waited_s": 60})), policy={"fabric": "warn"})) == [("fabric", "warn", "restart_service")]
    # A registration that finished while waited for is judged as any other.
    assert findings(nvml(gpu(0, fabric={"state": "completed", "status": "NVML_SUCCESS", "waited_s": 4}))) == []


PROC_MODULES = """mlx5_ib 524288 0 - Live 0x0000000000000000
ib_uverbs 200704 1 mlx5_ib, Live 0x0000000000000000
nvidia 104857600 2 - Live 0x0000000000000000 (POE)
"""


def blackwell(index: int) -> dict:
    return dict(gpu(index), architecture="blackwell")


def test_nvlsm_kernel_modules_are_judged_where_fabric_manager_runs_on_nvlink5_gpus() -> None:
    fm = {"nvidia-persistenced": "active", "nvidia-fabricmanager": "active"}
    loaded = _health.loaded_kernel_modules(PROC_MODULES)
    assert loaded == ["mlx5_ib", "ib_uverbs", "nvidia"]
    found = findings(nvml(blackwell(0), blackwell(1)), services=fm, kernel_modules=loaded)
    assert checks(found) == [("nvlsm_kernel_modules", "critical", "load_kernel_modules")]
    assert found[0]["gpu"] is None and found[0]["seen"].startswith("ib_umad is not loaded: NVLSM cannot reach the NVSwitches")
    assert "modprobe ib_umad mlx5_ib" in found[0]["message"] and "linux-modules-extra" in found[0]["message"]
    both = findings(nvml(blackwell(0)), services=fm, kernel_modules=["nvidia"])
    assert both[0]["seen"].startswith("ib_umad and mlx5_ib are not loaded")
    assert findings(nvml(blackwell(0)), services=fm, kernel_modules=loaded + ["ib_umad"]) == []
    # Not judged: no Fabric Manager on the node, GPUs before NVLink5, or the modules not read.
    assert findings(nvml(blackwell(0)), services={"nvidia-persistenced": "active"}, kernel_modules=[]) == []
    assert findings(nvml(gpu(0)), services=fm, kernel_modules=[]) == []
    assert findings(nvml(blackwell(0)), services=fm, kernel_modules=None) == []
    assert _health.loaded_kernel_modules(None) is None
    with pytest.raises(ValueError, match="kernel_modules: expected the names of the loaded kernel modules, got str"):
        _health.judge(nvml(blackwell(0)), [], fm, POLICY, "ib_umad")


def test_unavailable_reads_judge_nothing() -> None:
    nulls = nvml(
        gpu(
            0,
            ecc={
                "mode_current": None,
                "mode_pending": None,
                "volatile": {"corrected": None, "uncorrected": None},
                "aggregate": {"corrected": None, "uncorrected": None},
            },
            remapped_rows={"correctable": None, "uncorrectable": None, "pending": None, "failure": None},
            recovery_action=None,
            pcie={k: None for k in ("gen_current", "gen_max", "width_current", "width_max", "replay_counter")},
            temperature={"current_c": None, "slowdown_c": None, "shutdown_c": None},
            clock_event_reasons={"mask": None, "active": []},
            power={"draw_w": None, "limit_w": None},
        )
    )
    assert findings(nulls) == []
    no_health = nvml(gpu(0))
    del no_health["gpus"][0]["health"]
    assert findings(no_health) == []


def test_the_driver_recovery_action_decides_the_action() -> None:
    facts = nvml(gpu(0, recovery_action=1, ecc={"volatile": {"corrected": 0, "uncorrected": 1}}, remapped_rows={"failure": True}))
    assert checks(findings(facts)) == [
        ("ecc_uncorrected_volatile", "critical", "reset_gpu"),
        ("remap_failure", "critical", "reset_gpu"),
        ("recovery_action", "critical", "reset_gpu"),
    ]
    reboot = findings(nvml(gpu(0, recovery_action=2, remapped_rows={"pending": True})))
    assert checks(reboot) == [("remap_pending", "warn", "reboot"), ("recovery_action", "critical", "reboot")]
    assert "NVML_GPU_RECOVERY_ACTION_NODE_REBOOT (Reboot Node)" in reboot[1]["seen"]
    drain = findings(nvml(gpu(0, recovery_action=4)))
    assert checks(drain) == [("recovery_action", "critical", "drain_and_repair")]
    unknown = findings(nvml(gpu(0, recovery_action=9)))
    assert "an action this collection does not know (9)" in unknown[0]["seen"]


def test_a_lost_gpu_is_critical_and_named_by_what_nvml_read_before() -> None:
    lost = {"index": 1, "uuid": None, "lost": True, "pci": None}
    found = findings(nvml(gpu(0), lost))
    assert checks(found) == [("gpu_lost", "critical", "reboot")]
    assert found[0]["gpu"] == {"index": 1, "uuid": None, "bus_id": None}
    assert "GPU 1 (UUID unknown, PCI bus id unknown)" in found[0]["message"]
    assert "reseat it or send it for repair" in found[0]["message"]
    with_action = dict(gpu(1, recovery_action=4), lost=True)
    assert checks(findings(nvml(with_action))) == [("gpu_lost", "critical", "drain_and_repair")]
    assert checks(findings(nvml(lost), policy={"gpu_lost_action": "reseat"})) == [("gpu_lost", "critical", "reseat")]


def test_gpu_count_against_the_expected_count() -> None:
    facts = nvml(gpu(0), gpu(1, "00000000:0F:00.0"))
    assert findings(facts) == []
    assert findings(facts, policy={"gpu_count_expected": 2}) == []
    missing = findings(facts, policy={"gpu_count_expected": 8})
    assert checks(missing) == [("gpu_count", "critical", "reseat")]
    assert missing[0]["gpu"] is None
    assert missing[0]["message"].startswith("gpu_count: 2 GPUs visible to NVML, 8 expected on the node; ")
    assert checks(findings(facts, policy={"gpu_count_expected": 1})) == [("gpu_count", "critical", "none")]


def test_services_that_are_not_active_are_findings() -> None:
    facts = nvml(gpu(0))
    found = findings(facts, services={"nvidia-persistenced": "failed", "nvidia-fabricmanager": "inactive"})
    assert checks(found) == [("service_persistenced", "critical", "restart_service"), ("service_fabricmanager", "critical", "restart_service")]
    assert "nvidia-persistenced is failed on the node; restart the service (systemctl restart nvidia-persistenced;" in found[0]["message"]
    assert findings(facts, services={"nvidia-persistenced": "active"}) == []
    assert checks(findings(facts, services={"nvidia-fabricmanager": None}, policy={"service_fabricmanager": "warn"})) == [
        ("service_fabricmanager", "warn", "restart_service")
    ]


def test_xids_map_to_their_gpu_by_domain_bus_device() -> None:
    facts = nvml(gpu(0, "00000000:07:00.0"), gpu(1, "00000000:2B:00.0"))
    log = "\n".join(
        [
            JOURNAL_XID_79,
            "4,5,6,-;NVRM: Xid (PCI:0000:07:00): 94, pid=1, name=python, Contained",
            "4,5,7,-;NVRM: Xid (PCI:0000:07:00): 94, pid=2, name=python, Contained again",
            "4,5,8,-;NVRM: Xid (PCI:0000:07:00): 13, pid=2, name=python, Graphics SM Warp Exception",
        ]
    )
    found = findings(facts, log)
    assert [(f["check"], f["gpu"]["index"], f["severity"], f["action"]) for f in found] == [("xid", 0, "warn", "none"), ("xid", 1, "critical", "reboot")]
    assert found[0]["seen"] == ("Xid 94 (Contained memory error) 2 times since boot, last: NVRM: Xid (PCI:0000:07:00): 94, pid=2, name=python, Contained again")
    # The fallen-off-the-bus line of the same GPU adds nothing to its Xid 79.
    assert checks(findings(facts, JOURNAL_XID_79 + "\nNVRM: GPU 0000:2b:00.0: GPU has fallen off the bus.")) == [("xid", "critical", "reboot")]
    assert checks(findings(facts, log, policy={"xid_ignore": [94, 13], "xid_critical": [79]})) == [("xid", "critical", "reboot")]
    assert checks(findings(facts, log, policy={"xid_other": "critical", "xid_ignore": []})) == [
        ("xid", "critical", "none"),
        ("xid", "critical", "none"),
        ("xid", "critical", "reboot"),
    ]


def test_a_fallen_off_the_bus_line_alone_is_its_own_check() -> None:
    facts = nvml(gpu(0, "00000000:91:00.0"))
    found = findings(facts, DMESG_FALLEN)
    assert checks(found) == [("fallen_off_bus", "critical", "reboot")]
    assert found[0]["gpu"]["index"] == 0
    assert checks(findings(facts, DMESG_XID_79 + "\n" + DMESG_FALLEN, policy={"xid_ignore": [79], "xid_critical": [48]})) == [
        ("fallen_off_bus", "critical", "reboot")
    ]


def test_events_of_a_bus_nvml_does_not_report_are_node_findings() -> None:
    found = findings(nvml(gpu(0, "00000000:07:00.0")), DMESG_XID_79)
    assert checks(found) == [("xid", "critical", "reboot")]
    assert found[0]["gpu"] is None
    assert "(bus 00000000:91:00.0 is no GPU NVML reports)" in found[0]["seen"]


def test_findings_are_sorted_node_first_then_gpu_then_check() -> None:
    facts = nvml(gpu(1, "00000000:0F:00.0", pcie={"width_current": 4}, remapped_rows={"pending": True}), gpu(0, recovery_action=1))
    found = findings(facts, services={"nvidia-persistenced": "failed"}, policy={"gpu_count_expected": 3})
    assert [(f["gpu"]["index"] if f["gpu"] else None, f["check"]) for f in found] == [
        (None, "gpu_count"),
        (None, "service_persistenced"),
        (0, "recovery_action"),
        (1, "remap_pending"),
        (1, "pcie_width"),
    ]
    assert _health.health_status(found) == "fail"
    assert _health.health_status([f for f in found if f["severity"] == "warn"]) == "warn"


def test_bad_facts_say_what_was_expected() -> None:
    with pytest.raises(ValueError, match="expected the nvml_info facts"):
        _health.judge(None, [], {}, POLICY)
    with pytest.raises(ValueError, match="nvml.gpus: expected a list"):
        _health.judge({"gpus": "two"}, [], {}, POLICY)
    with pytest.raises(ValueError, match="services: expected a mapping"):
        _health.judge(nvml(), [], ["nvidia-persistenced"], POLICY)


# ---------------------------------------------------------------- metrics

# One GPU with a pending remap and one Xid 63, persistenced failed: every line, in order.
EXPECTED_TEXT = """\
# HELP gpufleet_gpu_ecc_aggregate_errors_total ECC errors over the GPU's life (NVML aggregate counter).
# TYPE gpufleet_gpu_ecc_aggregate_errors_total counter
gpufleet_gpu_ecc_aggregate_errors_total{bus_id="00000000:07:00.0",error="corrected",gpu="0",uuid="GPU-0"} 0
gpufleet_gpu_ecc_aggregate_errors_total{bus_id="00000000:07:00.0",error="uncorrected",gpu="0",uuid="GPU-0"} 0
# HELP gpufleet_gpu_ecc_volatile_errors_total ECC errors since the driver loaded (NVML volatile counter).
# TYPE gpufleet_gpu_ecc_volatile_errors_total counter
gpufleet_gpu_ecc_volatile_errors_total{bus_id="00000000:07:00.0",error="corrected",gpu="0",uuid="GPU-0"} 0
gpufleet_gpu_ecc_volatile_errors_total{bus_id="00000000:07:00.0",error="uncorrected",gpu="0",uuid="GPU-0"} 0
# HELP gpufleet_gpu_health_status GPU health check result: 0 pass, 1 warn, 2 critical.
# TYPE gpufleet_gpu_health_status gauge
gpufleet_gpu_health_status{bus_id="00000000:07:00.0",check="clock_events",gpu="0",uuid="GPU-0"} 0
gpufleet_gpu_health_status{bus_id="00000000:07:00.0",check="ecc_corrected_volatile",gpu="0",uuid="GPU-0"} 0
gpufleet_gpu_health_status{bus_id="00000000:07:00.0",check="ecc_uncorrected_aggregate",gpu="0",uuid="GPU-0"} 0
gpufleet_gpu_health_status{bus_id="00000000:07:00.0",check="ecc_uncorrected_volatile",gpu="0",uuid="GPU-0"} 0
gpufleet_gpu_health_status{bus_id="00000000:07:00.0",check="fabric",gpu="0",uuid="GPU-0"} 0
gpufleet_gpu_health_status{bus_id="00000000:07:00.0",check="fallen_off_bus",gpu="0",uuid="GPU-0"} 0
gpufleet_gpu_health_status{bus_id="00000000:07:00.0",check="gpu_lost",gpu="0",uuid="GPU-0"} 0
gpufleet_gpu_health_status{bus_id="00000000:07:00.0",check="nvlink_down",gpu="0",uuid="GPU-0"} 0
gpufleet_gpu_health_status{bus_id="00000000:07:00.0",check="pcie_gen",gpu="0",uuid="GPU-0"} 0
gpufleet_gpu_health_status{bus_id="00000000:07:00.0",check="pcie_replay",gpu="0",uuid="GPU-0"} 0
gpufleet_gpu_health_status{bus_id="00000000:07:00.0",check="pcie_width",gpu="0",uuid="GPU-0"} 0
gpufleet_gpu_health_status{bus_id="00000000:07:00.0",check="power",gpu="0",uuid="GPU-0"} 0
gpufleet_gpu_health_status{bus_id="00000000:07:00.0",check="recovery_action",gpu="0",uuid="GPU-0"} 0
gpufleet_gpu_health_status{bus_id="00000000:07:00.0",check="remap_failure",gpu="0",uuid="GPU-0"} 0
gpufleet_gpu_health_status{bus_id="00000000:07:00.0",check="remap_pending",gpu="0",uuid="GPU-0"} 1
gpufleet_gpu_health_status{bus_id="00000000:07:00.0",check="remap_uncorrectable",gpu="0",uuid="GPU-0"} 0
gpufleet_gpu_health_status{bus_id="00000000:07:00.0",check="retired_pages",gpu="0",uuid="GPU-0"} 0
gpufleet_gpu_health_status{bus_id="00000000:07:00.0",check="retired_pages_pending",gpu="0",uuid="GPU-0"} 0
gpufleet_gpu_health_status{bus_id="00000000:07:00.0",check="temperature",gpu="0",uuid="GPU-0"} 0
gpufleet_gpu_health_status{bus_id="00000000:07:00.0",check="xid",gpu="0",uuid="GPU-0"} 2
# HELP gpufleet_gpu_pcie_link_max_generation Maximum PCIe link generation of the GPU and its slot.
# TYPE gpufleet_gpu_pcie_link_max_generation gauge
gpufleet_gpu_pcie_link_max_generation{bus_id="00000000:07:00.0",gpu="0",uuid="GPU-0"} 5
# HELP gpufleet_gpu_pcie_link_max_width_lanes Maximum PCIe link width of the GPU and its slot.
# TYPE gpufleet_gpu_pcie_link_max_width_lanes gauge
gpufleet_gpu_pcie_link_max_width_lanes{bus_id="00000000:07:00.0",gpu="0",uuid="GPU-0"} 16
# HELP gpufleet_gpu_pcie_link_width_lanes Current PCIe link width.
# TYPE gpufleet_gpu_pcie_link_width_lanes gauge
gpufleet_gpu_pcie_link_width_lanes{bus_id="00000000:07:00.0",gpu="0",uuid="GPU-0"} 16
# HELP gpufleet_gpu_remapped_rows Rows remapped by kind (Ampere and later).
# TYPE gpufleet_gpu_remapped_rows gauge
gpufleet_gpu_remapped_rows{bus_id="00000000:07:00.0",gpu="0",kind="correctable",uuid="GPU-0"} 2
gpufleet_gpu_remapped_rows{bus_id="00000000:07:00.0",gpu="0",kind="uncorrectable",uuid="GPU-0"} 0
# HELP gpufleet_gpu_xid_events Xid records of this Xid in the kernel log buffer now (it drops old records, so this is not a counter).
# TYPE gpufleet_gpu_xid_events gauge
gpufleet_gpu_xid_events{bus_id="00000000:07:00.0",gpu="0",uuid="GPU-0",xid="63"} 1
# HELP gpufleet_node_health_check_status Node health check result: 0 pass, 1 warn, 2 critical.
# TYPE gpufleet_node_health_check_status gauge
gpufleet_node_health_check_status{check="fallen_off_bus"} 0
gpufleet_node_health_check_status{check="gpu_count"} 0
gpufleet_node_health_check_status{check="nvlsm_kernel_modules"} 0
gpufleet_node_health_check_status{check="service_fabricmanager"} 0
gpufleet_node_health_check_status{check="service_persistenced"} 2
gpufleet_node_health_check_status{check="xid"} 0
# HELP gpufleet_node_health_status Worst health check result of the node: 0 pass, 1 warn, 2 critical.
# TYPE gpufleet_node_health_status gauge
gpufleet_node_health_status 2
"""


def test_the_exact_textfile_of_a_one_gpu_node() -> None:
    one = gpu(0, remapped_rows={"pending": True, "correctable": 2}, nvlink=[])
    one["uuid"] = "GPU-0"
    events = parse_kernel_log("NVRM: Xid (PCI:0000:07:00): 63, pid=1, Row Remapper")
    found = _health.judge(nvml(one), events, {"nvidia-persistenced": "failed"}, POLICY)
    assert _health.metrics_text(nvml(one), found, events) == EXPECTED_TEXT


def test_the_textfile_of_a_small_node() -> None:
    links = [{"link": 0, "active": True}, {"link": 1, "active": False}]
    facts = nvml(dict(gpu(0, remapped_rows={"pending": True}, nvlink=links), uuid="GPU-0"), {"index": 1, "uuid": None, "lost": True, "pci": None})
    events = parse_kernel_log("NVRM: Xid (PCI:0000:07:00): 63, pid=1, Row Remapper\nNVRM: Xid (PCI:0000:07:00): 63, pid=1, Row Remapper\n" + DMESG_XID_79)
    found = _health.judge(facts, events, {"nvidia-persistenced": "active"}, POLICY)
    text = _health.metrics_text(facts, found, events)
    lines = text.splitlines()
    assert text.endswith("\n")
    status = [line for line in lines if line.startswith("gpufleet_gpu_health_status{") and 'gpu="0"' in line]
    assert len(status) == len(_health.GPU_CHECKS)
    assert 'gpufleet_gpu_health_status{bus_id="00000000:07:00.0",check="remap_pending",gpu="0",uuid="GPU-0"} 1' in lines
    assert 'gpufleet_gpu_health_status{bus_id="00000000:07:00.0",check="nvlink_down",gpu="0",uuid="GPU-0"} 2' in lines
    assert 'gpufleet_gpu_health_status{bus_id="00000000:07:00.0",check="xid",gpu="0",uuid="GPU-0"} 2' in lines
    assert 'gpufleet_gpu_health_status{bus_id="",check="gpu_lost",gpu="1",uuid=""} 2' in lines
    assert 'gpufleet_node_health_check_status{check="xid"} 2' in lines
    assert 'gpufleet_node_health_check_status{check="gpu_count"} 0' in lines
    assert lines[-1] == "gpufleet_node_health_status 2"
    assert 'gpufleet_gpu_xid_events{bus_id="00000000:07:00.0",gpu="0",uuid="GPU-0",xid="63"} 2' in lines
    assert 'gpufleet_gpu_xid_events{bus_id="00000000:91:00.0",gpu="",uuid="",xid="79"} 1' in lines
    assert 'gpufleet_gpu_nvlink_links{bus_id="00000000:07:00.0",gpu="0",uuid="GPU-0"} 2' in lines
    assert 'gpufleet_gpu_nvlink_links_active{bus_id="00000000:07:00.0",gpu="0",uuid="GPU-0"} 1' in lines
    assert 'gpufleet_gpu_pcie_link_max_generation{bus_id="00000000:07:00.0",gpu="0",uuid="GPU-0"} 5' in lines
    assert 'gpufleet_gpu_remapped_rows{bus_id="00000000:07:00.0",gpu="0",kind="correctable",uuid="GPU-0"} 0' in lines
    # Values that change on a healthy node are not published.
    assert "temperature" not in text.replace('check="temperature"', "")
    assert "power" not in text.replace('check="power"', "")
    assert "gen_current" not in text and "link_generation{" not in text
    # Every metric has one HELP and one TYPE line, before its samples.
    names = [line.split()[2] for line in lines if line.startswith("# TYPE ")]
    assert names == sorted(names) and len(names) == len(set(names))
    for line in lines:
        if not line.startswith("#"):
            assert line.split("{")[0].split(" ")[0] in names


def test_a_healthy_node_publishes_the_same_bytes_whatever_its_temperature() -> None:
    one = nvml(gpu(0), gpu(1, "00000000:0F:00.0"))
    two = copy.deepcopy(one)
    for each in two["gpus"]:
        each["health"]["temperature"]["current_c"] = 61
        each["health"]["power"]["draw_w"] = 310.25
        each["health"]["pcie"]["gen_current"] = 1
        each["health"]["clock_event_reasons"] = {"mask": 4, "active": ["sw_power_cap"]}
    first = _health.metrics_text(one, findings(one), [])
    assert first == _health.metrics_text(two, findings(two), [])
    assert first.count("\n") == len(first.splitlines())
    assert "gpufleet_node_health_status 0\n" in first


def test_gpu_indexes_sort_as_numbers_and_label_values_are_escaped() -> None:
    facts = nvml(*[gpu(index, "00000000:{0:02X}:00.0".format(index + 1)) for index in range(11)])
    facts["gpus"][10]["uuid"] = 'GPU-"quoted"\\'
    text = _health.metrics_text(facts, [], [])
    order = [line.split('gpu="')[1].split('"')[0] for line in text.splitlines() if line.startswith("gpufleet_gpu_pcie_link_max_generation{")]
    assert order == [str(index) for index in range(11)]
    assert 'uuid="GPU-\\"quoted\\"\\\\"' in text


def test_a_context_switch_timeout_asks_for_a_gpu_reset() -> None:
    # NVIDIA's Xid catalog: 109 ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR, immediate action RESET_GPU.
    facts = nvml(gpu(0, "00000000:07:00.0"))
    found = findings(facts, "4,5,6,-;NVRM: Xid (PCI:0000:07:00): 109, pid=1, name=python, Ch 00000008, errorString CTX SWITCH TIMEOUT")
    assert checks(found) == [("xid", "warn", "reset_gpu")]
    assert found[0]["seen"].startswith("Xid 109 (Context Switch Timeout Error) 1 time since boot")


@pytest.mark.parametrize(
    "xid,catalog_action,mnemonic",
    [
        # NVIDIA's Xid catalog, "Resolution Bucket (Immediate Action)" and the mnemonic, spelled out.
        (31, "RESTART_APP", "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT"),
        (43, "IGNORE", "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR"),
        (45, "WORKFLOW_XID_45", "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL"),
        (48, "WORKFLOW_XID_48", "ROBUST_CHANNEL_GPU_ECC_DBE"),
        (63, "IGNORE", "INFOROM_DRAM_RETIREMENT_EVENT"),
        (64, "RESET_GPU", "INFOROM_DRAM_RETIREMENT_FAILURE"),
        (109, "RESET_GPU", "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR"),
    ],
)
def test_the_catalogs_actions_and_names(xid: int, catalog_action: str, mnemonic: str) -> None:
    row = {r["xid"]: r for r in kb.XID_CATALOG}[xid]
    assert (row["catalog_action"], row["mnemonic"]) == (catalog_action, mnemonic)
    assert _CATALOG_URL in row["source"]


def test_63_and_64_carry_the_catalogs_meanings_not_the_archived_ones() -> None:
    # The archive page (Volta and older) said "ECC page retirement or row remapping recording event/failure".
    rows = {r["xid"]: r for r in kb.XID_CATALOG}
    assert rows[63]["meaning"].startswith("GPU memory remapping event")
    assert rows[64]["meaning"] == "GPU memory remapping failure"
