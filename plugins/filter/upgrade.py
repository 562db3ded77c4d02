# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Filters of the rolling upgrade (playbooks/upgrade.yml, the upgrade role):
check the roll's batch settings, and decide from verify's own judgement of a
layer whether a node needs upgrading at all."""

from __future__ import annotations

import re
import typing as t

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._filters import FilterTable

# kernel: the kernel roll (playbooks/kernel_roll.yml), whose plan (kernel_roll_plan) gives the layer's findings.
UPGRADE_LAYERS = ("kernel", "driver", "container_toolkit")
_PERCENT = re.compile(r"^\s*(\d+)\s*%\s*$")
_NUMBER = re.compile(r"^\s*(\d+)\s*$")
SERIAL_FIX = 'give a number of nodes per batch (1), a percentage of the play\'s nodes ("25%"), or a list of them for growing batches ([1, "10%", "50%"])'


def _batch_error(value: t.Any) -> str | None:
    """Why one batch size is not one, or None."""
    if isinstance(value, bool):
        return "{0!r} is a boolean".format(value)
    if isinstance(value, int):
        return None if value >= 1 else "{0} is not a positive number of nodes".format(value)
    if isinstance(value, str):
        number = _NUMBER.fullmatch(value)
        if number:
            return None if int(number.group(1)) >= 1 else "'{0}' is not a positive number of nodes".format(value)
        percent = _PERCENT.fullmatch(value)
        if percent:
            return None if 1 <= int(percent.group(1)) <= 100 else "'{0}' is not between 1% and 100%".format(value)
        return "'{0}' is neither a number of nodes nor a percentage".format(value)
    return "{0!r} is a {1}".format(value, type(value).__name__)


def upgrade_roll_errors(settings: t.Any) -> list[str]:
    """Every problem with the roll's batch settings, each naming the variable and the fix."""
    if not isinstance(settings, dict):
        raise AnsibleFilterError("upgrade_roll_errors: expected a mapping of the roll's settings, got {0}".format(type(settings).__name__))
    errors = []
    serial = settings.get("upgrade_serial")
    batches = serial if isinstance(serial, list) else [serial]
    problems = [_batch_error(batch) for batch in batches] if batches else ["the list is empty"]
    problems = [problem for problem in problems if problem]
    if problems:
        errors.append("upgrade_serial: {0}; {1}".format("; ".join(problems), SERIAL_FIX))
    failing = settings.get("upgrade_max_fail_percentage")
    number = None
    if isinstance(failing, int) and not isinstance(failing, bool):
        number = failing
    elif isinstance(failing, str) and _NUMBER.fullmatch(failing):
        number = int(failing)
    if number is None or not 0 <= number <= 100:
        errors.append(
            "upgrade_max_fail_percentage: {0!r} is not a whole percentage from 0 to 100; give 0 to stop "
            "the roll at the first failed node, or the share of a batch that may fail (25)".format(failing)
        )
    layers = settings.get("upgrade_layers")
    if not isinstance(layers, list) or not layers or any(layer not in UPGRADE_LAYERS for layer in layers):
        errors.append("upgrade_layers: {0!r} must be a non-empty list of {1}".format(layers, ", ".join(UPGRADE_LAYERS)))
    return errors


def upgrade_plan(checks: t.Any, layers: t.Any) -> dict[str, t.Any]:
    """What a node lacks of its declaration, from verify_check results.

    A layer the roll upgrades is pending when verify would fail it now (an
    error finding): the same judgement that gates the node afterwards, so a
    node the gate would pass is never drained. Warnings do not drain a node.
    """
    if not isinstance(checks, list) or not all(isinstance(c, dict) and "layer" in c for c in checks):
        raise AnsibleFilterError("upgrade_plan: expected a list of verify_check results")
    if not isinstance(layers, list) or any(layer not in UPGRADE_LAYERS for layer in layers):
        raise AnsibleFilterError("upgrade_plan: layers must be a list of {0}, got {1!r}".format(", ".join(UPGRADE_LAYERS), layers))
    pending, reasons = [], []
    for check in checks:
        if check["layer"] not in layers:
            continue
        errors = [f for f in check.get("findings") or [] if f.get("severity") == "error"]
        if errors:
            pending.append(check["layer"])
            reasons.extend("{0}: {1}".format(check["layer"], f.get("message", "")) for f in errors)
    return {
        "layers": list(layers),
        "pending": bool(pending),
        "pending_layers": pending,
        "reasons": reasons,
        "summary": "; ".join(reasons) if reasons else "{0} as declared".format(" and ".join(layers)),
    }


def _annotations(node: t.Any) -> dict[str, t.Any]:
    return dict(((node or {}).get("metadata") or {}).get("annotations") or {})


def _unschedulable(node: t.Any) -> bool:
    return bool(((node or {}).get("spec") or {}).get("unschedulable"))


def _reason(text: t.Any) -> str:
    """sinfo's %E for the node: its reason, as `scontrol update ... Reason=` set it ("none" where there is none)."""
    return " ".join(str(text or "").split())


def _marks(marks: t.Any) -> tuple[str, str, str]:
    if not isinstance(marks, dict) or not all(isinstance(marks.get(k), str) and marks.get(k) for k in ("annotation", "value", "reason")):
        raise AnsibleFilterError("upgrade marks: expected the strings annotation, value and reason, got {0!r}".format(marks))
    return marks["annotation"], marks["value"], marks["reason"]


def upgrade_take(kubernetes_node: t.Any, slurm_state: t.Any, slurm_reason: t.Any, marks: t.Any, drained_pattern: str = "drain") -> dict[str, t.Any]:
    """What this roll takes out of service, and marks as its own: the Kubernetes node (a dict, or None where
    Kubernetes is left alone) unless someone else cordoned it, and the Slurm node (sinfo's state and reason, or
    None) unless someone else drained it. A node cordoned or drained with the roll's mark is a stopped roll's:
    this roll takes it over. Someone else's cordon or drain is left as it is and never given back."""
    annotation, value, reason = _marks(marks)
    out: dict[str, t.Any] = {"kubernetes_cordon": False, "slurm_drain": False, "left": []}
    if kubernetes_node is not None:
        ours = _annotations(kubernetes_node).get(annotation) == value
        out["kubernetes_cordon"] = ours or not _unschedulable(kubernetes_node)
        if not out["kubernetes_cordon"]:
            out["left"].append("cordoned in Kubernetes by someone else (no {0} annotation): left cordoned".format(annotation))
    if slurm_state is not None:
        drained = re.search(drained_pattern, str(slurm_state), re.IGNORECASE) is not None
        out["slurm_drain"] = not drained or _reason(slurm_reason) == reason
        if not out["slurm_drain"]:
            out["left"].append("drained in Slurm by someone else (reason {0!r}): left drained".format(_reason(slurm_reason)))
    return out


def upgrade_give_back(record: t.Any, kubernetes_node: t.Any, slurm_reason: t.Any, marks: t.Any) -> dict[str, t.Any]:
    """What the roll gives back: only what it took (the record) and what still carries its mark now. A cordon
    whose annotation someone took off, or a drain whose reason someone (or the Slurm health guard) replaced,
    is theirs now and stays; `kept` says each, for the log and AWX."""
    annotation, value, reason = _marks(marks)
    record = record if isinstance(record, dict) else {}
    out: dict[str, t.Any] = {"uncordon": False, "unmark": False, "resume": False, "kept": []}
    if record.get("kubernetes_cordoned") and kubernetes_node is not None:
        marked = _annotations(kubernetes_node).get(annotation) == value
        out["unmark"] = marked
        out["uncordon"] = marked and _unschedulable(kubernetes_node)
        if _unschedulable(kubernetes_node) and not marked:
            out["kept"].append("cordoned in Kubernetes without the upgrade's {0} annotation (someone else's cordon): left cordoned".format(annotation))
    if slurm_reason is not None:
        # Read whenever the roll works with Slurm: a drain this roll found with someone else's reason (the
        # guard's, a person's) was never taken, and is said to stay.
        now = _reason(slurm_reason)
        out["resume"] = bool(record.get("slurm_drained")) and now == reason
        if not out["resume"] and now.lower() not in ("", "none"):
            out["kept"].append("drained in Slurm with the reason {0!r}, not the upgrade's {1!r}: left drained".format(now, reason))
    return out


def _selects(selector: t.Any, labels: dict[str, t.Any]) -> bool:
    """Whether a label selector (metav1.LabelSelector) selects a pod's labels. In policy/v1 an empty selector
    selects every pod of the budget's namespace, and a missing one none."""
    if not isinstance(selector, dict):
        return False
    if any(labels.get(key) != value for key, value in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def _drain_blockers(pods: list[t.Any], budgets: list[t.Any]) -> list[dict[str, t.Any]]:
    """The pods still on a node (not being deleted) that a PodDisruptionBudget allowing no disruption now
    protects: what the eviction API refuses (HTTP 429) while a drain waits. One entry per budget and pod: the
    budget's and the pod's namespace/name, and the healthy pods the budget needs and has."""
    blockers = []
    for budget in budgets:
        meta, status = budget.get("metadata") or {}, budget.get("status") or {}
        if status.get("disruptionsAllowed", 0) > 0:
            continue
        for pod in pods:
            pod_meta = pod.get("metadata") or {}
            if pod_meta.get("deletionTimestamp") or pod_meta.get("namespace") != meta.get("namespace"):
                continue
            if _selects((budget.get("spec") or {}).get("selector"), pod_meta.get("labels") or {}):
                blockers.append(
                    {
                        "budget": "{0}/{1}".format(meta.get("namespace"), meta.get("name")),
                        "pod": "{0}/{1}".format(pod_meta.get("namespace"), pod_meta.get("name")),
                        "desired_healthy": status.get("desiredHealthy"),
                        "current_healthy": status.get("currentHealthy"),
                    }
                )
    return sorted(blockers, key=lambda blocker: (blocker["budget"], blocker["pod"]))


# What makes k8s_drain refuse a pod before evicting anything, and the option that would evict it anyway.
_DRAIN_OPTIONS = (
    ("local storage", "Their emptyDir data would be lost: set upgrade_kubernetes_drain_options.delete_emptydir_data to true to evict them anyway"),
    ("not managed by", "Nothing would recreate them: set upgrade_kubernetes_drain_options.force to true to delete them anyway"),
)
_LEFT = "; the node is left cordoned with the upgrade's mark, and the next roll takes it over."


def upgrade_drain_failure(refusal: t.Any, pods: t.Any, budgets: t.Any, node: str, timeout: t.Any) -> str:
    """Why a node's drain failed, for the roll's report: k8s_drain's message (`refusal`) made actionable. A refusal
    for a PodDisruptionBudget names every budget that allows no disruption now and each of the node's pods it
    protects (`pods` and `budgets` as M(kubernetes.core.k8s_info) returns them); a pod with local storage or
    without a controller names the option that would evict it anyway."""
    if not isinstance(pods, list) or not isinstance(budgets, list):
        raise AnsibleFilterError("upgrade_drain_failure: expected the node's pods and the budgets as lists of objects")
    refusal = " ".join(str(refusal or "").split())
    if "disruption budget" in refusal:
        waited = "Kubernetes node {0} did not drain within upgrade_kubernetes_drain_timeout ({1} s): ".format(node, timeout)
        blockers = _drain_blockers(pods, budgets)
        if not blockers:
            return waited + refusal + " No budget refuses now: run the roll again" + _LEFT
        protected = "; ".join(
            "pod {pod}, which PodDisruptionBudget {budget} protects (it needs {desired_healthy} healthy pods and has {current_healthy})".format(**blocker)
            for blocker in blockers
        )
        return (
            waited
            + "the eviction API refuses to evict "
            + protected
            + ". Let the budget allow a disruption (more replicas elsewhere, or a lower minAvailable) and run the roll again"
            + _LEFT
        )
    for found, fix in _DRAIN_OPTIONS:
        if found in refusal:
            return "Kubernetes node {0} was not drained: {1} {2}, or move them{3}".format(node, refusal, fix, _LEFT)
    return "Kubernetes node {0} was not drained: {1}{2}".format(node, refusal.rstrip("."), _LEFT)


class FilterModule(FilterTable):
    """Rolling upgrade filters."""

    FILTERS = (upgrade_drain_failure, upgrade_give_back, upgrade_plan, upgrade_roll_errors, upgrade_take)
