# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""The health check: the GPU health judgement (the policy, the checks, the
summary and the Prometheus textfile) and the verify check made of it
(check_health, at the end). The kernel log's Xid events it judges are
_kernel_log's, which reads and parses them.

One judgement for every place that judges health: the verify role's health
layer (which the upgrade's gate runs too), the fleet report and the
health_metrics filter on the controller, and gpufleet-verify-boot on the
node. So: Python 3.8+, standard library only,
no Ansible import. The facts come from nvml_info (each GPU's `lost` and
`health`, read by _nvml/health.py); the facts of the judgement (the Xid
catalog, the recovery actions, the default thresholds with their reasons)
live in _knowledge/health.py.
"""

from __future__ import annotations

import re
import typing as t

from .._kernel_log import bus_key, kernel_events
from .._knowledge import drivers as _drivers_kb
from .._knowledge import health as _kb
from .._nvml.health import CLOCK_EVENT_REASONS as NVML_CLOCK_EVENT_REASONS
from .remedies import Remedies
from .result import check as verify_check
from .result import finding as check_finding
from .result import judged

SEVERITIES = ("ignore", "warn", "critical")
ACTIONS = ("reset_gpu", "reboot", "drain_and_repair", "reseat", "restart_service", "none")
STATUS_VALUE = {"pass": 0, "warn": 1, "critical": 2}

# Checks of one GPU and checks of the node, in report order. The names are
# also the `check` label of the metrics.
GPU_CHECKS = (
    "gpu_lost",
    "ecc_uncorrected_volatile",
    "ecc_uncorrected_aggregate",
    "ecc_corrected_volatile",
    "retired_pages_pending",
    "retired_pages",
    "remap_pending",
    "remap_failure",
    "remap_uncorrectable",
    "recovery_action",
    "pcie_width",
    "pcie_gen",
    "pcie_replay",
    "nvlink_down",
    "fabric",
    "temperature",
    "clock_events",
    "power",
    "xid",
    "fallen_off_bus",
)
NODE_CHECKS = ("gpu_count", "service_persistenced", "service_fabricmanager", "nvlsm_kernel_modules", "xid", "fallen_off_bus")
CHECKS = ("gpu_count",) + GPU_CHECKS + ("service_persistenced", "service_fabricmanager", "nvlsm_kernel_modules")
# Where Fabric Manager needs NVLSM (NVLink5 GPUs), and the kernel modules NVLSM needs.
NVLSM_ARCHITECTURES = tuple(_drivers_kb.NVLSM["value"]["architectures"])
NVLSM_KERNEL_MODULES = tuple(_drivers_kb.NVLSM["value"]["kernel_modules"])
SERVICES = {"service_persistenced": "nvidia-persistenced", "service_fabricmanager": "nvidia-fabricmanager"}

# Clock event reasons that mean the GPU is being slowed by a fault or its
# cooling, not by its work or its settings (gpu_idle, applications_clocks_setting,
# sw_power_cap, sync_boost and display_clock_setting are normal operation).
SLOWDOWN_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown")
# Every reason NVML names, in bit order: the binding's table (_nvml/health.py), so the two cannot drift.
CLOCK_EVENT_REASONS = tuple(name for _bit, name in NVML_CLOCK_EVENT_REASONS)

_XIDS = {row["xid"]: row for row in _kb.XID_CATALOG}
_RECOVERY = {row["value"]: row for row in _kb.RECOVERY_ACTIONS}
_THRESHOLDS = {row["variable"]: row["default"] for row in _kb.HEALTH_THRESHOLDS}

# --------------------------------------------------------------------------
# Summary
# --------------------------------------------------------------------------


def summary_text(gpus: t.Any, kernel_log_read: bool, events: t.Any, kernel_log: str) -> str:
    """The health layer's one-line summary of a node with no finding, saying only what was read.

    A GPU counts as healthy when NVML answered its health fields (or lost it,
    which is a finding of its own); a kernel log that could not be read says
    "Xid events not checked" and why, never a count of zero. The verify role
    and the boot-time check share it.
    """
    gpus = [gpu for gpu in gpus or [] if isinstance(gpu, dict)]
    read = sum(1 for gpu in gpus if isinstance(gpu.get("health"), dict) or gpu.get("lost"))
    text = "{0} GPU(s) healthy".format(read)
    if read < len(gpus):
        text += ", {0} not checked (NVML gave no health fields)".format(len(gpus) - read)
    if kernel_log_read:
        return "{0}; {1} Xid event(s) since boot".format(text, len(events or []))
    return "{0}; Xid events not checked (kernel log {1} not readable)".format(text, kernel_log)


# --------------------------------------------------------------------------
# Policy
# --------------------------------------------------------------------------


def _xids_of(severity: str) -> list[int]:
    return sorted(row["xid"] for row in _kb.XID_CATALOG if row["severity"] == severity)


# The policy's names and defaults: verify_health_policy overrides them by
# name (docs/health.md). Severities are ignore / warn / critical.
PREFIX = "verify_health_policy."
POLICY_DEFAULTS: dict[str, t.Any] = {
    "gpu_count_expected": None,
    "gpu_count": "critical",
    "gpu_lost": "critical",
    "gpu_lost_action": "reboot",
    "xid_ignore": _xids_of("ignore"),
    "xid_critical": _xids_of("critical"),
    "xid_other": "warn",
    "fallen_off_bus": "critical",
    "ecc_uncorrected_volatile": _THRESHOLDS["ecc_uncorrected_volatile"],
    "ecc_uncorrected_aggregate": _THRESHOLDS["ecc_uncorrected_aggregate"],
    "ecc_corrected_volatile": "warn",
    "ecc_corrected_volatile_max": _THRESHOLDS["ecc_corrected_volatile_max"],
    "retired_pages_pending": "warn",
    "retired_pages": "warn",
    "retired_pages_max": _THRESHOLDS["retired_pages_max"],
    "remap_pending": _THRESHOLDS["remap_pending"],
    "remap_failure": _THRESHOLDS["remap_failure"],
    "remap_uncorrectable": "warn",
    "recovery_action": "critical",
    "recovery_action_map": {row["value"]: row["action"] for row in _kb.RECOVERY_ACTIONS},
    "pcie_width": _THRESHOLDS["pcie_width"],
    "pcie_gen": _THRESHOLDS["pcie_gen"],
    "pcie_replay": "warn",
    "pcie_replay_max": _THRESHOLDS["pcie_replay_max"],
    "nvlink_down": "critical",
    "fabric": "critical",
    "temperature": "warn",
    "temperature_margin_c": _THRESHOLDS["temperature_margin_c"],
    "clock_events": "warn",
    "clock_events_reasons": list(SLOWDOWN_REASONS),
    "power": "warn",
    "service_persistenced": "critical",
    "service_fabricmanager": "critical",
    "nvlsm_kernel_modules": "critical",
}
_SEVERITY_VARS = tuple(name for name, value in POLICY_DEFAULTS.items() if value in SEVERITIES)
_COUNT_VARS = ("ecc_corrected_volatile_max", "retired_pages_max", "pcie_replay_max", "temperature_margin_c")


class HealthPolicy:
    """The thresholds and severities, validated; build with from_vars()."""

    def __init__(self, values: dict[str, t.Any]) -> None:
        self.values = values

    def __getitem__(self, name: str) -> t.Any:
        return self.values[name]

    @classmethod
    def from_vars(cls, variables: t.Any = None, prefix: str = PREFIX) -> HealthPolicy:
        """The policy from variables named without their prefix; unknown or bad ones raise one ValueError
        naming every variable (with the prefix) and its fix."""
        errors = policy_errors(variables, prefix)
        if errors:
            raise ValueError("; ".join(errors))
        values = dict(POLICY_DEFAULTS)
        for name, value in (variables or {}).items():
            if value is not None or name == "gpu_count_expected":
                values[name] = value
        values["xid_ignore"] = sorted(set(int(x) for x in values["xid_ignore"]))
        values["xid_critical"] = sorted(set(int(x) for x in values["xid_critical"]))
        values["recovery_action_map"] = {int(k): v for k, v in values["recovery_action_map"].items()}
        return cls(values)

    def xid_severity(self, xid: int) -> str:
        if xid in self.values["xid_ignore"]:
            return "ignore"
        if xid in self.values["xid_critical"]:
            return "critical"
        return str(self.values["xid_other"])


def _is_int(value: t.Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _xid_list_error(name: str, value: t.Any) -> str | None:
    if not isinstance(value, (list, tuple)):
        return "expected a list of Xid numbers, got {0!r}".format(value)
    bad = [item for item in value if not (_is_int(item) or (isinstance(item, str) and item.isdigit()))]
    if bad:
        return "{0} are not Xid numbers: list integers such as [13, 31]".format(bad)
    return None


def policy_errors(variables: t.Any, prefix: str = PREFIX) -> list[str]:
    """Every problem of the policy variables, each naming the variable and the fix; [] when it is good."""
    if variables is None:
        return []
    if not isinstance(variables, dict):
        return ["{0}*: expected the health variables as a mapping, got {1}".format(prefix, type(variables).__name__)]
    errors = []
    for name in sorted(variables):
        value = variables[name]
        full = prefix + str(name)
        if name not in POLICY_DEFAULTS:
            errors.append("{0}: unknown health variable; known: {1}".format(full, ", ".join(prefix + known for known in sorted(POLICY_DEFAULTS))))
        elif value is None:
            continue
        elif name in _SEVERITY_VARS and value not in SEVERITIES:
            errors.append("{0}: '{1}' is not a severity: set ignore, warn or critical".format(full, value))
        elif name in _COUNT_VARS and (not _is_int(value) or value < 0):
            errors.append("{0}: '{1}' must be a whole number of 0 or more".format(full, value))
        elif name == "gpu_count_expected" and (not _is_int(value) or value < 0):
            errors.append("{0}: '{1}' must be the number of GPUs the node has, or null for no check".format(full, value))
        elif name == "gpu_lost_action" and value not in ACTIONS:
            errors.append("{0}: '{1}' is not an action: set one of {2}".format(full, value, ", ".join(ACTIONS)))
        elif name in ("xid_ignore", "xid_critical"):
            problem = _xid_list_error(name, value)
            if problem:
                errors.append("{0}: {1}".format(full, problem))
        elif name == "clock_events_reasons":
            unknown = [r for r in value if r not in CLOCK_EVENT_REASONS] if isinstance(value, list) else value
            if unknown:
                errors.append("{0}: {1!r} are not clock event reasons: list names of {2}".format(full, unknown, ", ".join(CLOCK_EVENT_REASONS)))
        elif name == "recovery_action_map":
            if not isinstance(value, dict) or not all((_is_int(k) or (isinstance(k, str) and k.isdigit())) and v in ACTIONS for k, v in value.items()):
                errors.append("{0}: expected a mapping of recovery action values (0-5) to actions ({1})".format(full, ", ".join(ACTIONS)))
    ignore = set(str(x) for x in variables.get("xid_ignore") or POLICY_DEFAULTS["xid_ignore"])
    critical = set(str(x) for x in variables.get("xid_critical") or POLICY_DEFAULTS["xid_critical"])
    both = sorted(ignore & critical, key=lambda x: int(x) if x.isdigit() else 0)
    if both and not errors:
        errors.append("{0}xid_ignore and {0}xid_critical both list Xid {1}: keep each Xid in one list".format(prefix, ", ".join(both)))
    return errors


# --------------------------------------------------------------------------
# Judgement
# --------------------------------------------------------------------------


def _gpu_label(gpu: dict[str, t.Any]) -> dict[str, t.Any]:
    pci = gpu.get("pci") or {}
    return {"index": gpu.get("index"), "uuid": gpu.get("uuid"), "bus_id": pci.get("bus_id")}


def _name(gpu: dict[str, t.Any] | None) -> str:
    if gpu is None:
        return "the node"
    return "GPU {0} ({1}, PCI {2})".format(gpu.get("index"), gpu.get("uuid") or "UUID unknown", gpu.get("bus_id") or "bus id unknown")


_DO = {
    "reset_gpu": "reset the GPU (nvidia-smi -r -i {index}, after draining its work)",
    "reboot": "drain the node and reboot it",
    "drain_and_repair": "drain the node and send the GPU for repair",
    "reseat": "drain the node, power it off and reseat the GPU (riser, cables, slot)",
    "restart_service": "restart the service",
    "load_kernel_modules": "load them (modprobe {modules}), list them in /etc/modules-load.d/ and restart nvidia-fabricmanager",
    "none": "no action needed now; watch it",
}


def action_text(finding: dict[str, t.Any]) -> str:
    """What to do about a finding, in words (its message ends with the same)."""
    return _action_words(finding["action"], finding.get("gpu"))


def _action_words(action: str, gpu: dict[str, t.Any] | None) -> str:
    return _DO[action].format(index=gpu.get("index") if gpu else "", modules=" ".join(NVLSM_KERNEL_MODULES))


def parse_systemctl_show(text: t.Any) -> dict[str, dict[str, str]]:
    """`systemctl show --property=Id,LoadState,ActiveState,UnitFileState UNIT...`: per unit (name without
    .service) its properties. systemctl prints one block of KEY=value lines per unit, blank-line separated."""
    units: dict[str, dict[str, str]] = {}
    for block in str(text or "").split("\n\n"):
        properties = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        unit = properties.get("Id", "")
        if unit:
            units[unit[: -len(".service")] if unit.endswith(".service") else unit] = properties
    return units


# What systemd is asked about the driver's daemons (the verify role's
# node_reads_info call reads the same knowledge entry).
SYSTEMCTL_SHOW = list(_kb.SERVICE_STATES_COMMAND["value"])


def service_states(show: str, persistenced: bool, fabricmanager: bool) -> dict[str, str]:
    """The driver daemons the node must run and their ActiveState ("" when not installed), from SYSTEMCTL_SHOW.

    nvidia-persistenced wherever the driver layer installs a driver;
    nvidia-fabricmanager where the driver layer asks for it or its unit is
    enabled (the driver role enables it on nodes with NVSwitches)."""
    units = parse_systemctl_show(show)
    states = {}
    for unit in SERVICES.values():
        found = units.get(unit) or {}
        wanted = persistenced if unit == "nvidia-persistenced" else (fabricmanager or found.get("UnitFileState") == "enabled")
        if wanted:
            states[unit] = "" if found.get("LoadState") == "not-found" else found.get("ActiveState", "")
    return states


def _finding(check: str, severity: str, gpu: dict[str, t.Any] | None, seen: str, action: str, advice: str = "") -> dict[str, t.Any]:
    message = "{0}: {1} on {2}; {3}{4}".format(check, seen, _name(gpu), _action_words(action, gpu), advice)
    return {"check": check, "severity": severity, "gpu": gpu, "seen": seen, "action": action, "message": message}


class _Judge:
    """The findings of one node."""

    def __init__(self, policy: HealthPolicy) -> None:
        self.policy = policy
        self.findings: list[dict[str, t.Any]] = []

    def add(self, check: str, gpu: dict[str, t.Any] | None, seen: str, action: str, severity: str | None = None, advice: str = "") -> None:
        severity = severity or self.policy[check]
        if severity != "ignore":
            self.findings.append(_finding(check, severity, gpu, seen, action, advice))

    def driver_action(self, health: dict[str, t.Any], default: str) -> str:
        """The driver's recovery action decides where it gives one."""
        value = health.get("recovery_action")
        if _is_int(value) and value != 0:
            return self.policy["recovery_action_map"].get(value, default)
        return default

    def gpu(self, gpu: dict[str, t.Any], who: dict[str, t.Any]) -> None:
        health = gpu.get("health")
        if gpu.get("lost"):
            action = self.driver_action(health or {}, self.policy["gpu_lost_action"])
            self.add(
                "gpu_lost",
                who,
                "NVML reports the GPU lost (NVML_ERROR_GPU_IS_LOST)",
                action,
                advice="; if it is lost again after the reboot, reseat it or send it for repair",
            )
            return
        if not isinstance(health, dict):
            return
        self.ecc(health, who)
        self.memory(health, who)
        self.recovery(health, who)
        self.pcie(health, who)
        self.links(health, who)
        self.environment(health, who)

    def ecc(self, health: dict[str, t.Any], who: dict[str, t.Any]) -> None:
        ecc = health.get("ecc") or {}
        volatile = ecc.get("volatile") or {}
        aggregate = ecc.get("aggregate") or {}
        reset = self.driver_action(health, "reset_gpu")
        if _positive(volatile.get("uncorrected")):
            self.add("ecc_uncorrected_volatile", who, "{0} uncorrectable ECC errors since the driver loaded".format(volatile["uncorrected"]), reset)
        if _positive(aggregate.get("uncorrected")):
            self.add("ecc_uncorrected_aggregate", who, "{0} uncorrectable ECC errors over the GPU's life".format(aggregate["uncorrected"]), "none")
        limit = self.policy["ecc_corrected_volatile_max"]
        if _is_int(volatile.get("corrected")) and volatile["corrected"] > limit:
            self.add(
                "ecc_corrected_volatile", who, "{0} corrected ECC errors since the driver loaded (more than {1})".format(volatile["corrected"], limit), "none"
            )

    def memory(self, health: dict[str, t.Any], who: dict[str, t.Any]) -> None:
        retired = health.get("retired_pages") or {}
        remapped = health.get("remapped_rows") or {}
        reset = self.driver_action(health, "reset_gpu")
        if retired.get("pending") is True:
            self.add("retired_pages_pending", who, "a page retirement is pending (takes effect at the next reset)", reset)
        total = sum(value for value in (retired.get("single_bit_ecc"), retired.get("double_bit_ecc")) if _is_int(value))
        if total > 0 and total >= self.policy["retired_pages_max"]:
            self.add(
                "retired_pages",
                who,
                "{0} retired pages ({1} single-bit, {2} double-bit; limit {3})".format(
                    total, retired.get("single_bit_ecc"), retired.get("double_bit_ecc"), self.policy["retired_pages_max"]
                ),
                "drain_and_repair",
            )
        if remapped.get("pending") is True:
            self.add("remap_pending", who, "a row remap is pending (takes effect at the next GPU reset)", reset)
        if remapped.get("failure") is True:
            self.add("remap_failure", who, "a row remap failed: the memory cannot repair itself any more", self.driver_action(health, "drain_and_repair"))
        if _positive(remapped.get("uncorrectable")):
            self.add("remap_uncorrectable", who, "{0} rows remapped after uncorrectable errors".format(remapped["uncorrectable"]), "none")

    def recovery(self, health: dict[str, t.Any], who: dict[str, t.Any]) -> None:
        value = health.get("recovery_action")
        if not _is_int(value) or value == 0:
            return
        row = _RECOVERY.get(value)
        says = "{0} ({1})".format(row["name"], row["driver_says"]) if row else "an action this collection does not know ({0})".format(value)
        self.add("recovery_action", who, "the driver asks for recovery: {0}".format(says), self.policy["recovery_action_map"].get(value, "drain_and_repair"))

    def pcie(self, health: dict[str, t.Any], who: dict[str, t.Any]) -> None:
        pcie = health.get("pcie") or {}
        width, width_max = pcie.get("width_current"), pcie.get("width_max")
        if _is_int(width) and _is_int(width_max) and width < width_max:
            self.add("pcie_width", who, "PCIe link trained at x{0}, the GPU and slot allow x{1}".format(width, width_max), "reseat")
        gen, gen_max = pcie.get("gen_current"), pcie.get("gen_max")
        if _is_int(gen) and _is_int(gen_max) and gen < gen_max:
            self.add("pcie_gen", who, "PCIe link at gen{0}, the GPU and slot allow gen{1} (idle GPUs lower it)".format(gen, gen_max), "none")
        replay = pcie.get("replay_counter")
        if _is_int(replay) and replay > self.policy["pcie_replay_max"]:
            self.add("pcie_replay", who, "{0} PCIe replays (more than {1})".format(replay, self.policy["pcie_replay_max"]), "reseat")

    def links(self, health: dict[str, t.Any], who: dict[str, t.Any]) -> None:
        nvlink = health.get("nvlink") or []
        down = sorted(link.get("link") for link in nvlink if isinstance(link, dict) and link.get("active") is False)
        if down:
            self.add(
                "nvlink_down",
                who,
                "NVLink links {0} of {1} are down".format(", ".join(str(link) for link in down), len(nvlink)),
                self.driver_action(health, "reset_gpu"),
            )
        fabric = health.get("fabric")
        if isinstance(fabric, dict) and fabric.get("state") not in (None, "not_supported"):
            status = fabric.get("status")
            failed = status is not None and str(status).lower() not in ("success", "nvml_success")
            waited = fabric.get("waited_s")
            if fabric.get("state") != "completed" and _positive(waited):
                # Still starting after nvml_info's bounded wait: not a boot that has yet to settle.
                self.add(
                    "fabric",
                    who,
                    "GPU fabric registration is still {0} after {1} s".format(fabric["state"], waited),
                    "restart_service",
                    advice=" (nvidia-fabricmanager; on NVLink5 systems it needs NVLSM and the {0} kernel modules), then check again".format(
                        " and ".join(NVLSM_KERNEL_MODULES)
                    ),
                )
            elif fabric.get("state") != "completed":
                self.add(
                    "fabric",
                    who,
                    "GPU fabric registration is {0}".format(fabric["state"]),
                    "restart_service",
                    severity="warn",
                    advice=" (nvidia-fabricmanager), then check again",
                )
            elif failed:
                self.add(
                    "fabric",
                    who,
                    "GPU fabric registration completed with status {0}".format(status),
                    "restart_service",
                    advice=" (nvidia-fabricmanager); if it fails again, reset the GPU",
                )

    def environment(self, health: dict[str, t.Any], who: dict[str, t.Any]) -> None:
        temperature = health.get("temperature") or {}
        current, slowdown, shutdown = (temperature.get(key) for key in ("current_c", "slowdown_c", "shutdown_c"))
        margin = self.policy["temperature_margin_c"]
        # The nearer threshold decides: (name, limit, action, severity, advice); shutdown is checked first.
        near = [
            reading
            for reading in (
                ("shutdown", shutdown, "reseat", "critical", " after checking the cooling (fans, airflow, heat sink)"),
                ("slowdown", slowdown, "none", None, " and check the cooling (fans, airflow)"),
            )
            if _is_int(current) and _is_int(reading[1]) and current >= reading[1] - margin
        ]
        if near:
            name, limit, action, severity, advice = near[0]
            seen = "{0} °C, within {1} °C of the {2} threshold {3} °C".format(current, margin, name, limit)
            self.add("temperature", who, seen, action, severity=severity, advice=advice)
        clocks = health.get("clock_event_reasons")
        active = [reason for reason in ((clocks or {}).get("active") or []) if reason in self.policy["clock_events_reasons"]]
        if active:
            self.add("clock_events", who, "clocks slowed by {0}".format(", ".join(sorted(active))), "none", advice=" and check cooling and power delivery")
        power = health.get("power") or {}
        draw, limit = power.get("draw_w"), power.get("limit_w")
        if isinstance(draw, (int, float)) and isinstance(limit, (int, float)) and limit > 0 and draw > limit:
            self.add(
                "power",
                who,
                "drawing {0} W over its enforced limit {1} W".format(draw, limit),
                "none",
                advice=" and check the power limit settings and power delivery",
            )

    def kernel_events(
        self, events: list[dict[str, t.Any]], by_bus: dict[tuple[int, int, int], dict[str, t.Any]], healths: dict[tuple[int, int, int], dict[str, t.Any]]
    ) -> None:
        grouped: dict[tuple[t.Any, ...], list[dict[str, t.Any]]] = {}
        for event in events:
            key = bus_key(event.get("bus_id"))
            kind = ("xid", event["xid"]) if event.get("xid") is not None else ("fallen_off_bus", None)
            grouped.setdefault((key,) + kind, []).append(event)
        reported_79 = set()
        for (key, kind, xid), group in sorted(grouped.items(), key=_event_group_order):
            if kind != "xid":
                continue
            who = by_bus.get(key) if key else None
            severity = self.policy.xid_severity(xid)
            row = _XIDS.get(xid)
            meaning = row["meaning"] if row else "not in the collection's Xid catalog"
            action = self.driver_action(healths.get(key) or {}, row["action"] if row else "none")
            seen = "Xid {0} ({1}) {2} time{3} since boot, last: {4}".format(xid, meaning, len(group), "" if len(group) == 1 else "s", group[-1]["message"])
            if who is None:
                seen += " (bus {0} is no GPU NVML reports)".format(group[-1]["bus_id"])
            self.add("xid", who, seen, action, severity=severity)
            if xid == 79 and severity != "ignore":
                reported_79.add(key)
        for (key, kind, _xid), group in grouped.items():
            if kind != "fallen_off_bus" or key in reported_79:
                continue
            who = by_bus.get(key) if key else None
            seen = "the kernel log says the GPU at {0} fell off the bus ({1} time{2}): {3}".format(
                group[-1]["bus_id"], len(group), "" if len(group) == 1 else "s", group[-1]["message"]
            )
            self.add(
                "fallen_off_bus",
                who,
                seen,
                self.driver_action(healths.get(key) or {}, "reboot"),
                advice="; if it falls off again, reseat the GPU or send it for repair",
            )

    def node(self, gpus: list[dict[str, t.Any]], services: dict[str, t.Any], kernel_modules: list[str] | None = None) -> None:
        expected = self.policy["gpu_count_expected"]
        if expected is not None and len(gpus) != expected:
            self.add(
                "gpu_count",
                None,
                "{0} GPUs visible to NVML, {1} expected".format(len(gpus), expected),
                "reseat" if len(gpus) < expected else "none",
                advice="; a GPU missing after a reboot is unseated, unpowered or failed"
                if len(gpus) < expected
                else "; set verify_health_gpu_count to this node's GPU count",
            )
        for check, unit in SERVICES.items():
            if unit not in services:
                continue
            state = services[unit]
            if state != "active":
                self.add(
                    check,
                    None,
                    "{0} is {1}".format(unit, state or "not installed"),
                    "restart_service",
                    advice=" (systemctl restart {0}; journalctl -u {0} says why it stopped)".format(unit),
                )
        # Fabric Manager runs here on NVLink5 GPUs: its NVLSM needs InfiniBand management modules.
        nvlink5 = any(gpu.get("architecture") in NVLSM_ARCHITECTURES for gpu in gpus)
        if kernel_modules is not None and "nvidia-fabricmanager" in services and nvlink5:
            missing = [module for module in NVLSM_KERNEL_MODULES if module not in kernel_modules]
            if missing:
                self.add(
                    "nvlsm_kernel_modules",
                    None,
                    "{0} not loaded: NVLSM cannot reach the NVSwitches, so Fabric Manager cannot register the GPUs".format(
                        " and ".join(missing) + (" is" if len(missing) == 1 else " are")
                    ),
                    "load_kernel_modules",
                    advice="; on Ubuntu they come with linux-modules-extra-$(uname -r)",
                )


def _event_group_order(item: tuple[tuple[t.Any, ...], t.Any]) -> tuple[str, str, int]:
    key, kind, xid = item[0]
    return str(key), kind, xid or 0


def _positive(value: t.Any) -> bool:
    return _is_int(value) and value > 0


def _gpus(nvml_facts: t.Any) -> list[dict[str, t.Any]]:
    if not isinstance(nvml_facts, dict):
        raise ValueError("expected the nvml_info facts (a mapping with 'gpus'), got {0}".format(type(nvml_facts).__name__))
    gpus = nvml_facts.get("gpus") or []
    if not isinstance(gpus, list) or not all(isinstance(gpu, dict) for gpu in gpus):
        raise ValueError("nvml.gpus: expected a list of GPU mappings from nvml_info")
    return gpus


def judge(nvml_facts: t.Any, xid_events: t.Any, services: t.Any, policy: HealthPolicy, kernel_modules: t.Any = None) -> list[dict[str, t.Any]]:
    """Every finding of one node, sorted by GPU index (node findings first), then check order, then what was seen.

    services: unit name -> its ActiveState ("active", "failed", ...); a unit
    the node does not need is absent. kernel_modules: the names of the loaded
    kernel modules (loaded_kernel_modules of /proc/modules), or None where
    they were not read."""
    gpus = _gpus(nvml_facts)
    if kernel_modules is not None and not isinstance(kernel_modules, (list, tuple, set, frozenset)):
        raise ValueError("kernel_modules: expected the names of the loaded kernel modules, got {0}".format(type(kernel_modules).__name__))
    if services is None:
        services = {}
    if not isinstance(services, dict):
        raise ValueError("services: expected a mapping of unit name to state, got {0}".format(type(services).__name__))
    events = list(xid_events or [])
    judgement = _Judge(policy)
    by_bus: dict[tuple[int, int, int], dict[str, t.Any]] = {}
    healths: dict[tuple[int, int, int], dict[str, t.Any]] = {}
    for gpu in gpus:
        who = _gpu_label(gpu)
        key = bus_key(who["bus_id"])
        if key is not None:
            by_bus[key] = who
            healths[key] = gpu.get("health") or {}
        judgement.gpu(gpu, who)
    judgement.kernel_events(events, by_bus, healths)
    judgement.node(gpus, services, None if kernel_modules is None else list(kernel_modules))
    return sorted(judgement.findings, key=_order)


def loaded_kernel_modules(proc_modules: t.Any) -> list[str] | None:
    """The module names of /proc/modules' text (first field of each line); None where it was not read."""
    if proc_modules is None:
        return None
    return [line.split()[0] for line in str(proc_modules).splitlines() if line.strip()]


def _order(finding: dict[str, t.Any]) -> tuple[t.Any, ...]:
    gpu = finding["gpu"]
    index = gpu["index"] if gpu and _is_int(gpu.get("index")) else -1
    return (index, CHECKS.index(finding["check"]), finding["seen"])


def health_status(findings: t.Any) -> str:
    """pass, warn or fail: the worst finding."""
    severities = {finding.get("severity") for finding in findings or []}
    if "critical" in severities:
        return "fail"
    if "warn" in severities:
        return "warn"
    return "pass"


# --------------------------------------------------------------------------
# Metrics (Prometheus text exposition format for node-exporter's textfile collector)
# --------------------------------------------------------------------------

# Only values that stay put on a healthy node: no temperature, power or
# current link generation, so the file of a healthy node is byte-identical
# from one run to the next and the role writes it only when health changed.
_METRIC_HELP = {
    "gpufleet_gpu_health_status": "GPU health check result: 0 pass, 1 warn, 2 critical.",
    "gpufleet_node_health_check_status": "Node health check result: 0 pass, 1 warn, 2 critical.",
    "gpufleet_node_health_status": "Worst health check result of the node: 0 pass, 1 warn, 2 critical.",
    "gpufleet_gpu_ecc_volatile_errors_total": "ECC errors since the driver loaded (NVML volatile counter).",
    "gpufleet_gpu_ecc_aggregate_errors_total": "ECC errors over the GPU's life (NVML aggregate counter).",
    "gpufleet_gpu_retired_pages": "Pages retired by cause (pre-Ampere GPUs).",
    "gpufleet_gpu_remapped_rows": "Rows remapped by kind (Ampere and later).",
    "gpufleet_gpu_pcie_link_width_lanes": "Current PCIe link width.",
    "gpufleet_gpu_pcie_link_max_width_lanes": "Maximum PCIe link width of the GPU and its slot.",
    "gpufleet_gpu_pcie_link_max_generation": "Maximum PCIe link generation of the GPU and its slot.",
    "gpufleet_gpu_nvlink_links": "NVLink links the GPU reports.",
    "gpufleet_gpu_nvlink_links_active": "NVLink links that are active.",
    "gpufleet_gpu_xid_events": "Xid records of this Xid in the kernel log buffer now (it drops old records, so this is not a counter).",
}
_METRIC_TYPE = {name: "counter" if name.endswith("_total") else "gauge" for name in _METRIC_HELP}


def _label_value(value: t.Any) -> str:
    text = "" if value is None else str(value)
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _sample(name: str, labels: dict[str, t.Any], value: t.Any) -> str:
    pairs = ",".join('{0}="{1}"'.format(key, _label_value(labels[key])) for key in sorted(labels))
    return "{0}{{{1}}} {2}".format(name, pairs, value) if pairs else "{0} {1}".format(name, value)


def _status_by(findings: list[dict[str, t.Any]]) -> dict[tuple[t.Any, ...], int]:
    worst: dict[tuple[t.Any, ...], int] = {}
    for finding in findings:
        gpu = finding.get("gpu")
        key = (finding["check"], gpu.get("index") if gpu else None)
        worst[key] = max(worst.get(key, 0), STATUS_VALUE[finding["severity"]])
    return worst


def metrics_text(nvml_facts: t.Any, findings: t.Any, xid_events: t.Any = None) -> str:
    """The node's health as a Prometheus textfile: HELP and TYPE per metric, samples sorted."""
    gpus = _gpus(nvml_facts)
    findings = list(findings or [])
    status = _status_by(findings)
    samples: dict[str, list[str]] = {name: [] for name in _METRIC_HELP}
    by_bus = {}
    for gpu in gpus:
        who = _gpu_label(gpu)
        labels = {"gpu": who["index"], "uuid": who["uuid"], "bus_id": who["bus_id"]}
        key = bus_key(who["bus_id"])
        if key is not None:
            by_bus[key] = labels
        for check in GPU_CHECKS:
            samples["gpufleet_gpu_health_status"].append(_sample("gpufleet_gpu_health_status", dict(labels, check=check), status.get((check, who["index"]), 0)))
        _gpu_values(samples, labels, gpu.get("health"))
    for check in NODE_CHECKS:
        samples["gpufleet_node_health_check_status"].append(_sample("gpufleet_node_health_check_status", {"check": check}, status.get((check, None), 0)))
    samples["gpufleet_node_health_status"].append(_sample("gpufleet_node_health_status", {}, max(status.values(), default=0)))
    counts: dict[tuple[t.Any, ...], int] = {}
    for event in xid_events or []:
        if event.get("xid") is None:
            continue
        labels = by_bus.get(bus_key(event.get("bus_id"))) or {"gpu": "", "uuid": "", "bus_id": event.get("bus_id")}
        key = tuple(sorted(dict(labels, xid=event["xid"]).items()))
        counts[key] = counts.get(key, 0) + 1
    for key, count in counts.items():
        samples["gpufleet_gpu_xid_events"].append(_sample("gpufleet_gpu_xid_events", dict(key), count))
    lines = []
    for name in sorted(samples):
        if not samples[name]:
            continue
        lines += ["# HELP {0} {1}".format(name, _METRIC_HELP[name]), "# TYPE {0} {1}".format(name, _METRIC_TYPE[name])]
        lines += sorted(samples[name], key=_sample_order)
    return "\n".join(lines) + "\n"


def _sample_order(line: str) -> tuple[t.Any, ...]:
    # Numeric GPU indexes sort as numbers (gpu="10" after gpu="9").
    match = re.search(r'gpu="(\d+)"', line)
    return (int(match.group(1)) if match else -1, line)


def _gpu_values(samples: dict[str, list[str]], labels: dict[str, t.Any], health: t.Any) -> None:
    if not isinstance(health, dict):
        return

    def put(name: str, value: t.Any, **extra: t.Any) -> None:
        if _is_int(value) and not isinstance(value, bool):
            samples[name].append(_sample(name, dict(labels, **extra), value))

    ecc = health.get("ecc") or {}
    for scope in ("volatile", "aggregate"):
        for kind in ("corrected", "uncorrected"):
            put("gpufleet_gpu_ecc_{0}_errors_total".format(scope), (ecc.get(scope) or {}).get(kind), error=kind)
    retired = health.get("retired_pages") or {}
    put("gpufleet_gpu_retired_pages", retired.get("single_bit_ecc"), cause="single_bit_ecc")
    put("gpufleet_gpu_retired_pages", retired.get("double_bit_ecc"), cause="double_bit_ecc")
    remapped = health.get("remapped_rows") or {}
    put("gpufleet_gpu_remapped_rows", remapped.get("correctable"), kind="correctable")
    put("gpufleet_gpu_remapped_rows", remapped.get("uncorrectable"), kind="uncorrectable")
    pcie = health.get("pcie") or {}
    put("gpufleet_gpu_pcie_link_width_lanes", pcie.get("width_current"))
    put("gpufleet_gpu_pcie_link_max_width_lanes", pcie.get("width_max"))
    put("gpufleet_gpu_pcie_link_max_generation", pcie.get("gen_max"))
    nvlink = health.get("nvlink")
    if isinstance(nvlink, list) and nvlink:
        put("gpufleet_gpu_nvlink_links", len(nvlink))
        put("gpufleet_gpu_nvlink_links_active", sum(1 for link in nvlink if link.get("active") is True))


# =============================================================================
# the verify check
# =============================================================================

# The judgement's severities as verify's; "ok" and "info" judgements are no finding.
SEVERITY = {"critical": "error", "warn": "warning"}


def declared_policy(settings: dict[str, t.Any]) -> HealthPolicy:
    """The declared policy, with the expected GPU count; ValueError naming each bad variable."""
    variables = dict(settings.get("policy") or {})
    if settings.get("gpu_count") is not None:
        variables["gpu_count_expected"] = int(settings["gpu_count"])
    return HealthPolicy.from_vars(variables)


def check_health(
    settings: dict[str, t.Any],
    nvml: dict[str, t.Any],
    events: list[dict[str, t.Any]] | None,
    services: dict[str, str] | None,
    proc_modules: t.Any,
    remedies: Remedies,
) -> tuple[dict[str, t.Any], list[dict[str, t.Any]]]:
    """(the check, the judgement's findings) of NVML facts in nvml_info's shape.

    events: the kernel log's events, None where it could not be read (Xid
    events not checked, never counted as none); services: the driver daemons'
    states, None where systemd did not answer; proc_modules: /proc/modules, None
    where not read (NVLSM's modules not checked). ValueError: a bad policy."""
    source = str(settings.get("kernel_log") or "")
    judgement = judge(nvml, events or [], services or {}, declared_policy(settings), loaded_kernel_modules(proc_modules))
    found = []
    if events is None:
        found.append(check_finding("health", source, "kernel log {0} not readable: Xid events not checked".format(source), remedies.kernel_log, "info"))
    if services is None:
        found.append(
            check_finding("health", "services", "systemd not answering: nvidia-persistenced and nvidia-fabricmanager not checked", remedies.services, "info")
        )
    for item in judgement:
        if item["severity"] in SEVERITY:
            gpu = item.get("gpu")
            subject = "GPU {0}".format(gpu["index"]) if gpu else "node"
            found.append(check_finding("health", subject, item["message"], action_text(item), SEVERITY[item["severity"]]))
    gpus = nvml.get("gpus") or []
    # Nothing that moves on a healthy node (temperature, power, clocks): the
    # report of an unchanged node stays byte-identical.
    observed = {
        "gpus": len(gpus),
        "lost": [gpu.get("index") for gpu in gpus if gpu.get("lost")],
        "kernel_log": source if events is not None else None,
        # null, not 0, when the kernel log was not read: nothing was counted.
        "xid_events": len(events) if events is not None else None,
        "services": services,
        # The judgement per check and GPU, for the node-exporter textfile and the Kubernetes Node's condition.
        "judged": [
            {"check": item["check"], "severity": item["severity"], "gpu": item.get("gpu"), "seen": item["seen"], "action": item["action"]} for item in judgement
        ],
    }
    expected = {"gpu_count": settings.get("gpu_count"), "services": sorted(services or {})}
    summary = summary_text(gpus, events is not None, events, source)
    return judged("health", summary, expected, observed, found), judgement


def check_layer(settings: dict[str, t.Any], observed: dict[str, t.Any], remedies: Remedies) -> dict[str, t.Any]:
    """The health layer of a verify run, from what the role read: `nvml` (nvml_info's facts), `kernel_log`
    (node_reads_info's read, or the log's text; None: not read), `services` (the `systemctl show` command's
    result, SYSTEMCTL_SHOW) and `proc_modules` (/proc/modules; None: not read). ValueError: a bad policy or read."""
    if not settings.get("enabled"):
        return verify_check("health", "not_managed", "not managed: verify_health is false")
    nvml = observed.get("nvml") or {}
    if nvml.get("status") != "ok":
        return verify_check("health", "not_available", "GPU health not read: NVML status {0}".format(nvml.get("status")))
    kernel_log = observed.get("kernel_log")
    show = observed.get("services")
    services = None
    if isinstance(show, dict) and show.get("rc") == 0:
        services = service_states(show.get("stdout") or "", bool(settings.get("persistenced")), bool(settings.get("fabricmanager")))
    events = kernel_events(kernel_log) if kernel_log is not None else None
    return check_health(settings, nvml, events, services, observed.get("proc_modules"), remedies)[0]
