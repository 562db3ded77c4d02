# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""GPU health filters: the judgement of plugins/module_utils/_health.py
(shared with gpufleet-verify-boot on the node) for the roles."""

from __future__ import annotations

import typing as t

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.module_utils import _health
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._filters import FilterTable


def _policy(name: str, policy: t.Any, prefix: str) -> _health.HealthPolicy:
    try:
        return _health.HealthPolicy.from_vars(policy, prefix=prefix)
    except ValueError as exc:
        raise AnsibleFilterError("{0}: {1}".format(name, exc)) from None


def health_policy_errors(policy: t.Any, prefix: str = _health.PREFIX) -> list[str]:
    """Every problem of the health variables (named with prefix) and its fix; [] when they are good."""
    return _health.policy_errors(policy, prefix)


def health_xid_events(kernel_log: t.Any) -> list[dict[str, t.Any]]:
    """The Xid and fallen-off-the-bus events of a kernel log (/dev/kmsg records, dmesg or journal lines)."""
    try:
        return _health.parse_kernel_log(kernel_log)
    except ValueError as exc:
        raise AnsibleFilterError("health_xid_events: {0}".format(exc)) from None


def health_findings(
    nvml: t.Any, kernel_log: t.Any = None, services: t.Any = None, policy: t.Any = None, prefix: str = _health.PREFIX
) -> list[dict[str, t.Any]]:
    """The health findings of one node from its nvml_info facts, kernel log text and service states."""
    judged_by = _policy("health_findings", policy, prefix)
    try:
        return _health.judge(nvml, _health.parse_kernel_log(kernel_log), services, judged_by)
    except ValueError as exc:
        raise AnsibleFilterError("health_findings: {0}".format(exc)) from None


def health_status(findings: t.Any) -> str:
    """pass, warn or fail from the worst finding."""
    if not isinstance(findings, list) or not all(isinstance(f, dict) and "severity" in f for f in findings):
        raise AnsibleFilterError("health_status: expected the list of health_findings")
    return _health.health_status(findings)


def health_metrics(nvml: t.Any, findings: t.Any, kernel_log: t.Any = None) -> str:
    """The node's health as a Prometheus node-exporter textfile."""
    if not isinstance(findings, list):
        raise AnsibleFilterError("health_metrics: expected the list of health_findings, got {0}".format(type(findings).__name__))
    try:
        return _health.metrics_text(nvml, findings, _health.kernel_events(kernel_log))
    except ValueError as exc:
        raise AnsibleFilterError("health_metrics: {0}".format(exc)) from None


class FilterModule(FilterTable):
    """GPU health filters."""

    FILTERS = (health_findings, health_metrics, health_policy_errors, health_status, health_xid_events)
